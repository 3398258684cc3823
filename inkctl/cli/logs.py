"""``logs``: every rank's log merged, each line prefixed host/rank.

Thin: ``inkctl.api.observe.logs`` loads, picks the ranks, connects, reads (or follows) and masks; this
module checks the flags and prints each line as it comes (a colour per rank on a terminal,
plain otherwise, or JSON lines); the api picks the backend (``--slurm``: the job's output).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
import sys
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import AcceptOpt, HostsOpt, OutputOpt, RecipeArg, SetOpt, accepted, output_format
from inkctl.cli.show.slurm import SlurmFlag
from inkctl.errors import UsageError

PREFIX_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta",
                  "bright_green", "bright_yellow", "bright_blue", "red")


@app.command()
def logs(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    follow: bool = typer.Option(False, "--follow", "-f", help="Follow every rank at once until Ctrl-C."),
    tail: Optional[str] = typer.Option(None, "--tail", help="Lines from the end of each rank's log (a number or 'all')."),
    since: Optional[str] = typer.Option(None, "--since", help="Only lines since this time (e.g. 10m, 2026-11-29T16:00:00)."),
    rank: Optional[int] = typer.Option(None, "--rank", help="Only this rank."),
    host: Optional[str] = typer.Option(None, "--host", help="Only this host."),
    output: str = OutputOpt,
    slurm: bool = SlurmFlag,
) -> None:
    """Every rank's log merged, each line prefixed host/rank (JSON lines with --output json).

    With --slurm: the job's output, every rank's lines prefixed 'RANK: ' (srun --label)."""
    fmt = output_format(output)
    if tail is not None and not (tail.isdigit() or tail == "all"):
        raise UsageError(f"--tail must be a number of lines or 'all', not {tail!r}")
    from inkctl.api import backend
    from inkctl.api.observe.logs import LogsOptions
    from inkctl.api.target import Target

    opts = LogsOptions(follow=follow, tail=tail, since=since, rank=rank, host=host, accept_new=accept_new_host_keys)
    from inkctl.cli.common.signals import cancel_token

    # following: Ctrl-C ends it where the loop looks (every 0.2 s), never inside a print or a lock;
    # a snapshot keeps Ctrl-C as it is (it would not look at a token)
    with cancel_token() if follow else nullcontext() as cancel:
        backend.logs(Target.of(recipe, hosts, set_, slurm=slurm), opts, _LinePrinter(fmt), on_accept=accepted,
                     cancel=cancel)


class _LinePrinter:
    """Prefix each line with host/rank: a colour per rank on a terminal, plain otherwise, or JSON.
    Lines and notes come masked (``api.logs``). A Slurm job's lines come labelled by srun: as they are."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.tty = sys.stdout.isatty() and fmt == "text"

    def ranks(self, srcs) -> None:
        width = max(len(s.prefix) for s in srcs)
        self.prefix = {(s.host, s.rank): s.prefix.ljust(width) for s in srcs}
        self.style = {(s.host, s.rank): PREFIX_COLOURS[i % len(PREFIX_COLOURS)] for i, s in enumerate(srcs)}

    def line(self, ln) -> None:
        if isinstance(ln, str):
            print(ln, flush=True)
            return
        key = (ln.host, ln.rank)
        if self.fmt == "json":
            sys.stdout.write(json.dumps(ln.as_dict()) + "\n")
        elif self.tty:
            self._coloured(self.prefix[key], self.style[key], ln.line)
            return
        else:
            sys.stdout.write(f"{self.prefix[key]} | {ln.line}\n")
        sys.stdout.flush()

    @staticmethod
    def _coloured(prefix: str, style: str, line: str) -> None:
        import textwrap

        from rich.text import Text

        from inkctl.cli.show.terminal import console

        out = console()
        # the terminal's width: a long line goes on under its prefix, never under the one before
        room = max(20, out.width - len(prefix) - 3)
        parts = textwrap.wrap(line, room, break_on_hyphens=False, drop_whitespace=False) or [""]
        for i, part in enumerate(parts):
            text = Text((prefix if i == 0 else " " * len(prefix)) + " | ", style=style)
            text.append(part.rstrip())
            out.print(text, soft_wrap=True)

    def note(self, text: str) -> None:
        print(f"inkctl: {text}", file=sys.stderr, flush=True)
