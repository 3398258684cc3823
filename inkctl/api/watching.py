"""Supervision after boot: what ``inkctl watch`` and ``up --watch`` do between their flags and
their output. Report a failure, run a hook, or restart the deployment.

A tensor-parallel group cannot lose one rank and go on, so a restart is the whole deployment:
down, then up (the same recipe, hosts and --set, and the options of its ``up``), in this
process, through the same api as the commands (``api.down``, ``api.up``); with backoff, at
most ``max_restarts_per_hour``. A down that could not clean a host is reported and nothing is
started over what it left. ``restart`` is the one restart loop: a fleet's replicas
(``api.fleet_watch``) go through it too. Progress is typed events (``Supervision``) sent to
the caller's sink; a cancel token (set on Ctrl-C by the command line) stops the watch.
"""

from __future__ import annotations

import json
import logging
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from inkctl.api.up import Watching  # how to supervise: defined beside up's options, which carry it
from inkctl.errors import EXIT_INTERRUPTED, EXIT_INVALID, InkctlError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from inkctl.api.target import Target
    from inkctl.api.up import UpOptions
    from inkctl.execute.events import Sink
    from inkctl.execute.supervise.watch import Failure, RestartBudget
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded


class Voice:
    """Supervision's events, typed (``execute.events.Supervision``), recorded in the run's
    record and scrubbed before the caller's sink sees them; thread-safe (a fleet's replicas
    report from threads of their own)."""

    def __init__(self, sink: Sink, prefix: str = "", **fields: Any):
        self.sink, self.prefix, self.fields = sink, prefix, fields

    def __call__(self, kind: str, text: str, **fields: Any) -> None:
        from inkctl.execute.events import Supervision

        self.sink.emit(Supervision(kind, self.prefix + text, {**fields, **self.fields}))

    def of(self, prefix: str, **fields: Any) -> Voice:
        """The same sink, each message prefixed (a replica's name) and these fields added."""
        return Voice(self.sink, self.prefix + prefix, **{**self.fields, **fields})


def told(sink: Sink) -> Voice:
    """``sink`` behind the run's record and the scrubber: what it is told has no secret left."""
    from inkctl import runlog
    from inkctl.execute.events import ScrubbingSink
    from inkctl.scrub import active

    class _Now:  # the scrubber armed at the time of each event (a restart's up arms more)
        def __call__(self, obj: Any) -> Any:
            return active()(obj)

    return Voice(runlog.recording(ScrubbingSink(sink, _Now())))  # type: ignore[arg-type]


class DownFailed(InkctlError):
    """A restart's down could not clean a host: nothing is started over what it left."""


def keep_watching(loaded: Loaded, plan: Plan, target: Target, how: Watching, say: Voice, *,
                  up_opts: UpOptions | None = None, cancel: threading.Event | None = None) -> None:
    """Supervise until a failure (raises InkctlError, after the hook) or, with ``restart``, for
    good. Returns when ``cancel`` is set or Ctrl-C stops it (the deployment is left as it is).
    A restart brings it up with ``up_opts`` (None: the options of its latest ``up`` in the run
    records, ``up_options_of``)."""
    from inkctl.execute.supervise.watch import RestartBudget

    stop = cancel or threading.Event()
    budget = RestartBudget(per_hour=how.max_restarts_per_hour, first_s=how.backoff)
    opts = up_opts if up_opts is not None else up_options_of(plan.deployment, how)
    try:
        while True:
            failure = supervise(loaded, plan, how.accept_new, how.interval, say, stuck_after=how.stuck_after, stop=stop)
            if failure is None:
                break
            say("failure", failure.message, cause=failure.cause, host=failure.host, rank=failure.rank)
            if how.hook:
                run_hook(how.hook, failure, say)
            if not how.restart:
                raise InkctlError(f"{plan.deployment}: {failure.message}",
                                  hint=f"inkctl logs {target.recipe} for the whole story; watch --restart brings it back by itself")
            if not restart(plan.deployment, how, budget, say, lambda: down_then_up(target, opts, stop), stop,
                           hint=f"find the cause (inkctl logs {target.recipe}), then inkctl up {target.recipe}"):
                break
    except KeyboardInterrupt:  # a second Ctrl-C: stopped all the same
        log.debug("watch: interrupted")
    say("stopped", f"stopped watching; {plan.deployment} is left as it is")


def restart(what: str, how: Watching, budget: RestartBudget, say: Voice, cycle: Callable[[], None],
            stop: threading.Event, *, named: bool = False, untouched: str = "", hint: str = "") -> bool:
    """The one restart loop: wait the backoff, then ``cycle()`` (down, then up), until it comes
    back (True) or ``stop`` is set (False). Raises InkctlError when the hour's budget is spent,
    or when up refuses for a reason that trying again cannot change (the recipe, a secret).
    ``named``: the refusals and failures start with ``what`` (one of a fleet's groups)."""
    label = f"{what}: " if named else ""
    last = ""
    while not stop.is_set():
        delay = budget.next_delay(time.monotonic())
        if delay is None:
            say("restart_refused", f"{label}{how.max_restarts_per_hour} restarts within the last hour: giving up")
            raise InkctlError(f"{what}: {how.max_restarts_per_hour} restarts within an hour; not restarting again"
                              + (f" (the last: {last})" if last else ""),
                              hint=hint or None)
        say("restart", f"restarting {what} in {delay:g} s: down, then up{untouched}")
        if stop.wait(delay):
            return False
        budget.spend(time.monotonic())
        try:
            cycle()
        except DownFailed as e:
            last = f"down failed: {why(e)}"
            say("restart_failed", f"{label}{last}; not starting it again over what is left")
            continue
        except InkctlError as e:
            if e.exit_code == EXIT_INTERRUPTED or stop.is_set():
                return False
            last = f"up failed (exit {e.exit_code}): {why(e)}"
            say("restart_failed", label + last)
            if e.exit_code == EXIT_INVALID:  # the recipe, a secret, a flag: trying again changes nothing
                raise InkctlError(f"{what}: up refused to start: {why(e)}", exit_code=EXIT_INVALID,
                                  hint="fix that, then run the watch again") from None
            continue
        say("restarted", f"{what} is up again")
        return True
    return False


def why(e: InkctlError) -> str:
    """An error on one line: its message, then its hint (what to do), at most 600 characters."""
    text = " ".join(ln.strip() for ln in e.message.splitlines() if ln.strip())
    if e.hint:
        text += f" (hint: {e.hint})"
    return text[:600]


def down_then_up(target: Target, opts: UpOptions, cancel: threading.Event) -> None:
    """One deployment down, checked (``DownFailed``: a host could not be cleaned, nothing is
    started), then up with ``opts``, in this process: its events go to the run's record."""
    from inkctl.api.down import down
    from inkctl.api.up import up
    from inkctl.execute.events import Collect

    result = down(target, accept_new=opts.accept_new)
    failure = result.failure()
    if failure is not None:
        raise DownFailed(failure.message, hint=failure.hint)
    up(target, opts, Collect, cancel=cancel)


def up_options_of(name: str, how: Watching) -> UpOptions:
    """The options of the latest ``up`` of deployment (or fleet) ``name`` in this machine's run
    records, for a watch's restart to keep them; none recorded: the defaults. The watch's own
    ``--accept-new-host-keys`` and ``--allow-socket-fallback`` are added; with ``watch`` set,
    so that the up returns once healthy (the watch supervises, the watchdog included)."""
    from inkctl import runlog
    from inkctl.api.up import UpOptions, options_from

    opts = UpOptions()
    for info in runlog.listing():
        if info.get("command") == "up" and name in (info.get("deployment"), info.get("fleet")) \
                and isinstance(info.get("up_options"), dict):
            opts = options_from(info["up_options"])
            break
    return replace(opts, accept_new=opts.accept_new or how.accept_new, watch=how,
                   allow_socket_fallback=opts.allow_socket_fallback or how.allow_socket_fallback)


def supervise(loaded: Loaded, plan: Plan, accept_new: bool, interval: float, say: Voice, stuck_after: float = 0.0,
              stop: threading.Event | None = None) -> Failure | None:
    """Connect (retrying while a host is away), then supervise until the first failure (returned)
    or ``stop`` (None)."""
    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.supervise.watch import Supervisor

    assert loaded.hosts is not None
    conn = connect_each(list(loaded.hosts), accept_new=accept_new)
    try:
        if conn.errors:
            from inkctl.execute.supervise.watch import Failure

            host, e = next(iter(conn.errors.items()))
            return Failure("host-lost", f"cannot reach {host}: {e.message.split(': ', 1)[-1]}", host, None, time.monotonic())
        from inkctl.api.measure.serving import recipe_api_key

        sup = Supervisor(plan, conn.transports, loaded.recipe, interval=interval, stuck_after_s=stuck_after or None,
                         on_state=lambda text: say("ok", text), api_key=recipe_api_key(loaded.recipe))
        if stop is not None:
            _linked(stop, sup)
        return sup.run()
    finally:
        close_all(conn.transports)


def _linked(outer: threading.Event, sup: Any) -> None:
    """``outer`` set stops the supervisor (its own ``stop`` is set when it ends, whatever ended it)."""
    def link() -> None:
        while not sup.stop.wait(0.2):
            if outer.is_set():
                sup.stop.set()
                sup.wake.set()

    threading.Thread(target=link, name="watch-stop", daemon=True).start()


def run_hook(hook: str, failure: Failure, say: Voice) -> None:
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
            say("hook_failed", f"hook {argv[0]} exited {res.returncode}")
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        say("hook_failed", f"hook failed: {e}")
