"""``inkctl watch``: supervise a deployment after boot; report, run a hook, or restart it.

Thin: the backend (``--slurm``), the supervision, the restarts (in process, through the same
api as up and down) and the hook are the api's (``api.backend``, ``api.watching``; ``up
--watch`` hands over to the same). Events are text lines, or JSON lines with ``-o json``;
every one passes the scrubber. Ctrl-C sets the api's cancel token.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.show.slurm import SlurmFlag
from inkctl.cli.common.options import (AcceptOpt, BackoffOpt, HookOpt, HostsOpt, IntervalOpt, MaxRestartsOpt, OutputOpt, RestartOpt,
                                SetOpt, SocketFallbackOpt, StuckAfterOpt, output_format)
from inkctl.errors import EXIT_INTERRUPTED


class Events:
    """Supervision events (``Supervision``) as lines (failures to stderr), or JSON lines with
    ``-o json``; the api has recorded and scrubbed them (``api.watching.told``)."""

    def __init__(self, fmt: str):
        import threading

        self.fmt = fmt
        self._lock = threading.Lock()  # a fleet's replicas report from threads of their own: whole lines

    def emit(self, ev) -> None:
        if self.fmt == "json":
            line, out = json.dumps({**ev.as_dict(), "ts": round(time.time(), 3)}), sys.stdout
        else:
            line, out = f"watch: {ev.message}", sys.stderr if ev.kind in ("failure", "restart_refused") else sys.stdout
        with self._lock:
            print(line, file=out, flush=True)

    def close(self) -> None:
        pass


@app.command()
def watch(
    recipe: Path = typer.Argument(..., metavar="RECIPE", help="A recipe file, or the name of a bundled recipe (see inkctl recipes)."),
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
    restart: bool = RestartOpt,
    hook: Optional[str] = HookOpt,
    interval: float = IntervalOpt,
    stuck_after: float = StuckAfterOpt,
    max_restarts_per_hour: int = MaxRestartsOpt,
    backoff: float = BackoffOpt,
    allow_socket_fallback: bool = SocketFallbackOpt,
    slurm: bool = SlurmFlag,
) -> None:
    """Supervise a running deployment: every rank, every host, health, memory, fatal log lines,
    and progress (requests waiting while no token is generated: a stuck engine core).

    With --slurm: the job's state, every rank's status and health; the job ending: exit 1."""
    fmt = output_format(output)
    from inkctl.api import backend
    from inkctl.api.target import Target
    from inkctl.api.watching import Watching
    from inkctl.cli.common.signals import cancel_token
    from inkctl.cli.show.slurm import Lines

    how = Watching(accept_new=accept_new_host_keys, restart=restart, hook=hook, interval=interval, stuck_after=stuck_after,
                   max_restarts_per_hour=max_restarts_per_hour, backoff=backoff,
                   allow_socket_fallback=allow_socket_fallback)
    with cancel_token() as cancel:  # Ctrl-C stops watching (a restart under way rolls back); a second one at once
        backend.watch(Target.of(recipe, hosts, set_, slurm=slurm), how, Lines(fmt) if slurm else Events(fmt),
                      cancel=cancel)
    raise typer.Exit(EXIT_INTERRUPTED)  # stopped watching (Ctrl-C); the deployment is left as it is
