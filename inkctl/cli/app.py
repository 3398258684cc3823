"""The command line. Commands stay thin: load -> plan -> run or render -> print.

Expected failures (``InkctlError``) become one message and an exit code here, in one place;
a traceback shows only with ``--debug``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Callable, Optional

from inkctl import __version__
from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError

if TYPE_CHECKING:
    import typer

    app: typer.Typer  # made on first use (__getattr__): `inkctl validate` runs without typer

STATE = {"debug": False}
# commands that touch no host log nothing: they leave the logging module unimported (start-up)
PAPER = ("validate", "plan", "schema", "recipes")


def __getattr__(name: str) -> Any:
    """``app``, the typer application every command module registers on, made when one first
    asks for it: a command that runs without typer (``_light``) never imports it."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _app()


def _app() -> typer.Typer:
    made = globals().get("app")
    if made is None:
        made = globals()["app"] = _make_app()
    return made


def _make_app() -> typer.Typer:
    import typer

    made = typer.Typer(
        name="inkctl",
        help="Bring up giant MoE models on unusual hardware from a validated recipe.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=True,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )

    @made.callback()
    def _root(
        debug: bool = typer.Option(False, "--debug", help="Write the debug log to stderr and show tracebacks for unexpected errors (also: INKCTL_DEBUG=1)."),
        version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ) -> None:
        if debug:
            _debug_on()

    return made


def _version(value: bool) -> None:
    if value:
        import typer

        typer.echo(f"inkctl {__version__}")
        raise typer.Exit()


def _debug_on() -> None:
    STATE["debug"] = True
    from inkctl.cli.common.logconfig import configure

    configure(debug=True)


# Each command lives in one module; only the module of the command being run is imported, so
# `inkctl validate` never pays for what `inkctl up` needs (measured by benchmarks/startup.py).
COMMAND_MODULES = {
    "validate": "inkctl.cli.commands", "plan": "inkctl.cli.commands", "schema": "inkctl.cli.commands",
    "recipes": "inkctl.cli.commands", "up": "inkctl.cli.deploy", "down": "inkctl.cli.deploy",
    "build": "inkctl.cli.images", "lock": "inkctl.cli.images", "lease": "inkctl.cli.lease",
    "doctor": "inkctl.cli.observe",
    "status": "inkctl.cli.observe", "logs": "inkctl.cli.logs",
    "export": "inkctl.cli.export.app", "init": "inkctl.cli.project", "weights": "inkctl.cli.weights",
    "smoke": "inkctl.cli.bench", "bench": "inkctl.cli.bench", "results": "inkctl.cli.bench",
    "watch": "inkctl.cli.watch", "cache": "inkctl.cli.cache", "images": "inkctl.cli.images_push", "top": "inkctl.cli.fleet",
    "runs": "inkctl.cli.runs",
    "import": "inkctl.cli.importing",
}


def _light(args: list[str]) -> Callable[[], int] | None:
    """The command, ready to run without typer, when ARGS need no parser: ``validate`` with paths,
    --strict, -o (what CI runs on every push), ``plan`` with a recipe and its plain options.
    Anything else: None, and typer parses ARGS."""
    if not args or args[0] not in ("validate", "plan"):
        return None
    if args[0] == "plan":
        from inkctl.cli.plan import plain_arguments as plan_arguments
        from inkctl.cli.plan import plan

        plan_kwargs = plan_arguments(args[1:])
        return None if plan_kwargs is None else (lambda: plan(**plan_kwargs))
    from inkctl.cli.validate import plain_arguments, validate

    kwargs = plain_arguments(args[1:])
    return None if kwargs is None else (lambda: validate(**kwargs))


def _run_light(light: Callable[[], int]) -> int:
    """What typer's main does around a command, done around one run without it: end of input is
    an abort, Ctrl-C exit status 130, a closed pipe (``| head``) exit status 1 and nothing more."""
    import errno

    try:
        return light()
    except EOFError:
        print(file=sys.stderr)
        print("inkctl: aborted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        return 130
    except OSError as e:
        if e.errno != errno.EPIPE:
            raise
        sys.stdout, sys.stderr = _Pacified(sys.stdout), _Pacified(sys.stderr)
        sys.exit(1)


class _Pacified:
    """A stream whose flush says nothing of a closed pipe (what click puts in place of stdout
    and stderr then, so that the interpreter's last flush prints no traceback)."""

    def __init__(self, wrapped: Any):
        self.wrapped = wrapped

    def flush(self) -> None:
        import errno

        try:
            self.wrapped.flush()
        except OSError as e:
            if e.errno != errno.EPIPE:
                raise

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.wrapped, attr)


def _register(argv: list[str]) -> None:
    import os

    words = [a for a in argv if not a.startswith("-")]
    wanted = COMMAND_MODULES.get(words[0]) if words else None
    if wanted is None or os.environ.get("_INKCTL_COMPLETE"):  # help, completion, a typo: everything
        modules = sorted(set(COMMAND_MODULES.values()))
    else:
        modules = [wanted]
    for mod in modules:
        __import__(mod)


def run() -> None:
    """The process entry point (``inkctl`` and ``python -m inkctl``): ``main``, then exit without
    the interpreter's teardown. By then every connection, file and thread of the command is
    closed; what is left is freeing a thousand modules' objects one by one, which ``up`` felt
    as seconds on a loaded machine. Output is flushed first; ``main`` stays importable."""
    import os

    _fewer_collections(sys.argv[1:])
    code = 0
    try:
        main()
    except SystemExit as e:
        if isinstance(e.code, int):
            code = e.code
        elif e.code is not None:
            print(e.code, file=sys.stderr)
            code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 1  # as Python reports a failed flush at exit (e.g. a closed pipe)
    os._exit(code)


def _fewer_collections(args: list[str]) -> None:
    """A command on paper (``PAPER``) runs for a moment and ends the process: the garbage
    collector's passes over what importing pydantic and building the model classes allocates
    (nearly none of it garbage) were 2.5% of ``validate``'s instructions and of ``plan``'s
    (benchmarks/startup.py --instructions). It still collects, less often; commands that run
    for long keep Python's defaults."""
    words = [a for a in args if not a.startswith("-")]
    if words and words[0] in PAPER:
        import gc

        gc.set_threshold(50_000, 20, 100)


def main(argv: list[str] | None = None) -> None:
    import os

    # pydantic looks for plugins (observability hooks such as logfire) by reading the metadata of
    # every installed distribution when the first model is built: a third of `validate`'s own
    # time (benchmarks/startup.py). A recipe needs none; set the variable to "" to have them back.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _no_plugin_loader()
    _no_extras()
    args = sys.argv[1:] if argv is None else list(argv)
    STATE["debug"] = os.environ.get("INKCTL_DEBUG", "") not in ("", "0")
    words = [a for a in args if not a.startswith("-")]
    if STATE["debug"] or (words and words[0] not in PAPER):
        from inkctl.cli.common.logconfig import configure

        configure(debug=STATE["debug"])
    light = None if os.environ.get("_INKCTL_COMPLETE") else _light(args)
    if light is None:
        _register(args)
    _fold_pipes(args)
    record = _record(args)
    code: int | str | None = 0
    try:
        _dispatch(args, light)
    except SystemExit as e:
        code = e.code
        raise
    except BaseException as e:  # with --debug an internal error goes on up, as a traceback
        code = 70 if isinstance(e, Exception) else EXIT_INTERRUPTED
        raise
    finally:
        if record is not None:
            from inkctl import runlog

            runlog.finish(code if isinstance(code, int) else (0 if code is None else 1))


# commands whose text output fits a screen also in a pipe or a file (a terminal folds it already);
# left whole: what other programs read (-o json/yaml, export, schema, completion) and engine
# log lines (`inkctl logs > file; grep`), which are the engines' own, not inkctl's
FOLDED = ("plan", "validate", "recipes", "up", "down", "status", "doctor", "smoke", "bench", "results", "init",
          "runs", "lock", "build", "weights", "cache", "images", "lease", "import", "watch")


def _fold_pipes(args: list[str]) -> None:
    """stdout and stderr that are no terminal: every line folded to $COLUMNS (else 80) columns."""
    words = [a for a in args if not a.startswith("-")]
    if not words or words[0] not in FOLDED or _machine_format(args):
        return
    from inkctl.cli.show.terminal import Folded, _isatty, screen_width

    width = screen_width()
    if not _isatty(sys.stdout):
        sys.stdout = Folded(sys.stdout, width)
    if not _isatty(sys.stderr):
        sys.stderr = Folded(sys.stderr, width)


def _machine_format(args: list[str]) -> bool:
    """-o json / --output yaml / -ojson / --output=json: output for programs, never folded."""
    for i, a in enumerate(args):
        value = None
        if a in ("-o", "--output") and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--output="):
            value = a.split("=", 1)[1]
        elif a.startswith("-o") and len(a) > 2 and not a.startswith("--"):
            value = a[2:]
        if value is not None and value.lower() != "text":
            return True
    return False


def _no_plugin_loader() -> None:
    """With plugins off, pydantic still imports its plugin loader, and with it importlib.metadata
    (a tenth of `validate`'s start-up), only to hear "no plugins". Answer that here; any other
    name asked of the loader loads the real one (a pydantic that changed it keeps working)."""
    import os
    import types

    name = "pydantic.plugin._loader"
    if name in sys.modules or os.environ.get("PYDANTIC_DISABLE_PLUGINS") not in ("__all__", "1", "true"):
        return
    stub = types.ModuleType(name)

    def get_plugins() -> tuple:
        return ()

    def real(attr: str) -> Any:
        if attr.startswith("__"):  # what the import machinery asks of any module (__path__, ...)
            raise AttributeError(attr)
        import importlib

        del sys.modules[name]
        return getattr(importlib.import_module(name), attr)

    stub.get_plugins = get_plugins  # type: ignore[attr-defined]
    stub.__getattr__ = real  # type: ignore[method-assign]
    sys.modules[name] = stub


def _no_extras() -> None:
    """Two libraries import extras no command uses, each a tenth of a second or more of `up`'s
    start-up on a busy machine (benchmarks/launch.py): httpx its own command-line client
    (click, rich, pygments) whenever those are installed, which typer brings, and paramiko
    ``invoke`` (with unittest.mock and asyncio) for ssh_config's ``Match exec``. httpx's client
    is made unimportable here, as if those were missing (httpx then defines a ``main`` that says
    so); ``invoke`` gets a stand-in that imports the real one the moment paramiko uses it, so a
    ``Match exec`` line still runs."""
    import importlib.util
    import types

    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: "not importable"
    name = "invoke"
    if name in sys.modules:
        return
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:  # not installed: paramiko says so itself when a Match exec line needs it
        return
    stub = types.ModuleType(name)
    stub.__spec__ = spec

    def real(attr: str) -> Any:
        if attr.startswith("__"):  # what the import machinery asks of any module (__path__, ...)
            raise AttributeError(attr)
        import importlib

        if sys.modules.get(name) is stub:
            del sys.modules[name]
        return getattr(importlib.import_module(name), attr)

    stub.__getattr__ = real  # type: ignore[method-assign]
    sys.modules[name] = stub


def _record(args: list[str]):
    """The run's record directory (inkctl.runlog) for the commands that change hosts."""
    words = [a for a in args if not a.startswith("-")]
    if not words or words[0] in PAPER or "--help" in args:
        return None
    from inkctl import runlog

    if words[0] not in runlog.RECORDED:
        return None

    return runlog.start(words[0], args)


def _failed(message: str, hint: str | None = None) -> None:
    """What the user was told, for the run's record."""
    from inkctl import runlog

    runlog.note(error=message, hint=hint)


def _dispatch(args: list[str], light: Callable[[], int] | None = None) -> None:
    try:
        if light is not None:
            rv = _run_light(light)
        else:
            import typer.main

            from inkctl.cli.common.helptext import polish

            command = typer.main.get_command(_app())
            polish(command)
            # `inkctl` alone: the help, and success (click's no_args_is_help exits 2 since 8.2)
            rv = command.main(args=args or ["--help"], prog_name="inkctl", standalone_mode=False)
        if isinstance(rv, int) and rv:
            sys.exit(rv)  # typer.Exit(code) comes back as a return value without standalone mode
    except InkctlError as e:
        from inkctl.cli.show.errors_view import print_error

        print_error(e)
        _failed(e.message, e.hint)
        sys.exit(e.exit_code)
    except (KeyboardInterrupt, Cancelled):
        print("inkctl: interrupted", file=sys.stderr)
        _failed("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except Exception as e:  # the CLI parser's own errors (typer may vendor click), and real bugs
        names = {c.__name__ for c in type(e).__mro__}
        err: Any = e  # typer's click lives in a private module (typer._click): told by class name
        if "Exit" in names and hasattr(err, "exit_code"):
            sys.exit(err.exit_code)
        if "ClickException" in names:
            err.show()
            _failed(str(getattr(err, "format_message", lambda: err)()))
            sys.exit(err.exit_code)
        if "Abort" in names:
            print("inkctl: aborted", file=sys.stderr)
            sys.exit(EXIT_INTERRUPTED)
        if "logging" in sys.modules:  # configured: the traceback goes to the run's debug.log
            import logging

            logging.getLogger("inkctl.cli").debug("internal error", exc_info=True)
        _failed(f"internal error: {type(e).__name__}: {e}")
        if STATE["debug"]:
            raise
        print(f"inkctl: internal error: {type(e).__name__}: {e}\n(run with --debug for the traceback, and please report it)", file=sys.stderr)
        sys.exit(70)
