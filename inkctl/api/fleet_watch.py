"""A fleet's (or a gateway's) supervision after boot, what ``inkctl watch`` does with one.

Each replica is supervised on its own (a replica is independent, unlike the ranks of one
group; ``api.watching.supervise``) and the router's health is polled (a gateway's also lists
every model's engine); with ``how.restart`` a failed replica alone is taken down and brought
up again (the others and the router are not touched), a dead router is started again: down
checked, then up with the options of the fleet's ``up``, in this process, through the one
restart loop (``api.watching.restart``) and the fleet's api. Without it, the first failure
ends the watch.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from inkctl.api.watching import DownFailed, Voice, Watching, restart, run_hook, supervise, up_options_of
from inkctl.errors import InkctlError

if TYPE_CHECKING:
    from inkctl.api.target import Target
    from inkctl.api.up import UpOptions
    from inkctl.execute.supervise.watch import RestartBudget
    from inkctl.plan.replicas.fleet import FleetPlan, Replica


def watch_fleet(loaded: Any, fleet: FleetPlan, how: Watching, say: Voice, *, target: Target,
                up_opts: UpOptions | None = None, cancel: threading.Event | None = None) -> None:
    """Supervise every replica and the router until a failure it does not restart from (raised)
    or ``cancel`` (Ctrl-C): it says so and returns; the fleet is left as it is. A restart brings
    a group up with ``up_opts`` (None: the options of the fleet's latest ``up``)."""
    from inkctl.execute.hosts.fanout import background

    w = _FleetWatch(loaded, fleet, how, say, target, up_opts or up_options_of(fleet.name, how))
    # one long-lived loop per replica and one for the router, on the one fan-out's followers
    background(lambda rep: w.router_loop() if rep is None else w.replica_loop(rep), [*fleet.replicas, None],
               name="watch", label=lambda rep: "router" if rep is None else str(rep.index))
    if fleet.gateway:
        say("ok", f"watching gateway {fleet.name}: {len(fleet.replicas)} models and the gateway at {fleet.url}")
    else:
        say("ok", f"watching fleet {fleet.name}: {len(fleet.replicas)} replicas and the router at {fleet.url}")
    stopped = False
    try:
        while not w.stop.wait(0.25):
            if cancel is not None and cancel.is_set():
                stopped = True
                break
    except KeyboardInterrupt:
        stopped = True
    if stopped:
        w.stop.set()  # the loops, their supervisors and a restart's up (it rolls back) stop
        say("stopped", f"stopped watching; fleet {fleet.name} is left as it is")
        return
    if w.fatal:
        raise w.fatal[0]


class _FleetWatch:
    """The loops' shared state: the stop flag, the failures that end the watch."""

    def __init__(self, loaded: Any, fleet: FleetPlan, how: Watching, say: Voice, target: Target, opts: UpOptions):
        self.loaded, self.fleet, self.how, self.say, self.target, self.opts = loaded, fleet, how, say, target, opts
        self.stop = threading.Event()
        self.fatal: list[InkctlError] = []
        self.lock = threading.Lock()
        self.down: set[str] = set()  # replicas found failed and not yet serving again (restarting)

    def _end(self, error: InkctlError) -> None:
        with self.lock:
            self.fatal.append(error)
        self.stop.set()

    def restart(self, what: str, budget: RestartBudget, only: set[str]) -> bool:
        """``watching.restart`` (the one restart loop) of the named replicas (none: the router),
        the rest of the fleet untouched; a failure it ends on is this watch's end."""
        def cycle() -> None:
            down_then_up_groups(self.loaded, self.fleet, self.target, only, self.opts, self.stop)

        try:
            return restart(what, self.how, budget, self.say, cycle, self.stop, named=True,
                           untouched=" (the rest of the fleet untouched)")
        except InkctlError as e:
            self._end(e)
            return False

    def replica_loop(self, rep: Replica) -> None:
        from inkctl.execute.deploy.fleet import replica_loaded
        from inkctl.execute.supervise.watch import RestartBudget

        how = self.how
        say = self.say.of(f"{rep.name}: ", replica=rep.index)
        budget = RestartBudget(per_hour=how.max_restarts_per_hour, first_s=how.backoff)
        rl = replica_loaded(self.loaded, rep)
        while not self.stop.is_set():
            failure = supervise(rl, rep.plan, how.accept_new, how.interval, say, stop=self.stop)
            if self.stop.is_set() or failure is None:
                return
            say("failure", failure.message, cause=failure.cause, host=failure.host, rank=failure.rank)
            if how.hook:
                run_hook(how.hook, failure, self.say)
            with self.lock:
                self.down.add(rep.name)
            try:
                back = how.restart and self.restart(rep.name, budget, {rep.name})
            finally:
                with self.lock:
                    self.down.discard(rep.name)
            if not back:
                if not self.stop.is_set():
                    self._end(InkctlError(f"{rep.name}: {failure.message}",
                                          hint="the router keeps serving from the other replicas; "
                                               "watch --restart brings this one back by itself"))
                return

    def router_loop(self) -> None:
        from inkctl.execute.supervise.health import check_once
        from inkctl.execute.supervise.watch import RestartBudget

        how, say, fleet = self.how, self.say, self.fleet
        url = fleet.router.health_url
        assert url is not None  # a router's plan waits for its health
        budget = RestartBudget(per_hour=how.max_restarts_per_hour, first_s=how.backoff)
        bad = 0
        while not self.stop.wait(how.interval):
            ok, seen = check_once(url, timeout=max(1.0, how.interval))
            if ok and fleet.gateway:  # a gateway that answers but forgot its engines (restarted)
                ok, seen = _registered_all(fleet)
            if not ok and seen.startswith("HTTP ") and self.down:
                bad = 0  # it answers: a router may say unhealthy while a replica it routes to is down
                continue
            bad = 0 if ok else bad + 1
            if bad < 3:
                continue
            what = f"the gateway {seen}" if fleet.gateway and seen.startswith("lists") else \
                f"{fleet.router.health_url} did not answer 3 times ({seen})"
            say("failure", f"router: {what}", cause="router", host=fleet.router.hosts[0].name, rank=None)
            bad = 0
            if not how.restart or not self.restart("the router", budget, set()):
                if not self.stop.is_set():
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


def down_then_up_groups(loaded: Any, fleet: FleetPlan, target: Target, only: set[str], opts: UpOptions,
                        cancel: threading.Event) -> None:
    """The named replicas down, checked (``DownFailed``: nothing is started over what a failed
    down left), then up with ``opts`` (the router too when it is not running; none named: the
    router alone), in this process, through the fleet's api (``api.fleet``)."""
    from inkctl.api.fleet import down_groups, up_fleet
    from inkctl.execute.events import Collect

    failure = down_groups(fleet, only, accept_new=opts.accept_new).failure() if only else None
    if failure is not None:
        raise DownFailed(failure.message, hint=failure.hint)
    up_fleet(loaded, fleet, Collect, target, opts, cancel=cancel, only=only)
