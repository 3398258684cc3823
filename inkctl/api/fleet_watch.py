"""A fleet's (or a gateway's) supervision after boot, what ``inkctl watch`` does with one.

Each replica is supervised on its own (a replica is independent, unlike the ranks of one
group; ``api.watching.supervise``) and the router's health is polled (a gateway's also lists
every model's engine); with ``how.restart`` a failed replica alone is taken down and brought
up again (the others and the router are not touched), a dead router is started again.
Without it, the first failure ends the watch.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from inkctl.api.watching import Emit, Watching, run_hook, supervise
from inkctl.errors import InkctlError

if TYPE_CHECKING:
    from inkctl.execute.supervise.watch import RestartBudget
    from inkctl.plan.fleet import FleetPlan, Replica


def watch_fleet(loaded: Any, fleet: FleetPlan, how: Watching, emit: Emit) -> None:
    """Supervise every replica and the router until a failure it does not restart from (raised)
    or Ctrl-C (it says so and returns; the fleet is left as it is)."""
    from inkctl.execute.hosts.fanout import background

    w = _FleetWatch(loaded, fleet, how, emit)
    # one long-lived loop per replica and one for the router, on the one fan-out's followers
    background(lambda rep: w.router_loop() if rep is None else w.replica_loop(rep), [*fleet.replicas, None],
               name="watch", label=lambda rep: "router" if rep is None else str(rep.index))
    if fleet.gateway:
        emit("ok", f"watching gateway {fleet.name}: {len(fleet.replicas)} models and the gateway at {fleet.url}")
    else:
        emit("ok", f"watching fleet {fleet.name}: {len(fleet.replicas)} replicas and the router at {fleet.url}")
    try:
        while not w.stop.wait(0.25):
            pass
    except KeyboardInterrupt:
        w.stop.set()
        emit("stopped", f"stopped watching; fleet {fleet.name} is left as it is")
        return
    if w.fatal:
        raise w.fatal[0]


class _FleetWatch:
    """The loops' shared state: the stop flag, the failures that end the watch."""

    def __init__(self, loaded: Any, fleet: FleetPlan, how: Watching, emit: Emit):
        self.loaded, self.fleet, self.how, self.emit = loaded, fleet, how, emit
        self.stop = threading.Event()
        self.fatal: list[InkctlError] = []
        self.lock = threading.Lock()

    def _end(self, error: InkctlError) -> None:
        with self.lock:
            self.fatal.append(error)
        self.stop.set()

    def restart(self, what: str, budget: RestartBudget, only: set[str]) -> bool:
        how, emit = self.how, self.emit
        while not self.stop.is_set():
            delay = budget.next_delay(time.monotonic())
            if delay is None:
                emit("restart_refused", f"{what}: {how.max_restarts_per_hour} restarts within the last hour: giving up")
                return False
            emit("restart", f"restarting {what} in {delay:g} s: down, then up (the rest of the fleet untouched)")
            time.sleep(delay)
            budget.spend(time.monotonic())
            try:
                _restart_group(self.loaded, self.fleet, only, how.accept_new)
            except InkctlError as e:
                emit("restart_failed", f"{what}: up failed: {e.message.splitlines()[0]}")
                continue
            emit("restarted", f"{what} is up again")
            return True
        return False

    def replica_loop(self, rep: Replica) -> None:
        from inkctl.execute.deploy.fleet import replica_loaded
        from inkctl.execute.supervise.watch import RestartBudget

        how, emit = self.how, self.emit
        budget = RestartBudget(per_hour=how.max_restarts_per_hour, first_s=how.backoff)
        rl = replica_loaded(self.loaded, rep)
        while not self.stop.is_set():
            failure = supervise(rl, rep.plan, how.accept_new, how.interval,
                                lambda event, text, **kw: emit(event, f"{rep.name}: {text}", replica=rep.index, **kw))
            if self.stop.is_set():
                return
            emit("failure", f"{rep.name}: {failure.message}", cause=failure.cause, host=failure.host, rank=failure.rank,
                 replica=rep.index)
            if how.hook:
                run_hook(how.hook, failure, emit)
            if not how.restart or not self.restart(rep.name, budget, {rep.name}):
                self._end(InkctlError(f"{rep.name}: {failure.message}",
                                      hint="the router keeps serving from the other replicas; "
                                           "watch --restart brings this one back by itself"))
                return

    def router_loop(self) -> None:
        from inkctl.execute.supervise.health import check_once
        from inkctl.execute.supervise.watch import RestartBudget

        how, emit, fleet = self.how, self.emit, self.fleet
        url = fleet.router.health_url
        assert url is not None  # a router's plan waits for its health
        budget = RestartBudget(per_hour=how.max_restarts_per_hour, first_s=how.backoff)
        bad = 0
        while not self.stop.wait(how.interval):
            ok, seen = check_once(url, timeout=max(1.0, how.interval))
            if ok and fleet.gateway:  # a gateway that answers but forgot its engines (restarted)
                ok, seen = _registered_all(fleet)
            bad = 0 if ok else bad + 1
            if bad < 3:
                continue
            what = f"the gateway {seen}" if fleet.gateway and seen.startswith("lists") else \
                f"{fleet.router.health_url} did not answer 3 times ({seen})"
            emit("failure", f"router: {what}", cause="router", host=fleet.router.hosts[0].name, rank=None)
            bad = 0
            if not how.restart or not self.restart("the router", budget, set()):
                self._end(InkctlError(f"fleet {fleet.name}: the router does not answer ({seen})",
                                      hint="inkctl up RECIPE starts it again (the replicas are left as they are)"))
                return


def _registered_all(fleet: FleetPlan) -> tuple[bool, str]:
    """Does the gateway list every group with its model? (ok, what is missing)."""
    from inkctl.client.workers import registered
    from inkctl.plan.step import Register

    reg = next(s for s in fleet.router.steps() if isinstance(s, Register))
    try:
        have = registered(reg.url, timeout_s=5.0)
    except InkctlError as e:
        return False, e.message
    missing = [m for u, m in reg.workers if have.get(u.rstrip("/")) != m]
    return (not missing, "lists no engine for " + ", ".join(missing) if missing else "")


def _restart_group(loaded: Any, fleet: FleetPlan, only: set[str], accept_new: bool) -> None:
    """Down then up of the named replicas (none: the router alone), in this process."""
    from inkctl.api.secured import secrets_for
    from inkctl.execute.deploy.fleet import bring_up_fleet
    from inkctl.execute.deploy.takedown import take_down
    from inkctl.execute.events import Collect
    from inkctl.execute.hosts.fanout import each
    from inkctl.weights.preflight import weights_check

    reps = [r for r in fleet.replicas if r.name in only]
    each(lambda r: take_down(r.plan, list(r.hosts), accept_new=accept_new), reps, name="down")
    secrets = {}
    for r in reps:  # a gateway's model: its own recipe's secrets
        secrets.update(secrets_for(r.source or loaded, [r.plan]))
    bring_up_fleet(loaded, fleet, Collect(), secrets, accept_new=accept_new, keep=False, timeout=None, skip=[],
                   interrupt=threading.Event(), only=only, weights=weights_check)
