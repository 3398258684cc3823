"""A fleet's rolling update: the replicas that run another version of the recipe replaced one
at a time behind the running router (``plan.rollout``), so the fleet keeps serving.

For each such replica, in order: out of the router (``client.drain.take_out``), drained (its
requests in flight end: the engine's /metrics, at most ``fleet.rollout.drain_timeout_s``), its
deployment directory kept aside and its plan record read, then ``bring_up`` of the new version
(which shows what changes per rank, removes the old containers, starts the new ones, waits for
health and runs the smoke checks), and back in the router. A new version that fails (or Ctrl-C
while it boots) stops the rollout: that replica's new containers are removed, the old version
is started again from its plan record and put back in the router; the replicas before it stay
on the new version, those after it were never touched. Ctrl-C between two replicas stops
before the next one. Either way every replica runs one version or the other and is in the
router, and the error says which runs which.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError


@dataclass
class Rolled:
    """What the rollout did: each replaced replica's outcome and its seconds (out of the router
    to back in), in order."""

    outcomes: dict = field(default_factory=dict)  # deployment -> bring_up's Outcome
    seconds: dict[str, float] = field(default_factory=dict)  # deployment -> seconds out of the router
    drained: dict[str, float] = field(default_factory=dict)  # deployment -> seconds its drain took


def changed_replicas(fleet, accept_new: bool) -> dict[str, tuple[str, ...]]:
    """deployment -> () for every replica that runs (a running container) another version."""
    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.hosts.fanout import each
    from inkctl.execute.state.probe import deployment_containers

    hosts = {h.name: h for r in fleet.replicas for h in r.hosts}
    conn = connect_each(list(hosts.values()), accept_new=accept_new)
    try:
        def one(rep) -> bool:
            for h in rep.plan.hosts:
                tr = conn.transports.get(h.name)
                if tr is None:
                    return False  # an unreachable host: bring_up says so, with the usual path
                hc = deployment_containers(tr, h.runtime, rep.plan.deployment)
                if any(c.running and c.recipe_hash and c.recipe_hash != rep.plan.recipe_hash for c in hc.containers):
                    return True
            return False

        flags = each(one, list(fleet.replicas), name="rollout")
    finally:
        close_all(conn.transports)
    return {r.name: () for r, f in zip(fleet.replicas, flags) if f}


def router_ready(fleet) -> bool:
    """The router answers and lists the replicas (a rollout needs one in front of them)."""
    from inkctl.client.drain import listed
    from inkctl.execute.supervise.health import check_once

    if not fleet.router.health_url or not check_once(fleet.router.health_url)[0]:
        return False
    try:
        listed(fleet.url)
    except InkctlError:
        return False
    return True


def roll(loaded, fleet, sink, secrets, *, accept_new: bool, keep: bool, timeout: float | None, skip: list[str],
         interrupt: threading.Event, weights=None, launched=None) -> Rolled:
    """Replace the replicas that run another version, one at a time (see the module's text).
    Nothing to do (no replica runs another version, or no router answers in front of them): an
    empty ``Rolled``; ``up`` then goes on as it does for a fleet's first start. ``launched(plan)``:
    called with each replica's new plan once it serves (a rollout stopped later keeps it said)."""
    from inkctl.execute.events import Info
    from inkctl.plan.replicas.rollout import rollout

    rolled = Rolled()
    if not router_ready(fleet):
        return rolled
    changed = changed_replicas(fleet, accept_new)
    if not changed:
        return rolled
    ro = rollout(fleet, changed)
    reps = {r.name: r for r in fleet.replicas}
    sink.emit(Info(text=f"rolling update of {fleet.name}: {len(ro.steps)} of {len(fleet.replicas)} replicas run another "
                        f"version; one at a time: {', '.join(ro.deployments)}"))
    for alone in _alone(fleet, ro.deployments):
        sink.emit(Info(text=alone, level="warning"))
    kw = dict(accept_new=accept_new, keep=keep, timeout=timeout, skip=skip, interrupt=interrupt, weights=weights)
    surge = _surge_up(loaded, fleet, sink, secrets, **kw) if fleet.surge is not None else None
    done: list[str] = []
    try:
        for k, step in enumerate(ro.steps):
            if interrupt.is_set():
                raise _stopped(fleet, done, ro.deployments[k:], None, interrupted=True)
            rep = reps[step.deployment]
            try:
                _one(loaded, fleet, rep, ro, sink, secrets, rolled, **kw)
            except _Failed as f:
                raise _stopped(fleet, done, ro.deployments[k + 1:], f, interrupted=f.interrupted) from None
            done.append(rep.name)
            if launched is not None:
                launched(rep.plan)
    finally:
        if surge is not None:
            _surge_down(fleet, surge, sink, accept_new)
    return rolled


def _alone(fleet, changed: tuple[str, ...]) -> list[str]:
    """The replaced replicas that are the only one of their kind (a fleet of one; a P/D role of one)."""
    out = []
    for rep in fleet.replicas:
        kind = [r for r in fleet.replicas if r.role == rep.role]
        if rep.name in changed and len(kind) == 1:
            out.append(f"{fleet.name}: {rep.name} is the only {rep.role} replica: nothing serves while its new "
                       "version boots" if rep.role else
                       f"{fleet.name} has one replica: nothing serves while the new version boots")
    return out


def _surge_up(loaded, fleet, sink, secrets, **kw):
    """fleet.rollout.surge: one more replica of the new version on the spare room, in the router
    before any replica is taken out. It fails: nothing else was touched, said so."""
    from inkctl.client.drain import put_back
    from inkctl.execute.deploy.bringup import bring_up
    from inkctl.execute.events import Info

    s = fleet.surge
    sink.emit(Info(text=f"surge: one more replica of the new version first, {s.name} on {s.gpus} ({s.url})"))
    try:
        bring_up(_replica_loaded(loaded, s), s.plan, _Quiet(sink), secrets, after_boot=False, **kw)
        put_back(fleet.url, s.url, queued=fleet.router_spec.queued_workers)
    except BaseException as e:  # noqa: BLE001 - said with what it left untouched
        _surge_down(fleet, s, sink, kw["accept_new"])
        cause = getattr(e, "message", None) or str(e) or type(e).__name__
        interrupted = isinstance(e, (Cancelled, KeyboardInterrupt)) or getattr(e, "exit_code", None) == EXIT_INTERRUPTED
        raise InkctlError(f"rolling update of {fleet.name}: the surge replica {s.name} did not come up: {cause}\n"
                          "  every replica untouched, on the old version, in the router",
                          hint="fix the recipe, or set fleet.rollout.surge: false, and run inkctl up again",
                          exit_code=EXIT_INTERRUPTED if interrupted else 1) from None
    sink.emit(Info(text=f"surge: {s.name} serves and is in the router"))
    return s


def _surge_down(fleet, s, sink, accept_new: bool) -> None:
    """The surge replica out of the router, drained and removed."""
    from inkctl.client.drain import drain, take_out
    from inkctl.execute.deploy.takedown import take_down
    from inkctl.execute.events import Info

    try:
        if take_out(fleet.url, s.url, queued=fleet.router_spec.queued_workers):
            drain(s.url, fleet.rollout.drain_timeout_s, _reader(s))
    except InkctlError as e:
        sink.emit(Info(text=f"surge: {s.name} not taken out of the router: {e.message}", level="warning"))
    try:  # take_down holds the deploy lease while it removes (as down does)
        failed = take_down(s.plan, list(s.hosts), accept_new=accept_new).failed
    except InkctlError as e:  # LockHeld: another up or down of it runs
        failed = {h.name: e.message for h in s.plan.hosts}
    if failed:
        why = "; ".join(f"{h}: {w}" for h, w in failed.items())
        sink.emit(Info(text=f"surge: {s.name} was not removed ({why}); the next inkctl up or inkctl down of the "
                            "fleet removes it (a replica beyond fleet.replicas)", level="warning"))
        return
    sink.emit(Info(text=f"surge: {s.name} out of the router, drained and removed"))


class _Quiet:
    """The replica's own bring-up, without the warning that a replaced deployment does not serve
    meanwhile (it is out of the router; the others serve)."""

    def __init__(self, inner):
        self.inner = inner

    def emit(self, event) -> None:
        from inkctl.execute.deploy.replace import DOWN_WHILE_BOOTING

        if DOWN_WHILE_BOOTING not in (getattr(event, "text", "") or ""):
            self.inner.emit(event)

    def close(self) -> None:
        self.inner.close()


class _Failed(Exception):
    def __init__(self, rep, cause: BaseException, restored: str, interrupted: bool, *, replaced: bool = True):
        super().__init__(str(cause))
        self.rep, self.cause, self.restored, self.interrupted = rep, cause, restored, interrupted
        self.replaced = replaced  # False: stopped before its old version was (it never stopped)


def _one(loaded, fleet, rep, ro, sink, secrets, rolled: Rolled, *, accept_new: bool, keep: bool,
         timeout: float | None, skip: list[str], interrupt: threading.Event, weights) -> None:
    from inkctl.client.drain import drain, put_back, take_out
    from inkctl.execute.deploy.bringup import bring_up
    from inkctl.execute.events import Info

    t0 = time.monotonic()
    sink.emit(Info(text=f"{rep.label} ({rep.name}): out of the router, draining"))
    take_out(fleet.url, rep.url, queued=fleet.router_spec.queued_workers)
    d = drain(rep.url, ro.drain_timeout_s, _reader(rep), stop=interrupt.is_set)
    rolled.drained[rep.name] = round(d.seconds, 3)
    if d.ok:
        sink.emit(Info(text=f"{rep.label} ({rep.name}): drained in {d.seconds:.1f} s"))
    else:
        left = "an unknown number of requests" if d.left is None else f"{d.left:g} requests"
        sink.emit(Info(text=f"{rep.label} ({rep.name}): {left} still in flight after {d.seconds:.1f} s "
                            "(fleet.rollout.drain_timeout_s); stopping it anyway", level="warning"))
    try:
        if interrupt.is_set():  # Ctrl-C while it drained: the old version never stopped
            raise Cancelled()
        records = _keep_aside(rep, accept_new)
    except BaseException as e:  # noqa: BLE001 - back in the router as it is, then said
        put_back(fleet.url, rep.url, queued=fleet.router_spec.queued_workers, entry=rep.worker)
        interrupted = isinstance(e, (Cancelled, KeyboardInterrupt))
        raise _Failed(rep, e, "", interrupted, replaced=False) from None
    try:
        o = bring_up(_replica_loaded(loaded, rep), rep.plan, _Quiet(sink), secrets, accept_new=accept_new, keep=keep,
                     timeout=timeout, skip=skip, interrupt=interrupt, after_boot=False, weights=weights)
    except BaseException as e:  # noqa: BLE001 - the old version comes back whatever stopped the new one
        interrupted = isinstance(e, (Cancelled, KeyboardInterrupt)) or getattr(e, "exit_code", None) == EXIT_INTERRUPTED
        restored = _restore(fleet, rep, records, sink, accept_new)
        raise _Failed(rep, e, restored, interrupted) from None
    put_back(fleet.url, rep.url, queued=fleet.router_spec.queued_workers, entry=rep.worker)
    _drop_aside(rep, accept_new)
    rolled.outcomes[rep.name] = o
    rolled.seconds[rep.name] = round(time.monotonic() - t0, 3)
    sink.emit(Info(text=f"{rep.label} ({rep.name}) runs the new version and is back in the router "
                        f"({time.monotonic() - t0:.1f} s out of it)"))


def _reader(rep):
    """What the replica's engine has in flight, under its engine's metric names."""
    from inkctl.client.drain import reader
    from inkctl.recipe.engine_registry import spec_of

    m = spec_of(rep.recipe.engine.kind).metrics
    return reader(tuple(m.running), tuple(m.waiting))


def _replica_loaded(loaded, rep):
    """What ``bring_up`` of one replica reads (as ``fleet.replica_loaded``: that module calls this one)."""
    from dataclasses import replace

    return replace(rep.source or loaded, recipe=rep.recipe, hosts=list(rep.hosts))


def _on_replica_hosts(rep, accept_new: bool, fn):
    """fn(transport, planned host) on each host of the replica, under the replica's deploy lease
    (the one up and down take); host -> its value (failures raise, LockHeld too)."""
    from inkctl.execute.hosts.connect import close_all, connect_each, connection_failure
    from inkctl.execute.hosts.fanout import each
    from inkctl.execute.state.deploylock import DeployLock

    conn = connect_each(list(rep.hosts), accept_new=accept_new)
    try:
        if conn.errors:
            raise connection_failure(list(rep.hosts), conn)
        with DeployLock(rep.plan, conn.transports, "up (rollout)"):
            vals = each(lambda h: fn(conn.transports[h.name], h), list(rep.plan.hosts), name="rollout")
        return {h.name: v for h, v in zip(rep.plan.hosts, vals)}
    finally:
        close_all(conn.transports)


def _keep_aside(rep, accept_new: bool) -> dict[str, str]:
    """Each host's deployment directory copied aside, and its plan record: host -> its text
    (a host without one is left out: the old version cannot come back there)."""
    from inkctl.plan.record import record_path
    from inkctl.plan.replicas.rollout import keep_aside

    def one(tr, h) -> str | None:
        tr.run(list(keep_aside(h.state_dir)), timeout=120)
        res = tr.run(["cat", "--", record_path(h.state_dir)], timeout=30)
        return res.text() if res.ok else None

    return {h: t for h, t in _on_replica_hosts(rep, accept_new, one).items() if t}


def _drop_aside(rep, accept_new: bool) -> None:
    from inkctl.plan.replicas.rollout import drop_aside

    try:
        _on_replica_hosts(rep, accept_new, lambda tr, h: tr.run(list(drop_aside(h.state_dir)), timeout=60))
    except Exception:  # noqa: BLE001 - a copy left behind costs disk only; the next rollout replaces it
        import logging

        logging.getLogger(__name__).debug("could not remove the old version's copy of %s", rep.name, exc_info=True)


def _restore(fleet, rep, records: dict[str, str], sink, accept_new: bool) -> str:
    """The new version removed, the old one started again from its plan record and put back in
    the router. '' when it serves again, else why not."""
    from inkctl.client.drain import put_back
    from inkctl.execute.deploy.runner import Runner, launch
    from inkctl.execute.deploy.takedown import remove_from_host
    from inkctl.execute.events import Info
    from inkctl.execute.hosts.connect import close_all, connect_each, connection_failure
    from inkctl.execute.hosts.fanout import each
    from inkctl.plan.removal import removal
    from inkctl.execute.state.deploylock import DeployLock, LockHeld
    from inkctl.plan.replicas.rollout import old_plan, restore_aside

    sink.emit(Info(text=f"{rep.label} ({rep.name}): the new version failed; starting the old version again",
                   level="warning"))
    try:
        plan = old_plan(rep.plan, records)
    except ValueError as e:
        return f"its old version cannot be started again: {e}"
    conn = connect_each(list(rep.hosts), accept_new=accept_new)
    lock = None
    try:
        if conn.errors:
            return connection_failure(list(rep.hosts), conn).reason
        try:  # the lease up and down take: no other up or down of this replica runs meanwhile
            lock = DeployLock(rep.plan, conn.transports, "up (rollback)").acquire()
        except LockHeld as e:
            return f"its old version was not started again: {e.message}"

        def clean(h) -> None:
            tr = conn.transports[h.name]
            names = [c.name for c in rep.plan.containers if c.host == h.name]
            remove_from_host(tr, removal(h.name, h.runtime, names, h.state_dir, missing_ok=True))
            tr.run(list(restore_aside(h.state_dir)), timeout=120)

        each(clean, list(rep.plan.hosts), name="rollback")
        launch(Runner(plan, conn.transports, sink, cancel=threading.Event()), keep_on_failure=False)
    except Exception as e:  # noqa: BLE001 - said in the error the rollout ends with
        return f"its old version did not start again: {getattr(e, 'message', None) or e}"
    finally:
        if lock is not None:
            lock.release()
        close_all(conn.transports)
    try:
        put_back(fleet.url, rep.url, queued=fleet.router_spec.queued_workers, entry=rep.worker)
    except InkctlError as e:
        return f"its old version runs but is not back in the router: {e.message}"
    sink.emit(Info(text=f"{rep.label} ({rep.name}) runs the old version ({plan.recipe_hash}) again and is "
                        "back in the router"))
    return ""


def _stopped(fleet, done: list[str], untouched: tuple[str, ...] | list[str], f: _Failed | None, *,
             interrupted: bool) -> InkctlError:
    """The error a stopped rollout ends with: what stopped it, and which replica runs which version."""
    lines = []
    if f is not None:
        cause = getattr(f.cause, "message", None) or str(f.cause) or type(f.cause).__name__
        # bring_up's own words about its rollback (the old version removed) are not the end of it here
        cause = "\n".join(x for x in cause.splitlines() if not x.startswith(("rolled back:", "the previous version")))
        if not f.replaced:
            what = "interrupted while it drained" if f.interrupted else f"its old version could not be kept aside: {cause}"
        else:
            what = "interrupted while its new version was starting" if f.interrupted else f"its new version failed: {cause}"
        lines.append(f"rolling update of {fleet.name} stopped at {f.rep.label} ({f.rep.name}): {what}")
        state = "still on the old version (never stopped), back in the router" if not f.replaced else (
            "back on the old version, in the router" if not f.restored else f"NOT restored: {f.restored}")
        lines.append(f"  {f.rep.name}: {state}")
    else:
        lines.append(f"rolling update of {fleet.name} interrupted between replicas")
    if done:
        lines.append("  on the new version, in the router: " + ", ".join(done))
    if untouched:
        lines.append("  untouched, on the old version, in the router: " + ", ".join(untouched))
    hint = ("run inkctl up again: it goes on with the replicas still on the old version" if interrupted else
            "fix the recipe and run inkctl up again: it goes on with the replicas still on the old version")
    if f is not None and f.restored:
        hint = f"inkctl logs and inkctl status show {f.rep.name}; inkctl up again replaces it"
    code = EXIT_INTERRUPTED if interrupted else 1
    return InkctlError("\n".join(lines), hint=hint, exit_code=code)
