"""Ray's click CLI, played by the fake engine: ``cli.commands["start"].make_context(...)``."""


class _Start:
    def make_context(self, info_name, args):
        from fake_engine.cli import ray_start

        ray_start(list(args))
        return {"args": list(args)}


class _Cli:
    commands = {"start": _Start()}


cli = _Cli()
