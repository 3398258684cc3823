"""A recipe with ``fleet:`` (replicas behind a router) or a gateway file (several recipes behind
one endpoint) below the command line: load and plan (``FleetPlan``), ``up`` (trust, secrets,
signals, ``execute.deploy.fleet.bring_up_fleet``, the ``Finished`` event), ``down``, the
groups' states for ``status``, and what ``plan`` shows of replicas an earlier, larger fleet
left behind. Supervision is ``api/fleet_watch.py``'s, ``inkctl top``'s scrapes ``api/measure/top.py``'s. Light to import
(``plan`` and ``validate`` of a fleet recipe use it): what ``up`` needs is imported there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inkctl.api.target import Target, load
from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError, UsageError

if TYPE_CHECKING:
    from inkctl.api.up import UpOptions
    from inkctl.execute.deploy.fleet import FleetOutcome
    from inkctl.execute.deploy.takedown import TakeDown
    from inkctl.execute.events import Sink
    from inkctl.plan.replicas.fleet import FleetPlan, Replica
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded


def is_gateway(recipe: Any) -> bool:
    """Is this file a gateway file (several recipes behind one endpoint)?"""
    from inkctl.recipe.reading.filekind import is_gateway_file

    return is_gateway_file(recipe)


def fleet_of(loaded: Loaded) -> FleetPlan:
    """The fleet's plans (every replica's and the router's) from a loaded recipe."""
    from inkctl.plan.replicas.fleet import build_fleet
    from inkctl.plan.inputs import plan_inputs

    if loaded.recipe.fleet is not None and loaded.recipe.fleet.disagg is not None:  # prefill/decode replicas
        from inkctl.plan.replicas.disagg import build_disagg

        return build_disagg(loaded.recipe, loaded.hosts, source=_where(loaded), **plan_inputs(loaded))
    return build_fleet(loaded.recipe, loaded.hosts, source=_where(loaded), **plan_inputs(loaded))


def _where(loaded: Loaded) -> str:
    """file:line:col of the recipe's fleet section (errors about replicas point there)."""
    try:
        from inkctl.recipe.reading.document import parse_document

        doc = parse_document(loaded.path)
        pos = doc.position(("fleet", "replicas")) or doc.position(("fleet",))
    except Exception:  # noqa: BLE001 - a bundled or vanished file: the path alone
        pos = None
    return f"{loaded.path}:{pos[0]}:{pos[1]}" if pos else str(loaded.path)


def load_fleet(target: Target, command: str, *, need_hosts: bool = True) -> tuple[Loaded, FleetPlan]:
    """A recipe that must have ``fleet:``, with its hosts -> (loaded, its FleetPlan); the scrubber
    armed for what its engines echo."""
    from inkctl.scrub import arm_for

    loaded = load(target, command, need_hosts=False)
    if loaded.recipe.fleet is None:
        raise UsageError(f"{command} works on a fleet: the recipe has no fleet: section",
                         hint="add fleet: {replicas: N} to the recipe")
    if need_hosts and loaded.hosts is None:
        raise UsageError(f"{command} needs hosts: pass --hosts FILE (an inventory) or list hosts: in the recipe")
    arm_for(loaded.recipe)
    return loaded, fleet_of(loaded)


def load_gateway_fleet(target: Target, command: str) -> tuple[Any, FleetPlan]:
    """A gateway file, its inventory and recipes -> (LoadedGateway, its FleetPlan)."""
    from inkctl.plan.replicas.gateway import build_gateway
    from inkctl.plan.inputs import plan_inputs
    from inkctl.recipe.gateway import load_gateway
    from inkctl.scrub import arm_for

    if target.hosts is None:
        raise UsageError(f"{command} of a gateway file needs --hosts FILE (the inventory its models are placed on)")
    lg = load_gateway(target.recipe, target.hosts)
    for g in lg.groups:
        arm_for(g.recipe)
    return lg, build_gateway(lg, [plan_inputs(g) for g in lg.groups])


def load_any(target: Target, command: str) -> tuple[Any, FleetPlan]:
    """A gateway file, or a recipe with ``fleet:`` -> (what was loaded, its FleetPlan)."""
    if is_gateway(target.recipe):
        return load_gateway_fleet(target, command)
    return load_fleet(target, command)


def replica_loaded(loaded: Any, rep: Replica) -> Loaded:
    """The loaded recipe as one replica (or a gateway's model) sees it: its recipe, its hosts."""
    from inkctl.execute.deploy.fleet import replica_loaded as of

    return of(loaded, rep)


# ------------------------------------------------------------------------------------- plan

def spare_hosts(fleet: FleetPlan) -> list[str]:
    """The inventory's hosts no replica uses."""
    from inkctl.plan.replicas.fleet import spare_hosts as spare

    return spare(fleet)


def retired_words(fleet: FleetPlan) -> str:
    """Which replicas of an earlier fleet up and down remove, in words (``plan`` says it)."""
    if fleet.disagg:
        from inkctl.plan.replicas.disagg import retired_words as words

        return words(fleet)
    return f"containers labelled {fleet.name}-r<k>, k >= {len(fleet.replicas)}"


def retire_lines(fleet: FleetPlan, deployment: str, only_host: str | None = None) -> list[tuple[str, str]]:
    """(host, command line) of the steps that remove ``deployment``'s containers from every host
    of the inventory (the one removal; the containers are found by label at run time)."""
    from inkctl.plan.replicas.fleet import retire_steps
    from inkctl.plan.quote import command_line

    rt = fleet.router.hosts[0].runtime
    return [(h.name, command_line(st.argv)) for h in fleet.hosts if not only_host or h.name == only_host
            for st in retire_steps(h, rt, deployment, ["<its containers>"])]


def rollout_lines(fleet: FleetPlan, results_dir: Path | None = None) -> list[str]:
    """What ``up`` does when the replicas run another version: the order and each step, and per
    replica what changes against its last launch recorded under ``results_dir`` (``up``'s
    ``--results-dir``; None: not looked for)."""
    from inkctl.plan.replicas.rollout import plan_lines

    if results_dir is None or not rolling_fleet(fleet):
        return plan_lines(fleet)
    return plan_lines(fleet, local_records(fleet, results_dir), str(results_dir / "launches"))


def rolling_fleet(fleet: FleetPlan) -> bool:
    from inkctl.plan.replicas.rollout import rolling

    return rolling(fleet)


def local_records(fleet: FleetPlan, results_dir: Path) -> dict[str, Any]:
    """Each replica's last launch recorded on this machine (``inkctl.launchlog``): deployment ->
    ``LocalRecord``, or None where there is none."""
    from inkctl import launchlog
    from inkctl.plan.replicas.rollout import LocalRecord

    out: dict[str, Any] = {}
    for rep in fleet.replicas:
        got = launchlog.latest(results_dir, rep.name)
        out[rep.name] = None if got is None else LocalRecord(str(got[0]), str(got[1].get("date", "")), got[1])
    return out


def rollout_changes(fleet: FleetPlan, results_dir: Path) -> dict[str, dict]:
    """``plan -o json``: per replica with a local launch record, where it is and what changes per
    rank (deployment -> {record, date, recipe_hash, ranks})."""
    from inkctl.plan.replicas.rollout import replica_changes

    if not rolling_fleet(fleet):
        return {}
    out: dict[str, dict] = {}
    reps = {r.name: r for r in fleet.replicas}
    for name, local in local_records(fleet, results_dir).items():
        if local is None:
            continue
        try:
            ranks = [c.as_dict() for c in replica_changes(reps[name], local)]
        except ValueError:
            continue
        out[name] = {"record": local.path, "date": local.date, "recipe_hash": local.record.get("recipe_hash"),
                     "ranks": ranks}
    return out


def gateway_label(fleet: FleetPlan) -> str:
    """The label (key=value) every container of a gateway's groups carries."""
    from inkctl.plan.replicas.gateway import GATEWAY_LABEL
    from inkctl.runtimes.spec import LABEL_PREFIX

    return f"{LABEL_PREFIX}{GATEWAY_LABEL}={fleet.name}"


# --------------------------------------------------------------------------------------- up

@dataclass
class FleetUpResult:
    """How a fleet's (or a gateway's) ``up`` ended well."""

    fleet: FleetPlan
    outcome: FleetOutcome  # every group's outcome, the router's, the replicas retired
    seconds: float  # since up started

    @property
    def already(self) -> bool:
        """Every group and the router were up, the same version, and nothing was retired."""
        from inkctl.execute.deploy.runner import UpStatus

        return self.outcome.status is UpStatus.ALREADY and not self.outcome.retired

    @property
    def first_ttft_s(self) -> float | None:
        """The first streamed answer through the router: its time to first token."""
        first = self.outcome.router.first_answer if self.outcome.router else None
        return None if first is None else first.ttft_s

    def was_running(self, rep: Replica) -> bool:
        """Was this group already running (the same version), untouched by this up?"""
        from inkctl.execute.deploy.runner import UpStatus

        o = self.outcome.replicas.get(rep.name)
        return o is not None and o.status is UpStatus.ALREADY


def up_fleet(loaded: Any, fleet: FleetPlan, display: Callable[[], Sink], target: Target,
             opts: UpOptions, *, cancel: threading.Event | None = None,
             only: set[str] | None = None) -> FleetUpResult:
    """Bring every group and the router up (``execute.deploy.fleet``): trust and secrets checked
    for each recipe the groups come from before any host is touched, the display behind the
    scrubber, ``cancel`` set stops it; a failure ends with its ``Finished`` event and is raised
    (scrubbed; exit 130 when cancelled). ``only``: these replicas alone (none: the router
    alone), the rest left as it is (a restart by ``watch``)."""
    from inkctl.api.secured import secrets_for, secure
    from inkctl.api.up import note_options
    from inkctl.execute.deploy.fleet import bring_up_fleet
    from inkctl.execute.events import Finished
    from inkctl.plan.inputs import require_trusted

    t0 = time.monotonic()
    sources = _sources(loaded, fleet)
    for src in sources:
        require_trusted(src)
    _room_for_fds(sum(len(rep.hosts) for rep in fleet.replicas))
    secrets = {}
    for src in sources:  # a gateway's models: each recipe's own secrets section
        secrets.update(secrets_for(src, [rep.plan for rep in fleet.replicas if (rep.source or loaded) is src]))
    from inkctl import runlog

    runlog.note(fleet=fleet.name)
    note_options(opts)
    sec = secure(loaded, secrets, display)
    kept: set[str] = set()

    def launched(plan: Plan) -> None:  # what runs now, kept on this machine for plan's diff (api.boots)
        from inkctl.api.boots import record_launches

        kept.add(plan.deployment)
        record_launches(opts.results_dir, [plan], sec.sink)

    try:
        from inkctl.weights.preflight import weights_check

        outcome = bring_up_fleet(loaded, fleet, sec.sink, secrets, accept_new=opts.accept_new, keep=opts.keep,
                                 timeout=opts.timeout, skip=list(opts.skip), interrupt=cancel or threading.Event(),
                                 weights=weights_check, only=only, launched=launched)
    except (Cancelled, KeyboardInterrupt):
        err = InkctlError("interrupted: what this run started was removed", exit_code=EXIT_INTERRUPTED,
                          hint=f"check with: inkctl status {target.where()}")
        _failed(sec.sink, fleet, t0, err)
        raise err from None
    except InkctlError as e:
        sec.scrub.error(e)
        _failed(sec.sink, fleet, t0, e)
        raise
    for rep in fleet.replicas:
        if rep.name not in kept and (only is None or rep.name in only):
            launched(rep.plan)
    result = FleetUpResult(fleet, outcome, time.monotonic() - t0)
    first = result.first_ttft_s
    sec.sink.emit(Finished(ok=True, deployment=fleet.name, seconds=round(result.seconds, 3), url=fleet.url,
                           first_ttft_s=None if first is None else round(first, 4), message=outcome.status.value))
    sec.sink.close()
    return result


def _failed(sink: Sink, fleet: FleetPlan, t0: float, e: InkctlError) -> None:
    from inkctl.execute.events import Finished

    sink.emit(Finished(ok=False, deployment=fleet.name, seconds=round(time.monotonic() - t0, 3),
                       message=e.message, hint=e.hint or ""))
    sink.close()


def _sources(loaded: Any, fleet: FleetPlan) -> list:
    """Each recipe the fleet's groups come from, as loaded (one for replicas; one per model)."""
    out: list = []
    for rep in fleet.replicas:
        src = rep.source or loaded
        if all(src is not o for o in out):
            out.append(src)
    return out


def _room_for_fds(hosts: int) -> None:
    """A fleet holds ~4 file descriptors per host while it comes up (benchmarks/fleet_scale.py): raise
    the soft limit towards the hard one when the usual 1024 would run out (about 250 hosts)."""
    import resource

    want = 8 * hosts + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if new > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


# ------------------------------------------------------------------------------------- down

@dataclass
class FleetDownResult:
    fleet: FleetPlan
    reports: list[tuple[Plan, TakeDown]]  # every group's take-down (the router's too)
    retired: dict[str, list[str]]  # a replica (a model) no longer in the recipe -> hosts it was removed from

    @property
    def failed(self) -> dict[str, str]:
        """``DEPLOYMENT HOST`` -> why that host could not be cleaned."""
        return {f"{plan.deployment} {h}": why for plan, rep in self.reports for h, why in rep.failed.items()}

    def failure(self) -> InkctlError | None:
        """The error to end with when a host could not be cleaned (None: every host was)."""
        failed = self.failed
        if not failed:
            return None
        lines = "\n".join(f"  {k}: {v}" for k, v in failed.items())
        return InkctlError(f"fleet {self.fleet.name}: could not clean every host:\n{lines}",
                           hint="fix the host (or its network) and run inkctl down again; it only removes what is left")


def down_fleet(fleet: FleetPlan, *, accept_new: bool) -> FleetDownResult:
    """Every group and the router removed, and groups an earlier version left behind."""
    from inkctl.execute.deploy.fleet import take_down_fleet

    reports, retired = take_down_fleet(fleet, accept_new=accept_new)
    return FleetDownResult(fleet, list(reports), retired)


def down_groups(fleet: FleetPlan, names: set[str], *, accept_new: bool) -> FleetDownResult:
    """The named replicas (or a gateway's models) removed, the rest of the fleet and the router
    left as they are (a restart by ``watch``); ``failure()`` says what could not be cleaned."""
    from inkctl.execute.deploy.takedown import take_down
    from inkctl.execute.hosts.fanout import each

    reps = [r for r in fleet.replicas if r.name in names]
    reports = each(lambda r: take_down(r.plan, list(r.hosts), accept_new=accept_new), reps, name="down")
    return FleetDownResult(fleet, [(r.plan, rep) for r, rep in zip(reps, reports)], {})


# ----------------------------------------------------------------------------------- status

@dataclass
class FleetStatus:
    """A fleet's or a gateway's ``status``: one row per group (replica or model, and the router)."""

    fleet: FleetPlan
    rows: list[dict]

    @property
    def ok(self) -> bool:
        return all(r["ok"] for r in self.rows)

    def failure(self) -> InkctlError | None:
        """The error to end with when a group is not up (None: all are)."""
        if self.ok:
            return None
        bad = [f"{r['group']} {r['state']}" for r in self.rows if not r["ok"]]
        what = "gateway" if self.fleet.gateway else "fleet"
        return InkctlError(f"{what} {self.fleet.name} is not fully up: " + "; ".join(bad))


def fleet_status(loaded: Any, fleet: FleetPlan, accept_new: bool) -> FleetStatus:
    """Every group's state (``fleet_states``), with the error to end with."""
    return FleetStatus(fleet, fleet_states(loaded, fleet, accept_new))


def fleet_states(loaded: Any, fleet: FleetPlan, accept_new: bool) -> list[dict]:
    """One row per group (replica or router): its containers' states, its GPUs, its health."""
    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.hosts.fanout import each
    from inkctl.execute.state.probe import deployment_containers
    from inkctl.execute.supervise.health import check_once

    conn = connect_each(list(fleet.hosts or loaded.hosts), accept_new=accept_new)
    groups = [(rep.label, rep.plan, rep.gpus, rep.url) for rep in fleet.replicas]
    groups.append(("gateway" if fleet.gateway else "router", fleet.router, fleet.router.hosts[0].name, fleet.url))

    def one(g) -> dict:
        label, plan, gpus, url = g
        states, unreachable = [], []
        for c in plan.containers:
            tr = conn.transports.get(c.host)
            if tr is None:
                unreachable.append(c.host)
                states.append("unreachable")
                continue
            try:
                hc = deployment_containers(tr, plan.host(c.host).runtime, plan.deployment)
            except Exception as e:  # noqa: BLE001 - a host that fails the question is reported as such
                unreachable.append(f"{c.host} ({e})")
                states.append("unreachable")
                continue
            got = [x for x in hc.containers if x.name == c.name]
            states.append(got[0].state if got else "missing")
        health = check_once(plan.health_url)[0] if all(s == "running" for s in states) else False
        state = "up" if health else ("running, not answering" if all(s == "running" for s in states)
                                     else ", ".join(sorted(set(states))))
        return {"group": label, "deployment": plan.deployment, "gpus": gpus, "url": url,
                "containers": [{"host": c.host, "rank": c.rank, "name": c.name, "state": s}
                               for c, s in zip(plan.containers, states)],
                "state": state, "ok": health}

    try:
        return each(one, groups, name="status")
    finally:
        close_all(conn.transports)
