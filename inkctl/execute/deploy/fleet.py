"""A fleet on its hosts: every replica brought up as the one deployment it is (``bring_up``, all
replicas at once), then the router in front of them (the runner, the router's own plan), all
or nothing: a replica that fails stops the others and removes what the run started.

Never prints: events go to the sink, tagged by the replica's deployment name in their host
field's neighbour (``Info``) where it matters.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError
from inkctl.execute.deploy.runner import Outcome, UpStatus


@dataclass
class FleetOutcome:
    url: str
    replicas: dict[str, Outcome] = field(default_factory=dict)  # deployment -> its outcome
    router: Outcome | None = None
    seconds: float = 0.0

    @property
    def status(self) -> UpStatus:
        if self.router is not None and all(o.status is UpStatus.ALREADY for o in [*self.replicas.values(), self.router]):
            return UpStatus.ALREADY
        return UpStatus.UP


class LockedSink:
    """Replicas come up in threads: one event at a time reaches the sink."""

    def __init__(self, inner):
        self.inner, self._lock = inner, threading.Lock()

    def emit(self, event) -> None:
        with self._lock:
            self.inner.emit(event)

    def close(self) -> None:
        self.inner.close()


def replica_loaded(loaded, replica):
    return replace(loaded, recipe=replica.recipe, hosts=list(replica.hosts))


def bring_up_fleet(loaded, fleet, sink, secrets, *, accept_new: bool, keep: bool, timeout: float | None,
                   skip: list[str], interrupt: threading.Event, only: set[str] | None = None, weights=None) -> FleetOutcome:
    """Every replica at once, then the router. ``only``: bring up just these replicas (by
    deployment name; the others are left as they are), then the router if it is not running.
    ``weights``: the weights preflight, passed to each replica's ``bring_up``."""
    from inkctl.execute.deploy.bringup import bring_up
    from inkctl.execute.events import Info

    t0 = time.monotonic()
    sink = LockedSink(sink)
    out = FleetOutcome(url=fleet.url)
    errors: dict[str, BaseException] = {}
    todo = [r for r in fleet.replicas if only is None or r.name in only]

    def one(rep) -> None:
        try:
            o = bring_up(replica_loaded(loaded, rep), rep.plan, sink, secrets, accept_new=accept_new, keep=keep,
                         timeout=timeout, skip=skip, interrupt=interrupt, after_boot=False, weights=weights)
            out.replicas[rep.name] = o
            sink.emit(Info(text=f"replica {rep.index} ({rep.name}) is up at {rep.url}" if o.status is not UpStatus.ALREADY
                           else f"replica {rep.index} ({rep.name}) was already up at {rep.url}"))
        except BaseException as e:  # noqa: BLE001 - handed to the caller below, the first one wins
            errors[rep.name] = e
            interrupt.set()  # the others stop and roll back what they started

    threads = [threading.Thread(target=one, args=(r,), name=f"replica-{r.index}", daemon=True) for r in todo]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.25)
    if errors:
        _undo(fleet, out, loaded, keep, sink, accept_new)
        raise _first(errors, fleet)
    try:
        out.router = _router_up(loaded, fleet, sink, accept_new=accept_new, keep=keep, interrupt=interrupt)
    except BaseException:
        _undo(fleet, out, loaded, keep, sink, accept_new)
        raise
    out.seconds = time.monotonic() - t0
    return out


def _first(errors: dict[str, BaseException], fleet) -> BaseException:
    """The failure that explains the others: a real error before the Cancelled it caused."""
    names = [r.name for r in fleet.replicas]

    def stopped(e: BaseException) -> bool:  # stopped because another replica failed (or Ctrl-C)
        return isinstance(e, (Cancelled, KeyboardInterrupt)) or (isinstance(e, InkctlError) and e.exit_code == EXIT_INTERRUPTED)

    real = sorted((n for n, e in errors.items() if not stopped(e)), key=names.index)
    if not real:
        return next(iter(errors.values()))
    e = errors[real[0]]
    if isinstance(e, InkctlError):
        e.message = f"replica {real[0]}: {e.message}"
        if len(errors) > 1:
            others = [n for n in sorted(errors, key=names.index) if n != real[0]]
            e.message += f"\nthe other replicas started by this run were stopped and removed: {', '.join(others)}"
        e.args = (e.message,)
    return e


def _undo(fleet, out: FleetOutcome, loaded, keep: bool, sink, accept_new: bool) -> None:
    """Remove the replicas this run brought up (not those that were already running)."""
    if keep:
        return
    from inkctl.execute.events import Info
    from inkctl.execute.hosts.fanout import each
    from inkctl.execute.deploy.takedown import take_down

    started = [r for r in fleet.replicas if r.name in out.replicas and out.replicas[r.name].status is not UpStatus.ALREADY]
    if not started:
        return
    sink.emit(Info(text="removing the replicas this run brought up: " + ", ".join(r.name for r in started), level="warning"))
    each(lambda r: take_down(r.plan, list(r.hosts), accept_new=accept_new), started, name="undo")


def _router_up(loaded, fleet, sink, *, accept_new: bool, keep: bool, interrupt: threading.Event) -> Outcome:
    """The router container, unless the same one (same argv hash) runs and answers already."""
    from inkctl.execute.hosts.connect import close_all, connect_each, connection_failure
    from inkctl.execute.supervise.health import check_once
    from inkctl.execute.state.probe import deployment_states
    from inkctl.execute.deploy.runner import Runner, launch
    from inkctl.plan import runtime

    plan = fleet.router
    host = next(h for h in (loaded.hosts or []) if h.name == plan.hosts[0].name)
    res = connect_each([host], accept_new=accept_new)
    if res.errors:
        close_all(res.transports)
        raise connection_failure([host], res)
    try:
        states = deployment_states(plan, res.transports)
        if states.failed:
            raise InkctlError(f"router host {host.name}: {next(iter(states.failed.values())).reason}")
        there = [c for hc in states.ok.values() for c in hc.containers]
        if any(c.running and c.recipe_hash == plan.recipe_hash for c in there) and check_once(plan.health_url)[0]:
            return Outcome(seconds=0.0, url=fleet.url, status=UpStatus.ALREADY)
        if there:  # another version, or a dead one: replaced
            tr = res.transports[host.name]
            tr.run(list(runtime.remove(plan.hosts[0].runtime, *[c.name for c in there])), timeout=60)
        runner = Runner(plan, res.transports, sink, cancel=interrupt)
        return launch(runner, keep_on_failure=keep)
    finally:
        close_all(res.transports)


def take_down_fleet(fleet, *, accept_new: bool = False):
    """The router first (no more traffic), then every replica at once: [(plan, TakeDown)]."""
    from inkctl.execute.hosts.fanout import each
    from inkctl.execute.deploy.takedown import take_down

    router_hosts = [h for r in fleet.replicas for h in r.hosts if h.name == fleet.router.hosts[0].name][:1]
    first = [(fleet.router, take_down(fleet.router, router_hosts, accept_new=accept_new))] if router_hosts else []
    rest = each(lambda r: (r.plan, take_down(r.plan, list(r.hosts), accept_new=accept_new)), fleet.replicas, name="down")
    return first + rest
