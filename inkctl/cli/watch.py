"""``inkctl watch``: supervise a deployment after boot; report, run a hook, or restart it.

A tensor-parallel group cannot lose one rank and go on, so a restart is the whole deployment:
``inkctl down`` then ``inkctl up`` (the same recipe, hosts and --set), with backoff, at most
``--max-restarts-per-hour``. Events are text lines, or JSON lines with ``-o json``; every one
passes the scrubber.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.slurm import SlurmFlag
from inkctl.cli.options import (AcceptOpt, BackoffOpt, HookOpt, HostsOpt, IntervalOpt, MaxRestartsOpt, OutputOpt, RestartOpt,
                                SetOpt, SocketFallbackOpt, StuckAfterOpt, load_target, output_format)
from inkctl.errors import EXIT_INTERRUPTED, EXIT_INVALID, InkctlError


class Events:
    def __init__(self, fmt: str):
        self.fmt = fmt

    def __call__(self, event: str, text: str, **fields) -> None:
        from inkctl.scrub import active

        from inkctl import runlog

        scrub = active()
        runlog.event(event, message=text, **fields)
        if self.fmt == "json":
            print(json.dumps(scrub({"event": event, "message": text, **fields, "ts": round(time.time(), 3)})), flush=True)
        else:
            print(f"watch: {scrub.text(text)}", file=sys.stderr if event in ("failure", "restart_refused") else sys.stdout,
                  flush=True)


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
    if slurm:
        from inkctl.cli import slurm as slurm_cli

        return slurm_cli.watch(recipe, set_, fmt, interval)
    how = Watching(accept_new=accept_new_host_keys, restart=restart, hook=hook, interval=interval,
                   max_restarts_per_hour=max_restarts_per_hour, backoff=backoff,
                   allow_socket_fallback=allow_socket_fallback)
    from inkctl.cli.options import overrides
    from inkctl.recipe.gateway import is_gateway_file
    from inkctl.recipe.source import load_recipe

    if is_gateway_file(recipe):  # each model's group on its own, and the gateway (its engines listed)
        from inkctl.cli.fleet import fleet_watch, load_gateway_fleet

        lg, gw = load_gateway_fleet(recipe, hosts, "watch")
        fleet_watch(lg, gw, how, Events(fmt), supervise=supervise, run_hook=_run_hook)
        return
    if load_recipe(recipe, overrides(set_), hosts).recipe.fleet is not None:
        from inkctl.cli.fleet import fleet_watch, load_fleet

        loaded, fleet = load_fleet(recipe, hosts, set_, "watch")
        fleet_watch(loaded, fleet, how, Events(fmt), supervise=supervise, run_hook=_run_hook)
        return
    loaded, plan, _ = load_target(recipe, hosts, set_, "watch")
    keep_watching(loaded, plan, recipe, hosts, set_, Watching(
        accept_new=accept_new_host_keys, restart=restart, hook=hook, interval=interval, stuck_after=stuck_after,
        max_restarts_per_hour=max_restarts_per_hour, backoff=backoff,
        allow_socket_fallback=allow_socket_fallback), Events(fmt))


@dataclass(frozen=True)
class Watching:
    """How to supervise: the options ``watch`` and ``up --watch`` share."""

    accept_new: bool = False
    restart: bool = False
    hook: Optional[str] = None
    interval: float = 2.0
    stuck_after: float = 300.0
    max_restarts_per_hour: int = 3
    backoff: float = 5.0
    allow_socket_fallback: bool = False


def keep_watching(loaded, plan, recipe: Path, hosts: Optional[Path], set_, how: Watching, emit) -> None:
    """Supervise until a failure (raises InkctlError, after the hook) or, with ``restart``, for
    good; Ctrl-C detaches (exit 130) and leaves the deployment as it is."""
    from inkctl.execute.supervise.watch import RestartBudget

    budget = RestartBudget(per_hour=how.max_restarts_per_hour, first_s=how.backoff)
    again = [sys.executable, "-m", "inkctl"]
    where = [str(recipe)] + (["--hosts", str(hosts)] if hosts else []) + [x for s in (set_ or []) for x in ("--set", s)]
    up_flags = ["--allow-socket-fallback"] if how.allow_socket_fallback else []
    try:
        while True:
            failure = supervise(loaded, plan, how.accept_new, how.interval, emit, stuck_after=how.stuck_after)
            emit("failure", failure.message, cause=failure.cause, host=failure.host, rank=failure.rank)
            if how.hook:
                _run_hook(how.hook, failure, emit)
            if not how.restart:
                raise InkctlError(f"{plan.deployment}: {failure.message}",
                                  hint=f"inkctl logs {recipe} for the whole story; watch --restart brings it back by itself")
            while True:
                delay = budget.next_delay(time.monotonic())
                if delay is None:
                    emit("restart_refused", f"{how.max_restarts_per_hour} restarts within the last hour: giving up")
                    raise InkctlError(f"{plan.deployment}: {how.max_restarts_per_hour} restarts within an hour; not restarting again",
                                      hint=f"find the cause (inkctl logs {recipe}), then inkctl up {recipe}")
                emit("restart", f"restarting {plan.deployment} in {delay:g} s: down, then up")
                time.sleep(delay)
                budget.spend(time.monotonic())
                subprocess.run([*again, "down", *where], stdin=subprocess.DEVNULL, capture_output=True)
                up = subprocess.run([*again, "up", *where, *up_flags], stdin=subprocess.DEVNULL, capture_output=True, text=True)
                if up.returncode == 0:
                    emit("restarted", f"{plan.deployment} is up again")
                    break
                why = _why_up_failed(up.stderr)
                emit("restart_failed", f"up failed (exit {up.returncode}): {why}")
                if up.returncode == EXIT_INVALID:  # the recipe, a secret, a flag: trying again changes nothing
                    raise InkctlError(f"{plan.deployment}: up refused to start: {why}", exit_code=EXIT_INVALID,
                                      hint="fix that, then run the watch again")
    except KeyboardInterrupt:
        emit("stopped", f"stopped watching; {plan.deployment} is left as it is")
        raise typer.Exit(EXIT_INTERRUPTED)


def _why_up_failed(stderr: str) -> str:
    """What a failed ``up`` said: its last error with the hint after it, not just the last line."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    if not lines:
        return "(no output)"
    starts = [i for i, ln in enumerate(lines) if ln.startswith("error:")]
    text = " ".join(lines[starts[-1]:] if starts else lines[-1:])
    return text[:600]


def supervise(loaded, plan, accept_new: bool, interval: float, emit, stuck_after: float = 0.0):
    """Connect (retrying while a host is away), then supervise until the first failure."""
    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.supervise.watch import Supervisor

    conn = connect_each(list(loaded.hosts), accept_new=accept_new)
    try:
        if conn.errors:
            from inkctl.execute.supervise.watch import Failure

            host, e = next(iter(conn.errors.items()))
            return Failure("host-lost", f"cannot reach {host}: {e.message.split(': ', 1)[-1]}", host, None, time.monotonic())
        sup = Supervisor(plan, conn.transports, loaded.recipe, interval=interval, stuck_after_s=stuck_after or None,
                         on_state=lambda text: emit("ok", text))
        return sup.run()
    finally:
        close_all(conn.transports)


def _run_hook(hook: str, failure, emit) -> None:
    import os
    import shlex

    from inkctl.scrub import active

    try:
        argv = shlex.split(hook)
        env = {**os.environ, "INKCTL_EVENT": json.dumps(active()(failure.as_dict()))}
        res = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        if res.returncode != 0:
            emit("hook_failed", f"hook {argv[0]} exited {res.returncode}")
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        emit("hook_failed", f"hook failed: {e}")
