"""``plan`` and ``validate --hosts``: a recipe (a fleet, a gateway file) and its plan on paper,
built the way ``up`` builds it, without touching a host."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from inkctl.api.target import Target
from inkctl.errors import UsageError

if TYPE_CHECKING:
    from inkctl.plan.replicas.fleet import FleetPlan
    from inkctl.plan.step import Plan


class OnPaper(NamedTuple):
    """What ``plan`` shows: the loaded recipe (a ``LoadedGateway`` for a gateway file) and either
    its plan or its fleet's plans (a fleet, a gateway file)."""

    loaded: Any
    plan: Plan | None
    fleet: FleetPlan | None
    gateway: bool = False


def on_paper(target: Target) -> OnPaper:
    """The plan ``up`` would run for TARGET: a gateway file's models and router, a fleet's
    replicas, or one deployment's ranks."""
    from inkctl.api.fleet import fleet_of, load_gateway_fleet
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs
    from inkctl.recipe.reading.filekind import is_gateway_file
    from inkctl.recipe.reading.source import load_recipe

    if is_gateway_file(target.recipe):
        lg, fleet = load_gateway_fleet(Target(target.recipe, target.hosts), "plan")
        return OnPaper(lg, None, fleet, gateway=True)
    loaded = load_recipe(target.recipe, list(target.sets), target.hosts)
    if loaded.recipe.fleet is not None:
        return OnPaper(loaded, None, fleet_of(loaded))
    return OnPaper(loaded, build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded)), None)


def check_host(paper: OnPaper, host: str | None) -> None:
    """``--host NAME`` names one of the plan's hosts (a gateway file's plan is not checked: its
    groups say which host shows)."""
    if host is None or paper.gateway:
        return
    if paper.plan is not None:
        names = [h.name for h in paper.plan.hosts]
    else:
        assert paper.fleet is not None
        names = sorted({h.name for p in paper.fleet.plans for h in p.hosts})
    if host not in names:
        raise UsageError(f"--host {host}: no such host in this plan", hint="its hosts are " + ", ".join(names))


def up_command(paper: OnPaper, target: Target) -> str:
    """The ``inkctl up`` to run next, with the inventory it needs (or where to get one)."""
    from inkctl.plan.quote import command_line

    if paper.gateway:
        return command_line(("inkctl", "up", str(target.recipe), "--hosts", str(target.hosts)))
    loaded = paper.loaded
    if loaded.hosts_source and loaded.hosts_source.startswith("--hosts "):
        where = " " + loaded.hosts_source
    elif loaded.hosts is None:
        where = " --hosts FILE"
    else:
        where = ""
    hint = "    (an inventory: inkctl init writes one to edit)" if paper.plan is not None and loaded.hosts is None else ""
    return command_line(("inkctl", "up", str(target.recipe))) + where + hint


def check_hosts(loaded: Any) -> None:
    """``validate --hosts``: the recipe's plan (or its fleet's) builds on these hosts."""
    if loaded.recipe.fleet is not None:
        from inkctl.api.fleet import fleet_of

        fleet_of(loaded)
        return
    from inkctl.plan.deploy import build_plan

    build_plan(loaded.recipe, loaded.hosts)


def argv_verdicts(paper: OnPaper) -> dict[tuple[str, int], list[str]]:
    """What the engine said of each rank's argv (``inkctl lock``, or an earlier ``up``/``doctor``
    on this machine): (host, rank) -> one line per engine process; empty when never asked."""
    if paper.plan is None or paper.gateway:
        return {}
    from inkctl.execute.deploy.proof import known, said
    from inkctl.plan.proof import rank_argvs
    from inkctl.recipe.lockfile import read_proofs

    loaded = paper.loaded
    pinned = read_proofs(loaded)
    out: dict[tuple[str, int], list[str]] = {}
    for r in rank_argvs(paper.plan, loaded.recipe):
        v = known(r, loaded.recipe.engine.kind, pinned)
        if v is not None:
            out.setdefault((r.host, r.rank), []).append(("" if r.role != "serve" else "vllm serve: ") + said(v))
    return out
def nccl_settings(loaded: Any) -> list[tuple[str, list]]:
    """Per host, its NCCL settings (``plan.fabric.Setting``: the value, or what up reads from the
    host's fabric, and where it comes from); empty unless the recipe reads the fabric (RDMA on
    several hosts)."""
    from inkctl.plan import fabric
    from inkctl.plan.deploy import placeholder_hosts
    from inkctl.plan.hostvars import HostContext

    r = loaded.recipe
    if not fabric.wanted(r):
        return []
    placeholder = loaded.hosts is None
    hosts = list(loaded.hosts) if not placeholder else placeholder_hosts(r)
    return [(h.name, fabric.settings(r, HostContext(h, i, hosts[0], placeholder))) for i, h in enumerate(hosts)]
