"""SGLang's ServerArgs, played by the fake engine: the real parser's flags and refusals."""


class ServerArgs:
    def __init__(self, parsed, argv):
        self.parsed, self.argv = parsed, list(argv)

    def resolve_once(self):
        from fake_engine.cli import sglang_checks

        sglang_checks(self.parsed)


def prepare_server_args(argv):
    from fake_engine.cli import sglang_server_args

    return ServerArgs(sglang_server_args(argv), argv)
