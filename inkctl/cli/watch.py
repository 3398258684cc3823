"""``inkctl watch``: supervise a deployment after boot; report, run a hook, or restart it.

A tensor-parallel group cannot lose one rank and go on, so a restart is the whole deployment:
``inkctl down`` then ``inkctl up`` (the same recipe, hosts and --set), with backoff, at most
``--max-restarts-per-hour``. Events are text lines, or JSON lines with ``-o json``; every one
passes the scrubber.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.slurm import SlurmFlag
from inkctl.cli.options import (AcceptOpt, BackoffOpt, HookOpt, HostsOpt, IntervalOpt, MaxRestartsOpt, OutputOpt, RestartOpt,
                                SetOpt, SocketFallbackOpt, load_target, output_format)
from inkctl.api.watching import Watching, keep_watching


class Events:
    def __init__(self, fmt: str):
        self.fmt = fmt

    def __call__(self, event: str, text: str, **fields) -> None:
        from inkctl.scrub import active

        scrub = active()
        if self.fmt == "json":
            print(json.dumps(scrub({"event": event, "message": text, **fields, "ts": round(time.time(), 3)})), flush=True)
        else:
            print(f"watch: {scrub.text(text)}", file=sys.stderr if event in ("failure", "restart_refused") else sys.stdout,
                  flush=True)


@app.command()
def watch(
    recipe: Path = typer.Argument(..., help="Recipe file."),
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
    restart: bool = RestartOpt,
    hook: Optional[str] = HookOpt,
    interval: float = IntervalOpt,
    max_restarts_per_hour: int = MaxRestartsOpt,
    backoff: float = BackoffOpt,
    allow_socket_fallback: bool = SocketFallbackOpt,
    slurm: bool = SlurmFlag,
) -> None:
    """Supervise a running deployment: every rank, every host, health, memory and fatal log lines.

    With --slurm: the job's state, every rank's status and health; the job ending: exit 1."""
    fmt = output_format(output)
    if slurm:
        from inkctl.cli import slurm as slurm_cli

        return slurm_cli.watch(recipe, set_, fmt, interval)
    loaded, plan, _ = load_target(recipe, hosts, set_, "watch")
    keep_watching(loaded, plan, recipe, hosts, set_, Watching(
        accept_new=accept_new_host_keys, restart=restart, hook=hook, interval=interval,
        max_restarts_per_hour=max_restarts_per_hour, backoff=backoff,
        allow_socket_fallback=allow_socket_fallback), Events(fmt))
