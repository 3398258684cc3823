"""The command line. Commands stay thin: load -> plan -> run or render -> print.

Expected failures (``InkctlError``) become one message and an exit code here, in one place;
a traceback shows only with ``--debug``.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from inkctl import __version__
from inkctl.errors import EXIT_INTERRUPTED, InkctlError

app = typer.Typer(
    name="inkctl",
    help="Bring up giant MoE models on unusual hardware from a validated recipe.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    rich_markup_mode=None,
)

STATE = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"inkctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for unexpected errors."),
    version: Optional[bool] = typer.Option(None, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    STATE["debug"] = debug


def _register() -> None:
    from inkctl.cli import commands  # noqa: F401  (registers validate, plan, schema, recipes)

    for mod in ("inkctl.cli.deploy", "inkctl.cli.images", "inkctl.cli.guard", "inkctl.cli.observe"):
        try:
            __import__(mod)
        except ModuleNotFoundError as e:  # a command module not written yet
            if e.name != mod:
                raise


def main(argv: list[str] | None = None) -> None:
    _register()
    try:
        rv = app(args=argv, standalone_mode=False)
        if isinstance(rv, int) and rv:
            sys.exit(rv)  # typer.Exit(code) comes back as a return value without standalone mode
    except InkctlError as e:
        from inkctl.cli.render import print_error

        print_error(e)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        print("inkctl: interrupted", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except Exception as e:  # click's own usage errors and real bugs
        import click

        if isinstance(e, click.exceptions.Exit):
            sys.exit(e.exit_code)
        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, click.exceptions.Abort):
            print("inkctl: aborted", file=sys.stderr)
            sys.exit(EXIT_INTERRUPTED)
        if STATE["debug"]:
            raise
        print(f"inkctl: internal error: {type(e).__name__}: {e}\n(run with --debug for the traceback, and please report it)", file=sys.stderr)
        sys.exit(70)
