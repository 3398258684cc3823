"""SGLang's ServerArgs, played by the fake engine: the real parser's flags and refusals."""


class ServerArgs:
    def __init__(self, parsed):
        self.parsed = parsed

    def check_server_args(self):
        tp = int(self.parsed.get("--tp-size") or 1)
        nnodes = int(self.parsed.get("--nnodes") or 1)
        if tp % nnodes:
            raise ValueError(f"tp_size ({tp}) must be divisible by nnodes ({nnodes})")


def prepare_server_args(argv):
    from fake_engine.cli import sglang_server_args

    return ServerArgs(sglang_server_args(argv))
