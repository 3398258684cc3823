"""A fleet's rolling update on paper: the order replicas are replaced in, what each step does,
and the old version of one replica as a plan again (to bring it back when its new version
fails). Pure: no I/O.

One replica at a time, in index order: out of the router, drained (its requests in flight end,
at most ``fleet.rollout.drain_timeout_s``), the old version stopped and removed, the new one
started, its health and the recipe's smoke checks, back in the router; then the next. The
others serve meanwhile. The old version comes back from the plan record its hosts kept at the
last launch (``plan.record``: every run step of the ranks on that host, in launch order) and the
files of its deployment directory, kept aside until the new version serves.

``plan`` shows what each step replaces, per rank, against the last launch of that replica this
machine recorded (``inkctl.launchlog``, read by the caller): the diff ``up`` shows from the
hosts' records (``plan.record.rank_changes``). Without such a record, what ``plan`` printed
before: the hosts' records are read when ``up`` runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from inkctl.plan.step import Plan, Run, Stage, WaitHealth

ASIDE = ".rollback"  # the old deployment directory, kept beside the new one until the new version serves


@dataclass(frozen=True)
class RolloutStep:
    index: int
    deployment: str
    url: str  # the replica's engine base URL, as the router lists it
    changes: tuple[str, ...] = ()  # what changes (- old, + new), when known


@dataclass(frozen=True)
class Rollout:
    steps: tuple[RolloutStep, ...]
    drain_timeout_s: int
    router_url: str

    @property
    def deployments(self) -> tuple[str, ...]:
        return tuple(s.deployment for s in self.steps)


def rolling(fleet) -> bool:
    """Does ``up`` of this fleet replace changed replicas one at a time? (a gateway's groups are
    different models: each is replaced where it stands; a P/D fleet only behind a router that
    puts a prefill or decode worker back while it runs: ``Router.pd_workers_at_runtime``)."""
    if fleet.gateway or fleet.rollout.strategy != "rolling":
        return False
    return not fleet.disagg or fleet.router_spec.pd_workers_at_runtime


def rollout(fleet, changed: dict[str, tuple[str, ...]]) -> Rollout:
    """The rollout of the replicas in ``changed`` (deployment -> what changes), in index order."""
    steps = tuple(RolloutStep(r.index, r.name, r.url, changed[r.name]) for r in fleet.replicas if r.name in changed)
    return Rollout(steps=steps, drain_timeout_s=fleet.rollout.drain_timeout_s, router_url=fleet.url)


def step_lines(fleet, index: int) -> list[str]:
    """What replacing replica ``index`` does, in order (``inkctl plan`` and ``up`` show these)."""
    rep = fleet.replicas[index]
    t = fleet.rollout.drain_timeout_s
    worker = rep.worker
    back = f"put {rep.url} back in the router" + (
        " (" + ", ".join(f"{k} {v}" for k, v in worker.items()) + ")" if worker else "")
    return [
        f"take {rep.url} out of the router ({fleet.url})",
        f"drain: wait until its requests in flight end (its /metrics: running + waiting), at most {t} s",
        f"keep its deployment directory aside ({ASIDE}), stop and remove its containers",
        f"start the new version ({rep.plan.recipe_hash}): " + ", ".join(c.name for c in rep.plan.containers),
        "wait for its health (a P/D replica answers no completion alone: the router's next ones go through it)"
        if rep.role else "wait for health and the recipe's smoke checks",
        back,
        "on failure: remove the new version, start the old one again from its plan record, put it back; stop the rollout",
    ]


HOST_RECORDS = "the per-rank changes (- old, + new) are read from each host's plan record when up runs"


@dataclass(frozen=True)
class LocalRecord:
    """The last launch of a deployment this machine recorded (``inkctl.launchlog``)."""

    path: str
    date: str
    record: dict


def replica_changes(rep, local: LocalRecord) -> list:
    """What replacing ``rep`` changes per rank against its last local launch record
    (``plan.record.RankChange``, the diff ``up`` shows from the hosts' records). Raises
    ValueError when the record is not one."""
    from inkctl.plan.record import argv_by_rank, launched_argv, rank_changes

    old, old_where = launched_argv(local.record)
    where = {**old_where, **{c.rank: c.host for c in rep.plan.containers}}
    return rank_changes(old, argv_by_rank(rep.plan.stages), where)


def change_lines(rep, local: LocalRecord | None, base: str) -> list[str]:
    """``plan``'s lines for one replica: what changes per rank against its last local launch
    record, where that record is, or that there is none."""
    from inkctl.plan.record import diff_plans, launched_argv, argv_by_rank

    if local is None:
        return [f"no local launch record of {rep.name} (under {base}): its changes are read from its hosts' "
                "plan records when up runs"]
    try:
        old, old_where = launched_argv(local.record)
    except ValueError:
        return [f"{local.path}: not a launch record; its changes are read from its hosts' plan records when up runs"]
    old_hash = str(local.record.get("recipe_hash", "?"))
    where = {**old_where, **{c.rank: c.host for c in rep.plan.containers}}
    head = (f"what changes (- old, + new) against its last local launch ({local.path}, {local.date}; recipe hash "
            f"{old_hash} -> {rep.plan.recipe_hash})" if old_hash != rep.plan.recipe_hash else
            f"the same version as its last local launch ({local.path}, {local.date}): nothing to replace")
    return [head + ":"] + diff_plans(old, argv_by_rank(rep.plan.stages), where)


def plan_lines(fleet, records: dict[str, LocalRecord | None] | None = None, base: str = "") -> list[str]:
    """The rollout ``up`` runs when the replicas run another version of the recipe. ``records``:
    each replica's last local launch record (deployment -> record, None where there is none,
    read under ``base``); with none at all the changes are the hosts' plan records' (read by up)."""
    if fleet.disagg and not fleet.router_spec.pd_workers_at_runtime:
        return [PD_AT_ONCE.format(kind=fleet.router_spec.kind)]
    if fleet.gateway:
        return ["models no longer in the file go FIRST, before any model of the file starts (a model put on a "
                "dropped one's GPUs and port needs them free): off the gateway, drained (at most "
                f"{fleet.rollout.drain_timeout_s} s), then removed (the steps below 'models no longer in the "
                "gateway file')",
                "a model whose recipe changed is replaced where it stands: it does not serve while it boots"]
    if not rolling(fleet):
        return ["if the replicas run another version: every replica replaced at once (fleet.rollout.strategy "
                "all_at_once): the fleet does not serve while the new version boots"]
    local_any = any(v is not None for v in (records or {}).values())
    out = _pd_order(fleet) if fleet.disagg else _order(fleet)
    for i, rep in enumerate(fleet.replicas):
        out.append(f"{rep.label} ({rep.name}):")
        out += [f"  {k}. {line}" for k, line in enumerate(step_lines(fleet, i), 1)]
        if local_any:
            out += ["  " + line for line in change_lines(rep, (records or {}).get(rep.name), base)]
    out.append(HOST_RECORDS if not local_any else
               "up reads each host's plan record again when it runs: what the hosts run is what gets replaced")
    return out


PD_AT_ONCE = ("a P/D fleet whose replicas run another version: every replica replaced at once, the fleet does not "
              "serve meanwhile: {kind}-router in its P/D mode cannot put a prefill or decode worker back while it "
              "runs (vllm-router 0.1: POST /remove_worker takes one out, POST /add_worker and POST /workers answer "
              "400); sglang-router can (fleet.router.kind: sglang: one replica at a time)")


def _order(fleet) -> list[str]:
    """A plain fleet: the order, and the surge."""
    n = len(fleet.replicas)
    out = [f"if the replicas run another version of the recipe: one replica at a time, in order "
           f"({', '.join(r.name for r in fleet.replicas)}); the others serve meanwhile" if n > 1 else
           "if the replica runs another version of the recipe: it is replaced; with one replica, nothing "
           "serves while the new version boots (raise fleet.replicas to 2 to keep serving)"]
    surge = fleet.surge
    if fleet.rollout.surge and surge is None:
        out.append("fleet.rollout.surge: the inventory has no room for one more replica: no surge")
    elif surge is not None:
        out.append(f"first (fleet.rollout.surge): one more replica of the new version, {surge.name} on {surge.gpus} "
                   f"({surge.url}), started and put in the router; last: it is taken out, drained and removed")
    return out


def _pd_order(fleet) -> list[str]:
    """A P/D fleet behind a router that takes workers back: one replica at a time, prefill first;
    a role of one replica leaves the fleet unable to serve while that replica boots."""
    names = ", ".join(r.name for r in fleet.replicas)
    out = [f"if the replicas run another version of the recipe: one replica at a time, prefill replicas first, "
           f"then decode ({names}); the other replicas of its role serve meanwhile"]
    for role in ("prefill", "decode"):
        if sum(r.role == role for r in fleet.replicas) == 1:
            out.append(f"the {role} role has one replica: the fleet does not serve while its new version boots "
                       f"(raise fleet.disagg.{role}.replicas to 2 to keep serving)")
    if fleet.rollout.surge:
        out.append("fleet.rollout.surge: not for a P/D fleet: no surge")
    return out


def aside(state_dir: str) -> str:
    return state_dir.rstrip("/") + ASIDE


def keep_aside(state_dir: str) -> tuple[str, ...]:
    """Copy the deployment directory aside (its env file, hotfixes and plan record), replacing an
    earlier copy."""
    a = aside(state_dir)
    return ("sh", "-c", 'rm -rf -- "$2" && if [ -d "$1" ]; then cp -a -- "$1" "$2"; fi', "keep-aside", state_dir, a)


def restore_aside(state_dir: str) -> tuple[str, ...]:
    """Put the copy back as the deployment directory."""
    return ("sh", "-c", 'if [ -d "$2" ]; then rm -rf -- "$1" && mv -- "$2" "$1"; fi', "restore-aside", state_dir,
            aside(state_dir))


def drop_aside(state_dir: str) -> tuple[str, ...]:
    return ("rm", "-rf", "--", aside(state_dir))


def old_plan(new: Plan, records: dict[str, str]) -> Plan:
    """The old version of a replica as a plan again: for each host, in the new plan's host order,
    the run steps its plan record holds (host -> the record's text), then the new plan's health
    wait (the same replica: the same URL). Raises ValueError when a host's record is missing or
    unreadable."""
    runs: list[Run] = []
    old_hash = ""
    for h in new.hosts:
        if h.name not in records:
            raise ValueError(f"{h.name}: no plan record")
        d = json.loads(records[h.name])
        if not isinstance(d, dict) or not isinstance(d.get("runs"), list):
            raise ValueError(f"{h.name}: not a plan record")
        old_hash = old_hash or str(d.get("recipe_hash", ""))
        runs += [Run(host=h.name, rank=int(r["rank"]), purpose=str(r.get("purpose") or "run"),
                     argv=tuple(str(a) for a in r["argv"])) for r in d["runs"]]
    stages = [Stage("launch", "start the old version again (its plan record)", tuple(runs))]
    wait = next((s for s in new.steps() if isinstance(s, WaitHealth)), None)
    if wait is not None:
        stages.append(Stage("health", "wait for the old version to serve", (replace(wait, answer_url="", model=""),)))
    return replace(new, recipe_hash=old_hash, stages=tuple(stages), warnings=())
