"""vLLM's EngineArgs, played by the fake engine: building the engine config is where the real
vLLM needs the model's config and a GPU, and where inkctl's argv proof stops."""


class EngineArgs:
    def __init__(self, parsed=None):
        self.parsed = parsed

    @classmethod
    def from_cli_args(cls, args):
        return cls(vars(args))

    def create_engine_config(self, *args, **kwargs):
        return {"parsed": self.parsed}


class AsyncEngineArgs(EngineArgs):
    pass
