"""``up`` below the command line: everything it prepares, runs and says, in order.

Load (recipe, hosts, --set), trust (hotfix files, lock pins), plan, resolve the secrets and
arm the scrubber before any host is touched; then Ctrl-C/SIGTERM handling, the bring-up
(``execute.deploy.bringup``), the failure's last words (what was left, how to clean up,
scrubbed), the ``Finished`` event, and with ``watch`` the hand-over to supervision. The
command line parses flags, picks the display (``sink``) and prints the summary (``say_up``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

from inkctl.api.signals import on_signals, restore
from inkctl.api.watching import Watching
from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError, UsageError

if TYPE_CHECKING:
    from inkctl.execute.events import Sink
    from inkctl.plan.step import Plan
    from inkctl.recipe.loaded import Loaded
    from inkctl.scrub import Scrubber


@dataclass(frozen=True)
class Target:
    """What the command line named: the recipe, the inventory, the --set overrides."""

    recipe: Path
    hosts: Path | None = None
    sets: tuple[str, ...] = ()

    def where(self) -> str:
        return f"{self.recipe}" + (f" --hosts {self.hosts}" if self.hosts else "")


@dataclass(frozen=True)
class UpOptions:
    accept_new: bool = False
    keep: bool = False  # --keep-on-failure
    timeout: float | None = None  # the health wait (default: the recipe's)
    skip: tuple[str, ...] = ()  # preflight checks
    detach: bool = False
    allow_socket_fallback: bool = False
    watch: Watching | None = None  # once healthy, stay and supervise (up --watch)


@dataclass
class Prepared:
    """What ``up`` has before it touches a host."""

    loaded: Loaded
    plan: Plan
    secrets: dict
    scrub: Scrubber


def prepare(target: Target) -> Prepared:
    """Load, trust, plan, secrets, scrubber: every failure here starts nothing anywhere."""
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs, require_trusted
    from inkctl.plan.step import EnvFile
    from inkctl.recipe.source import load_recipe
    from inkctl.scrub import arm
    from inkctl.secret import resolve_secrets, secret_values

    loaded = load_recipe(target.recipe, list(target.sets), target.hosts)
    if loaded.hosts is None:
        raise UsageError("up needs hosts: pass --hosts FILE (an inventory) or list hosts: in the recipe")
    require_trusted(loaded)  # hotfix files and lock pins, checked before any host is touched
    plan = build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded))
    needed = [n for s in plan.puts() if isinstance(s.content, EnvFile) for n in s.content.secret_names]
    secrets = resolve_secrets(loaded.recipe.secrets, needed)  # before any connection: fail early, start nothing
    return Prepared(loaded, plan, secrets, arm(secret_values(secrets)))


def up(target: Target, opts: UpOptions, display: Callable[[], Sink],
       say_up: Callable[[object, object, float, str], None], watch_events=None):
    """Bring the deployment up. ``display()`` makes the event sink (called once the scrubber
    is armed: everything it receives passes it); ``say_up(plan, outcome, seconds, follow)`` is
    called once, as soon as the deployment is up (before staying attached to the watchdog or
    to ``watch``). With ``opts.watch``, supervise afterwards, sending ``watch_events``.
    Returns the Outcome; raises InkctlError (its message scrubbed) on failure."""
    t0 = time.monotonic()
    from inkctl.execute.deploy.bringup import bring_up, warm_imports

    warm_imports("paramiko")  # the connections need it; the recipe loads meanwhile
    from inkctl.execute.events import Info, ScrubbingSink

    p = prepare(target)
    plan = p.plan
    sink = ScrubbingSink(display(), p.scrub)
    for w in p.loaded.warnings:
        sink.emit(Info(text=f"{w.location}: {w.path + ': ' if w.path else ''}{w.message}", level="warning"))
    said = []

    def healthy(outcome) -> None:  # before up stays attached (watchdog.after_boot): say it is up now
        say_up(plan, outcome, time.monotonic() - t0, "")
        said.append(True)

    outcome = _bring_up(p, target, opts, sink, healthy, t0, bring_up)
    total = time.monotonic() - t0
    _finished(sink, plan, outcome, total, target)
    if not said:
        say_up(plan, outcome, total, follow(target))
    if opts.watch is not None and not outcome.detached:
        from inkctl.api.watching import keep_watching

        keep_watching(p.loaded, plan, target.recipe, target.hosts, list(target.sets), opts.watch, watch_events)
    return outcome


def _bring_up(p: Prepared, target: Target, opts: UpOptions, sink, healthy, t0: float, bring_up):
    """The bring-up under this command's signal handlers; a failure ends with its Finished event."""
    from inkctl.execute.deploy.runner import LaunchFailed
    from inkctl.weights.preflight import weights_check

    interrupt = threading.Event()
    # a second signal: KeyboardInterrupt, which bring_up turns into Cancelled(started=...)
    previous = on_signals(interrupt, KeyboardInterrupt)
    try:
        return bring_up(p.loaded, p.plan, sink, p.secrets, accept_new=opts.accept_new, keep=opts.keep,
                        timeout=opts.timeout, skip=list(opts.skip), interrupt=interrupt, detach=opts.detach,
                        on_healthy=healthy, allow_socket_fallback=opts.allow_socket_fallback,
                        after_boot=opts.watch is None, weights=weights_check)
    except (Cancelled, KeyboardInterrupt) as e:  # KeyboardInterrupt: a second Ctrl-C while connecting
        err = InkctlError(_interrupted_text(p.plan, target, isinstance(e, Cancelled) and e.started),
                          exit_code=EXIT_INTERRUPTED)
        _failed(sink, p.plan, t0, err)
        raise err from None
    except InkctlError as e:
        if isinstance(e, LaunchFailed) and e.left:
            # a lost host keeps this run's deploy lock; its holder (this pid) is gone by then, so the
            # next command from this machine takes it over: down alone finishes the clean-up
            e.hint = ((e.hint + "; ") if e.hint else "") + f"once the host is back, run: inkctl down {target.where()}"
        e.message, e.hint = p.scrub.text(e.message), p.scrub.text(e.hint) if e.hint else e.hint
        e.args = (e.message,)
        _failed(sink, p.plan, t0, e)
        raise
    finally:
        restore(previous)


def _interrupted_text(plan, target: Target, started: bool) -> str:
    if not started:
        return "interrupted before anything was started; nothing to undo"
    left = "\n".join(f"  {c.host}: {c.name} and {plan.host(c.host).state_dir}" for c in plan.containers)
    return ("interrupted again during the rollback: containers of this run may be left:\n" + left +
            f"\nremove them with: inkctl down {target.where()}")


def _failed(sink, plan, t0: float, e: InkctlError) -> None:
    from inkctl.execute.events import Finished

    sink.emit(Finished(ok=False, deployment=plan.deployment, seconds=round(time.monotonic() - t0, 3),
                       message=e.message, hint=e.hint or ""))
    sink.close()


def _finished(sink, plan, outcome, total: float, target: Target) -> None:
    from inkctl.execute.events import Finished

    ready_s, first_ttft = readiness(plan, outcome)
    sink.emit(Finished(ok=True, deployment=plan.deployment, seconds=round(total, 3), url=outcome.url,
                       healthy_after_s=None if outcome.healthy_after_s is None else round(outcome.healthy_after_s, 3),
                       ready_after_s=ready_s, first_ttft_s=first_ttft,
                       message=outcome.status.value, hint=follow(target) if outcome.detached else ""))
    sink.close()


def readiness(plan, outcome) -> tuple[float | None, float | None]:
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
