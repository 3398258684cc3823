"""A fleet on its hosts: every replica brought up as the one deployment it is (``bring_up``, all
replicas at once), then the router in front of them (the runner, the router's own plan), all
or nothing: a replica that fails stops the others and removes what the run started.

Never prints: events go to the sink, tagged by the replica's deployment name in their host
field's neighbour (``Info``) where it matters.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError
from inkctl.execute.deploy.runner import Outcome, UpStatus


@dataclass
class FleetOutcome:
    url: str
    replicas: dict[str, Outcome] = field(default_factory=dict)  # deployment -> its outcome
    router: Outcome | None = None
    seconds: float = 0.0
    retired: dict[str, list[str]] = field(default_factory=dict)  # replica -> hosts it was removed from

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
    """What ``bring_up`` of one group reads: its recipe as loaded (a gateway's model: from its
    own file, whose directory holds its lock and hotfixes), with the group's name, ports, hosts."""
    return replace(replica.source or loaded, recipe=replica.recipe, hosts=list(replica.hosts))


def bring_up_fleet(loaded, fleet, sink, secrets, *, accept_new: bool, keep: bool, timeout: float | None,
                   skip: list[str], interrupt: threading.Event, only: set[str] | None = None, weights=None,
                   launched=None) -> FleetOutcome:
    """Every replica at once, then the router. ``only``: bring up just these replicas (by
    deployment name; the others are left as they are), then the router if it is not running.
    ``weights``: the weights preflight, passed to each replica's ``bring_up``. ``launched(plan)``:
    called for each replica a rolling update brought to its new version, as soon as it serves
    (the rest: the caller's, once the fleet is up)."""
    from inkctl.execute.deploy.bringup import bring_up
    from inkctl.execute.events import Info

    t0 = time.monotonic()
    sink = LockedSink(sink)
    out = FleetOutcome(url=fleet.url)
    errors: dict[str, BaseException] = {}
    rolled = _rolled(loaded, fleet, sink, secrets, accept_new=accept_new, keep=keep, timeout=timeout, skip=skip,
                     interrupt=interrupt, weights=weights, launched=launched) if only is None else {}
    freed = _freed(fleet, sink, accept_new) if only is None else {}
    todo = [r for r in fleet.replicas if (only is None or r.name in only) and r.name not in rolled]

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

    from inkctl.execute.hosts.fanout import each

    each(one, todo, name="replica", cancel=interrupt)  # one() keeps each failure; Ctrl-C sets interrupt
    if errors:
        _undo(fleet, out, loaded, keep, sink, accept_new)
        raise _first(errors, fleet)
    try:
        out.router = _router_up(loaded, fleet, sink, accept_new=accept_new, keep=keep, interrupt=interrupt,
                                secrets=secrets)
    except BaseException:
        _undo(fleet, out, loaded, keep, sink, accept_new)
        raise
    out.replicas.update(rolled)
    if only is None:  # replicas of a larger fleet, or groups the gateway file no longer lists
        out.retired = {**freed, **retire(fleet, sink, accept_new=accept_new)}
    out.seconds = time.monotonic() - t0
    return out


def _rolled(loaded, fleet, sink, secrets, **kw) -> dict[str, Outcome]:
    """A running fleet whose replicas run another version: replaced one at a time first
    (``rolling.py``); deployment -> outcome of each replaced replica."""
    from inkctl.plan.replicas.rollout import rolling

    if not rolling(fleet):
        return {}
    from inkctl.execute.deploy.rolling import roll

    return roll(loaded, fleet, sink, secrets, **kw).outcomes


def _freed(fleet, sink, accept_new: bool) -> dict[str, list[str]]:
    """A gateway file's dropped groups drained and removed before the new ones start (a model
    swapped onto a dropped one's GPUs and port needs them: ``swap.py``)."""
    if not fleet.gateway:
        return {}
    from inkctl.execute.deploy.swap import free_dropped

    return free_dropped(fleet, sink, accept_new=accept_new, drain_timeout_s=fleet.rollout.drain_timeout_s,
                        retire=retire)


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


def _router_up(loaded, fleet, sink, *, accept_new: bool, keep: bool, interrupt: threading.Event,
               secrets: dict | None = None) -> Outcome:
    """The router container, unless the same one (same argv hash) runs and answers already."""
    from inkctl.execute.hosts.connect import close_all, connect_each, connection_failure
    from inkctl.execute.supervise.health import check_once
    from inkctl.execute.state.probe import deployment_states
    from inkctl.execute.deploy.runner import Runner, launch
    from inkctl import runtimes
    from inkctl.plan.step import Register

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
            after = [i for i, st in enumerate(plan.stages) if any(isinstance(s, Register) for s in st.steps)]
            if after:  # a gateway keeps its engines in memory only: registered again, answers checked
                launch(Runner(replace(plan, stages=plan.stages[after[0]:]), res.transports, sink, cancel=interrupt,
                              secrets=secrets),
                       keep_on_failure=True)
            return Outcome(seconds=0.0, url=fleet.url, status=UpStatus.ALREADY)
        if there:  # another version, or a dead one: replaced
            tr = res.transports[host.name]
            tr.run(list(runtimes.get(plan.hosts[0].runtime).remove(*[c.name for c in there])), timeout=60)
        runner = Runner(plan, res.transports, sink, cancel=interrupt, secrets=secrets)
        return launch(runner, keep_on_failure=keep)
    finally:
        close_all(res.transports)


def take_down_fleet(fleet, *, accept_new: bool = False, sink=None):
    """The router first (no more traffic), then every replica at once, then the replicas of an
    earlier, larger fleet still on the hosts: ([(plan, TakeDown)], {replica: [hosts]})."""
    from inkctl.execute.hosts.fanout import each
    from inkctl.execute.deploy.takedown import take_down

    every = list(fleet.hosts) or [h for r in fleet.replicas for h in r.hosts]
    router_hosts = [h for h in every if h.name == fleet.router.hosts[0].name][:1]
    first = [(fleet.router, take_down(fleet.router, router_hosts, accept_new=accept_new))] if router_hosts else []
    rest = each(lambda r: (r.plan, take_down(r.plan, list(r.hosts), accept_new=accept_new)), fleet.replicas, name="down")
    retired = retire(fleet, sink, accept_new=accept_new, command="down")
    return first + rest, retired


def retire(fleet, sink, *, accept_new: bool = False, command: str = "up") -> dict[str, list[str]]:
    """Remove the replicas the recipe no longer has (``NAME-r<k>``, k >= fleet.replicas; a
    lowered fleet.replicas), or a gateway's groups its file no longer lists (labelled
    ``inkctl.gateway=NAME``, another deployment), from every host of the inventory: found by
    label, removed by the one removal (``plan.removal``, the steps ``inkctl plan`` shows), each
    under its deployment's lease. deployment -> its hosts."""
    from inkctl.execute.events import Info
    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.hosts.fanout import on_hosts
    from inkctl.execute.hosts.transport import HostError
    from inkctl.execute.deploy.takedown import remove_from_host
    from inkctl.execute.state.deployed import parse_ps
    from inkctl import runtimes
    from inkctl.plan.replicas.fleet import retired_replica, retire_steps
    from inkctl.plan.replicas.gateway import GATEWAY_LABEL, dropped_group

    hosts = list(fleet.hosts)
    if not hosts:
        return {}
    rt = fleet.router.hosts[0].runtime
    conn = connect_each(hosts, accept_new=accept_new)
    by_name = {h.name: h for h in hosts}
    # a gateway's groups carry inkctl.gateway=NAME: those the file no longer lists go
    ps = runtimes.get(rt).ps(label=(GATEWAY_LABEL, fleet.name)) if fleet.gateway else runtimes.get(rt).ps()

    def gone(dep: str) -> bool:
        if fleet.disagg:  # P/D: a role's replicas beyond its count, or the replicas of a plain fleet before it
            from inkctl.plan.replicas.disagg import retired_role_replica

            return retired_role_replica(fleet, dep)
        return dropped_group(fleet, dep) if fleet.gateway else retired_replica(fleet.name, len(fleet.replicas), dep)

    def one(name: str) -> dict[str, list[str]]:
        tr = conn.transports[name]
        res = tr.run(list(ps), timeout=60)
        if not res.ok:
            raise HostError(name, "runtime", f"{rt} ps failed: {res.err_text().strip()[-200:]}")
        found: dict[str, list[str]] = {}
        for c in parse_ps(name, res.text()):
            dep = c.deployment or ""
            if dep and gone(dep):
                found.setdefault(dep, []).append(c.name)
        for dep, names in sorted(found.items()):
            with leased(by_name[name], rt, dep, tr, command):  # the lease up and down take on that deployment
                remove_from_host(tr, retire_steps(by_name[name], rt, dep, names))
        return found

    try:
        res = on_hosts(one, list(conn.transports), name="retire")
    finally:
        close_all(conn.transports)
    out: dict[str, list[str]] = {}
    for host, found in res.ok.items():
        for dep in found:
            out.setdefault(dep, []).append(host)
    if sink is not None:
        for dep, on in sorted(out.items()):
            why = "the gateway file" if fleet.gateway else ("the recipe (fleet.disagg)" if fleet.disagg else
                                                            f"the recipe (fleet.replicas {len(fleet.replicas)})")
            sink.emit(Info(text=f"{dep} is no longer in {why}: removed from {', '.join(on)}"))
        for host, why in [*((n, e.reason) for n, e in conn.errors.items()), *((n, e.reason) for n, e in res.failed.items())]:
            sink.emit(Info(text=f"{host}: could not look for replicas to remove: {why}", level="warning"))
    return out


@contextmanager
def leased(host, rt: str, deployment: str, transport, command: str = "up"):
    """The deploy lease of ``deployment`` on ``host`` (the one ``up`` and ``down`` take), held
    while a leftover of it is removed: no other up or down of it runs meanwhile. Refused: a
    HostError for that host (the others go on)."""
    from inkctl.execute.hosts.transport import HostError
    from inkctl.execute.state.deploylock import DeployLock, LockHeld
    from inkctl.plan.deploy import deployment_dir
    from inkctl.plan.step import Plan, PlannedHost

    plan = Plan(deployment=deployment, recipe_hash="", stages=(), containers=(), hosts=(
        PlannedHost(name=host.name, address=host.ssh_address, rank=0, runtime=rt,
                    state_dir=deployment_dir(host, deployment)),))
    try:
        lock = DeployLock(plan, {host.name: transport}, command).acquire()
    except LockHeld as e:
        raise HostError(host.name, "lock", f"{deployment} not removed: {e.message}") from None
    try:
        yield
    finally:
        lock.release()
