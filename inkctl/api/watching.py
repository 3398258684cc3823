"""Supervising a deployment after boot: what ``inkctl watch`` and ``up --watch`` run.

A tensor-parallel group cannot lose one rank and go on, so a restart is the whole deployment:
``inkctl down`` then ``inkctl up`` (the same recipe, hosts and --set), with backoff, at most
``max_restarts_per_hour``. Every event goes to ``emit(event, text, **fields)``; the command
line decides how it is shown.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from inkctl.errors import EXIT_INTERRUPTED, InkctlError


@dataclass(frozen=True)
class Watching:
    """How to supervise: the options ``watch`` and ``up --watch`` share."""

    accept_new: bool = False
    restart: bool = False
    hook: Optional[str] = None
    interval: float = 2.0
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
            failure = supervise(loaded, plan, how.accept_new, how.interval, emit)
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
                last = (up.stderr.strip().splitlines() or ["(no output)"])[-1]
                emit("restart_failed", f"up failed (exit {up.returncode}): {last}")
    except KeyboardInterrupt:
        emit("stopped", f"stopped watching; {plan.deployment} is left as it is")
        raise SystemExit(EXIT_INTERRUPTED) from None


def supervise(loaded, plan, accept_new: bool, interval: float, emit):
    """Connect (retrying while a host is away), then supervise until the first failure."""
    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.supervise.watch import Supervisor

    conn = connect_each(list(loaded.hosts), accept_new=accept_new)
    try:
        if conn.errors:
            from inkctl.execute.supervise.watch import Failure

            host, e = next(iter(conn.errors.items()))
            return Failure("host-lost", f"cannot reach {host}: {e.message.split(': ', 1)[-1]}", host, None, time.monotonic())
        sup = Supervisor(plan, conn.transports, loaded.recipe, interval=interval,
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
