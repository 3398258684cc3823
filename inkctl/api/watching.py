"""Supervision after boot: what ``inkctl watch`` and ``up --watch`` do between their flags and
their output. Report a failure, run a hook, or restart the deployment.

A tensor-parallel group cannot lose one rank and go on, so a restart is the whole deployment:
``inkctl down`` then ``inkctl up`` (the same recipe, hosts and --set), with backoff, at most
``max_restarts_per_hour``. Progress goes to ``emit(event, text, **fields)``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from inkctl.api.target import Target, one_group, plan_for
from inkctl.errors import EXIT_INVALID, InkctlError

if TYPE_CHECKING:
    from inkctl.plan.step import Plan
    from inkctl.recipe.loaded import Loaded

Emit = Callable[..., None]  # emit(event, text, **fields)


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


def watch(target: Target, how: Watching, emit: Emit, *, fleet: Callable[[Loaded, Emit], Any] | None = None,
          gateway: Callable[[Target, Emit], Any] | None = None) -> None:
    """Supervise the deployment ``target`` names (``keep_watching``). A recipe with ``fleet:``
    is handed, loaded, to ``fleet(loaded, emit)`` (the fleet's own supervision), a gateway file
    to ``gateway(target, emit)``. Returns when stopped (Ctrl-C); raises InkctlError on a
    failure it does not restart from."""
    loaded = one_group(
        target, "watch",  # a gateway: each model's group on its own, and the gateway
        gateway=None if gateway is None else (lambda t: gateway(t, told(emit))),
        gateway_usage="a gateway file: each model's group is supervised on its own (inkctl watch FILE)",
        fleet=None if fleet is None else (lambda ld: fleet(ld, told(emit))),
        fleet_usage="a fleet: its replicas are supervised each on its own (inkctl watch RECIPE)")
    if loaded is None:
        return
    plan, _ = plan_for(loaded, target)
    keep_watching(loaded, plan, target, how, emit)


def keep_watching(loaded: Loaded, plan: Plan, target: Target, how: Watching, emit: Emit) -> None:
    """Supervise until a failure (raises InkctlError, after the hook) or, with ``restart``, for
    good. Returns when Ctrl-C stops it (the deployment is left as it is). Every event is
    recorded in the run's record, then scrubbed for ``emit``."""
    from inkctl.execute.supervise.watch import RestartBudget

    emit = told(emit)
    budget = RestartBudget(per_hour=how.max_restarts_per_hour, first_s=how.backoff)
    try:
        while True:
            failure = supervise(loaded, plan, how.accept_new, how.interval, emit, stuck_after=how.stuck_after)
            emit("failure", failure.message, cause=failure.cause, host=failure.host, rank=failure.rank)
            if how.hook:
                run_hook(how.hook, failure, emit)
            if not how.restart:
                raise InkctlError(f"{plan.deployment}: {failure.message}",
                                  hint=f"inkctl logs {target.recipe} for the whole story; watch --restart brings it back by itself")
            _restart(plan, target, how, budget, emit)
    except KeyboardInterrupt:
        emit("stopped", f"stopped watching; {plan.deployment} is left as it is")


def told(emit: Emit) -> Emit:
    """``emit`` behind the run's record and the scrubber: what it is told has no secret left."""
    from inkctl import runlog
    from inkctl.scrub import active

    def out(event: str, text: str, **fields: Any) -> None:
        scrub = active()
        runlog.event(event, message=text, **fields)
        emit(event, scrub.text(text), **scrub(fields))

    return out


def _restart(plan: Plan, target: Target, how: Watching, budget, emit: Emit) -> None:
    """``inkctl down`` then ``inkctl up`` until up succeeds; raises when the budget is spent or
    up refuses for a reason that trying again cannot change."""
    again = [sys.executable, "-m", "inkctl"]
    where = ([str(target.recipe)] + (["--hosts", str(target.hosts)] if target.hosts else [])
             + [x for s in target.sets for x in ("--set", s)])
    up_flags = ["--allow-socket-fallback"] if how.allow_socket_fallback else []
    while True:
        delay = budget.next_delay(time.monotonic())
        if delay is None:
            emit("restart_refused", f"{how.max_restarts_per_hour} restarts within the last hour: giving up")
            raise InkctlError(f"{plan.deployment}: {how.max_restarts_per_hour} restarts within an hour; not restarting again",
                              hint=f"find the cause (inkctl logs {target.recipe}), then inkctl up {target.recipe}")
        emit("restart", f"restarting {plan.deployment} in {delay:g} s: down, then up")
        time.sleep(delay)
        budget.spend(time.monotonic())
        subprocess.run([*again, "down", *where], stdin=subprocess.DEVNULL, capture_output=True)
        up = subprocess.run([*again, "up", *where, *up_flags], stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if up.returncode == 0:
            emit("restarted", f"{plan.deployment} is up again")
            return
        why = why_up_failed(up.stderr)
        emit("restart_failed", f"up failed (exit {up.returncode}): {why}")
        if up.returncode == EXIT_INVALID:  # the recipe, a secret, a flag: trying again changes nothing
            raise InkctlError(f"{plan.deployment}: up refused to start: {why}", exit_code=EXIT_INVALID,
                              hint="fix that, then run the watch again")


def why_up_failed(stderr: str) -> str:
    """What a failed ``up`` said: its last error with the hint after it, not just the last line."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    if not lines:
        return "(no output)"
    starts = [i for i, ln in enumerate(lines) if ln.startswith("error:")]
    text = " ".join(lines[starts[-1]:] if starts else lines[-1:])
    return text[:600]


def supervise(loaded: Loaded, plan: Plan, accept_new: bool, interval: float, emit: Emit, stuck_after: float = 0.0):
    """Connect (retrying while a host is away), then supervise until the first failure."""
    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.supervise.watch import Supervisor

    assert loaded.hosts is not None
    conn = connect_each(list(loaded.hosts), accept_new=accept_new)
    try:
        if conn.errors:
            from inkctl.execute.supervise.watch import Failure

            host, e = next(iter(conn.errors.items()))
            return Failure("host-lost", f"cannot reach {host}: {e.message.split(': ', 1)[-1]}", host, None, time.monotonic())
        from inkctl.api.serving import recipe_api_key

        sup = Supervisor(plan, conn.transports, loaded.recipe, interval=interval, stuck_after_s=stuck_after or None,
                         on_state=lambda text: emit("ok", text), api_key=recipe_api_key(loaded.recipe))
        return sup.run()
    finally:
        close_all(conn.transports)


def run_hook(hook: str, failure, emit: Emit) -> None:
    """The ``--hook`` command, argv split like a shell would (never run by one), the failure in
    ``$INKCTL_EVENT`` as JSON (scrubbed)."""
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
