"""``up`` below the command line: everything it prepares, runs and says, in order.

Load (recipe, hosts, --set), trust (hotfix files, lock pins), plan, resolve the secrets and
arm the scrubber before any host is touched; optionally send the image host to host; then
the bring-up (``execute.deploy.bringup``, stopped by the caller's cancel token), the boot
record, the failure's last words (what was left, how to clean up, scrubbed) and the
``Finished`` event. The caller picks the display (``display``) and says the result
(``on_up``): the command line does, and so can a test. ``api.backend.up`` picks this for one
deployment on SSH hosts (a fleet, a gateway file, Slurm elsewhere) and hands over to
supervision with ``watch``.

up is all-or-nothing: every host is connected (and its key checked) before anything starts
anywhere, and any failure after that (a step, a crashed rank, a health timeout, Ctrl-C,
SIGTERM) runs the plan's teardown on every host this run touched.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from inkctl.api.secured import Secured, secrets_for, secure
from inkctl.api.target import Target, load, plan_for
from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError, UsageError

if TYPE_CHECKING:
    from inkctl.api.slurm import SlurmRequest
    from inkctl.execute.deploy.runner import Outcome
    from inkctl.execute.events import Sink
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded


@dataclass(frozen=True)
class Watching:
    """How to supervise: the options ``watch`` and ``up --watch`` share (``api/watching.py``)."""

    accept_new: bool = False
    restart: bool = False
    hook: Optional[str] = None
    interval: float = 2.0
    stuck_after: float = 300.0
    max_restarts_per_hour: int = 3
    backoff: float = 5.0
    allow_socket_fallback: bool = False


@dataclass(frozen=True)
class UpOptions:
    accept_new: bool = False  # trust hosts whose key is not in known_hosts yet (and record it)
    keep: bool = False  # on failure leave what was started (--keep-on-failure)
    timeout: float | None = None  # the health wait (default: the recipe's health.timeout_s)
    skip: tuple[str, ...] = ()  # preflight checks to skip, by name
    detach: bool = False  # Ctrl-C during the health wait leaves it booting
    allow_socket_fallback: bool = False  # with network.rdma: NCCL on TCP sockets is a warning
    distribute_image: bool = False  # first send the image host to host where it is missing
    results_dir: Path = Path("bench-results")  # boot records: boots/DEPLOYMENT/
    watch: Watching | None = None  # once healthy, stay and supervise (up --watch; api.backend)
    slurm: SlurmRequest | None = None  # the --slurm side's own flags (api.backend's Slurm)


@dataclass
class UpResult:
    """How ``up`` ended well."""

    plan: Plan
    outcome: Outcome  # status, url, health and readiness times, smoke results, the boot record
    seconds: float  # since up started
    follow: str = ""  # left booting (detached): how to follow it and remove it
    ready_after_s: float | None = None  # from the head container's start to the first answer
    first_ttft_s: float | None = None  # that answer's time to first token
    watch_stopped: bool = False  # up --watch: supervised until Ctrl-C detached it

    @property
    def already(self) -> bool:
        """The same version was up and healthy: nothing changed."""
        from inkctl.execute.deploy.runner import UpStatus

        return self.outcome.status is UpStatus.ALREADY


def up(target: Target, opts: UpOptions, display: Callable[[], Sink], *,
       on_up: Callable[[UpResult], None] | None = None, cancel: threading.Event | None = None) -> UpResult:
    """Bring one deployment up on its hosts (a fleet or a gateway file: ``api.backend.up``, which
    picks the backend and the kind). ``display()`` makes the event sink (called once the scrubber
    is armed: everything it receives passes it). ``on_up(result)`` is called once, as soon as the
    deployment is up (before up stays attached to the watchdog). ``cancel`` set stops it and
    rolls back (the command line sets it on Ctrl-C/SIGTERM). Raises InkctlError (its message
    scrubbed) on failure, with exit code 130 when cancelled."""
    t0 = time.monotonic()
    from inkctl.execute.hosts.warm import warm_imports
    from inkctl.recipe.reading.filekind import is_gateway_file

    warm_imports("paramiko")  # the connections need it; the recipe loads meanwhile
    if is_gateway_file(target.recipe):
        raise UsageError("a gateway file: its groups come up through the fleet's bring-up (inkctl up FILE)")
    loaded = load(target, "up")
    if loaded.recipe.fleet is not None:
        raise UsageError("a fleet: its groups come up through the fleet's bring-up (inkctl up RECIPE)")
    from inkctl.plan.inputs import require_trusted

    require_trusted(loaded)  # hotfix files and lock pins, checked before any host is touched
    plan, image = plan_for(loaded, target)
    note_options(opts)
    sec = secure(loaded, secrets_for(loaded, [plan]), display)  # before any connection: fail early, start nothing
    if opts.distribute_image:
        from inkctl.api.images import distribute_before_up

        distribute_before_up(loaded, plan, image, opts.accept_new, sec.sink, cancel=cancel)
    said: list[bool] = []

    def healthy(outcome: Outcome) -> None:  # before up stays attached (watchdog.after_boot): say it is up now
        _launched(plan, opts.results_dir, sec.sink, said)
        _boot(plan, outcome, opts.results_dir, sec.sink)
        _say(on_up, _result(plan, outcome, time.monotonic() - t0))
        said.append(True)

    outcome = _bring_up(loaded, plan, sec, target, opts, healthy, t0, cancel or threading.Event())
    result = _result(plan, outcome, time.monotonic() - t0, follow(target) if outcome.detached else "")
    _launched(plan, opts.results_dir, sec.sink, said)
    _boot(plan, outcome, opts.results_dir, sec.sink)
    _finished(sec.sink, result)
    if not said:
        _say(on_up, replace(result, follow=follow(target)))
    return result


def note_options(opts: UpOptions) -> None:
    """The options of this up, in the run's record: ``watch --restart`` brings the deployment
    back with them (``api.watching.up_options_of``)."""
    from inkctl import runlog

    runlog.note(up_options={"accept_new": opts.accept_new, "keep": opts.keep, "timeout": opts.timeout,
                            "skip": list(opts.skip), "allow_socket_fallback": opts.allow_socket_fallback,
                            "distribute_image": opts.distribute_image, "results_dir": str(opts.results_dir)})


def options_from(recorded: dict) -> UpOptions:
    """``note_options``' record back as options (what it lacks: the defaults)."""
    d = UpOptions()
    return UpOptions(accept_new=bool(recorded.get("accept_new", d.accept_new)), keep=bool(recorded.get("keep", d.keep)),
                     timeout=recorded.get("timeout", d.timeout), skip=tuple(recorded.get("skip") or ()),
                     allow_socket_fallback=bool(recorded.get("allow_socket_fallback", d.allow_socket_fallback)),
                     distribute_image=bool(recorded.get("distribute_image", d.distribute_image)),
                     results_dir=Path(recorded.get("results_dir") or d.results_dir))


def _bring_up(loaded: Loaded, plan: Plan, sec: Secured, target: Target, opts: UpOptions,
              healthy: Callable[[Outcome], None], t0: float, cancel: threading.Event) -> Outcome:
    """The bring-up, stopped by ``cancel``; a failure ends with its Finished event."""
    from inkctl.execute.deploy.bringup import bring_up
    from inkctl.execute.deploy.runner import LaunchFailed
    from inkctl.weights.preflight import weights_check

    # a KeyboardInterrupt (the command line's second signal): bring_up turns it into Cancelled(started=...)
    try:
        return bring_up(loaded, plan, sec.sink, sec.secrets, accept_new=opts.accept_new, keep=opts.keep,
                        timeout=opts.timeout, skip=list(opts.skip), interrupt=cancel, detach=opts.detach,
                        on_healthy=healthy, allow_socket_fallback=opts.allow_socket_fallback,
                        after_boot=opts.watch is None, weights=weights_check)
    except (Cancelled, KeyboardInterrupt) as e:  # KeyboardInterrupt: a second Ctrl-C while connecting
        err = InkctlError(_interrupted(plan, target, isinstance(e, Cancelled) and e.started),
                          exit_code=EXIT_INTERRUPTED)
        _failed(sec.sink, plan, t0, err)
        raise err from None
    except InkctlError as e:
        if isinstance(e, LaunchFailed) and e.left:
            # a lost host keeps this run's deploy lock; its holder (this pid) is gone by then, so the
            # next command from this machine takes it over: down alone finishes the clean-up
            e.hint = ((e.hint + "; ") if e.hint else "") + f"once the host is back, run: inkctl down {target.where()}"
        sec.scrub.error(e)
        _failed(sec.sink, plan, t0, e)
        raise


def _interrupted(plan: Plan, target: Target, started: bool) -> str:
    if not started:
        return "interrupted before anything was started; nothing to undo"
    left = "\n".join(f"  {c.host}: {c.name} and {plan.host(c.host).state_dir}" for c in plan.containers)
    return ("interrupted again during the rollback: containers of this run may be left:\n" + left +
            f"\nremove them with: inkctl down {target.where()}")


def _failed(sink: Sink, plan: Plan, t0: float, e: InkctlError) -> None:
    from inkctl.execute.events import Finished

    sink.emit(Finished(ok=False, deployment=plan.deployment, seconds=round(time.monotonic() - t0, 3),
                       message=e.message, hint=e.hint or ""))
    sink.close()


def _finished(sink: Sink, r: UpResult) -> None:
    from inkctl.execute.events import Finished

    o = r.outcome
    sink.emit(Finished(ok=True, deployment=r.plan.deployment, seconds=round(r.seconds, 3), url=o.url,
                       healthy_after_s=None if o.healthy_after_s is None else round(o.healthy_after_s, 3),
                       ready_after_s=r.ready_after_s, first_ttft_s=r.first_ttft_s,
                       message=o.status.value, hint=r.follow))
    sink.close()


def _result(plan: Plan, outcome: Outcome, seconds: float, follow: str = "") -> UpResult:
    ready_s, first_ttft = readiness(plan, outcome)
    return UpResult(plan, outcome, seconds, follow, ready_s, first_ttft)


def _say(on_up: Callable[[UpResult], None] | None, result: UpResult) -> None:
    if on_up is not None:
        on_up(result)


def _launched(plan: Plan, results_dir: Path, sink: Sink, said: list[bool]) -> None:
    """What runs now, kept on this machine (``api.boots.record_launches``) once per up: ``plan``
    of the next version of the recipe shows what it changes (said: up already kept it)."""
    if said:
        return
    from inkctl.api.boots import record_launches

    record_launches(results_dir, [plan], sink)


def _boot(plan: Plan, outcome: Outcome, results_dir: Path, sink: Sink) -> None:
    """The boot's phases: compared with the recipe's previous boot, saved, sent as an event
    (once, also when up stays attached). The record is a by-product of a boot that went well:
    whatever is wrong with the records beside it (another up of the recipe writing its own at
    the same moment, a file cut short) is a warning, never a failed up."""
    if outcome.boot is None or outcome.boot.get("saved"):
        return
    from inkctl.api.boots import keep
    from inkctl.execute.events import BootPhases, Info

    record, slower, previous, problem = keep(results_dir, plan.deployment, outcome.boot, plan.recipe_hash)
    if problem:
        sink.emit(Info(text=problem, level="warning"))
    outcome.boot = {**record, "slower": list(slower), "previous": previous, "saved": True}
    sink.emit(BootPhases(deployment=plan.deployment, record=record, slower=slower, previous=previous))


def readiness(plan: Plan, outcome: Outcome) -> tuple[float | None, float | None]:
    """(seconds from the head container's start to the first answer, that answer's TTFT)."""
    first = outcome.first_answer
    if first is None:
        return None, None
    from inkctl.smoke.ready import ready_after_s

    ready = ready_after_s([s.name for s in plan.stages], outcome.stage_seconds)
    return (None if ready is None else round(ready, 3)), round(first.ttft_s, 4)


def follow(target: Target) -> str:
    """How to follow a deployment left booting, and how to remove it."""
    where = f" --hosts {target.hosts}" if target.hosts else ""
    return (f"follow it with: inkctl status {target.recipe}{where} / inkctl logs -f {target.recipe}{where}; "
            f"remove it with: inkctl down {target.recipe}{where}")
