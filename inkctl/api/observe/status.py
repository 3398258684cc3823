"""``status`` below the command line: each rank's container as its host has it (state, exit
code, uptime, image, the recipe hash it runs) and the head's health, every host asked in
parallel; a host that cannot be reached is a row of its own. Change nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from inkctl.api.observe.reach import OnAccept, close, connect
from inkctl.api.target import Target, one_group, plan_for
from inkctl.errors import InkctlError

if TYPE_CHECKING:
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded

NOT_PLANNED = "not in the current plan"  # the detail of a container the plan no longer has


@dataclass
class Status:
    """What the hosts have, masked: one row per rank (and per container the plan no longer
    has), host -> why it could not be asked, the head's health (url, state, detail)."""

    loaded: Loaded
    plan: Plan
    rows: list[dict]
    unreachable: dict[str, str]
    health: dict

    @property
    def ok(self) -> bool:
        """Every planned rank running, every host answered, health up."""
        planned = [r for r in self.rows if r.get("detail") != NOT_PLANNED]
        return (not self.unreachable and all(r["state"] == "running" for r in planned)
                and self.health.get("state") == "up")

    def failure(self) -> InkctlError | None:
        """The error to end with when the deployment is not fully up (None: it is)."""
        return None if self.ok else InkctlError(_not_up(self.rows, self.unreachable, self.health))


def status(target: Target, *, accept_new: bool = False, on_accept: OnAccept | None = None) -> Status:
    """Ask every host of the one deployment ``target`` names (a fleet or a gateway file, one row
    per group: ``api.backend.status``)."""
    from inkctl.execute.state.probe import deployment_states
    from inkctl.scrub import active

    loaded = one_group(target, "status", "a fleet or a gateway file: one row per group and the router "
                                         "(inkctl status RECIPE)")
    plan, _ = plan_for(loaded, target)
    assert loaded.hosts is not None
    transports = connect(loaded.hosts, accept_new, on_accept)
    try:
        states = deployment_states(plan, transports)
    finally:
        close(transports)
    found, errors = states.ok, {h: e.reason for h, e in states.failed.items()}
    head = plan.containers[0]
    head_running = any(x.running and (x.name == head.name or x.rank == 0) for x in
                       (found[head.host].containers if head.host in found else []))
    health = _health(plan, head_running)
    scrub = active()
    return Status(loaded, plan, scrub(_rows(plan, found, errors, health)), scrub(errors), scrub(health))


def _rows(plan: Plan, found: dict, errors: dict, health: dict) -> list[dict]:
    from inkctl.execute.state.probe import human_duration, uptime

    rows = []
    for c in plan.containers:
        base = {"host": c.host, "rank": c.rank, "role": c.role, "container": c.name}
        if c.host in errors:
            rows.append({**base, "state": "unreachable", "detail": errors[c.host].removeprefix("unreachable: ")})
            continue
        hc = found[c.host]
        match = [x for x in hc.containers if x.name == c.name or x.rank == c.rank]
        if not match:
            rows.append({**base, "state": "missing"})
            continue
        x = match[0]
        up_s = uptime(x, hc.clock)
        rows.append({**base, "container": x.name, "state": x.state, "exit_code": x.exit_code,
                     "health": health.get("state") if c.rank == 0 and x.running else None,
                     "uptime_s": None if up_s is None else int(up_s), "uptime": human_duration(up_s),
                     "image": x.image, "image_id": x.image_id_short, "recipe_hash": x.recipe_hash,
                     "hash_matches": x.recipe_hash == plan.recipe_hash})
    planned = {c.name for c in plan.containers}
    for host, hc in found.items():  # the deployment's containers the plan no longer has
        for x in hc.containers:
            if x.name not in planned:
                rows.append({"host": host, "rank": x.rank, "role": x.role, "container": x.name, "state": x.state,
                             "exit_code": x.exit_code, "image": x.image, "image_id": x.image_id_short,
                             "recipe_hash": x.recipe_hash, "hash_matches": x.recipe_hash == plan.recipe_hash,
                             "detail": NOT_PLANNED})
    return rows


def _health(plan: Plan, head_running: bool) -> dict:
    from inkctl.execute.supervise.health import check_once

    url = plan.health_url
    if url is None or not head_running:
        return {"url": url, "state": None}
    ok, seen = check_once(url)
    return {"url": url, "state": "up" if ok else "down", "detail": seen}


def _not_up(rows: list[dict], errors: dict, health: dict) -> str:
    bad = [f"{r['host']}/{r['rank']} {r['state']}" + (f" (exit {r['exit_code']})" if r.get("exit_code") is not None else "")
           for r in rows if r["state"] not in ("running", "unreachable") and r.get("detail") != NOT_PLANNED]
    if not bad and not errors and health.get("state") != "up":
        bad = [f"health {health.get('state') or 'unknown'} at {health.get('url')}"]
    if errors:
        bad.append("unreachable: " + ", ".join(errors))
    return "the deployment is not fully up: " + "; ".join(bad)
