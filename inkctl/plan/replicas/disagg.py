"""recipe (with ``fleet.disagg``) + hosts -> a ``FleetPlan`` of prefill and decode replicas and
the router in P/D mode. Pure.

Every replica is the recipe's engine group under its own deployment name (``NAME-p0``...
for prefill, ``NAME-d0``... for decode), so up, down, status, watch and logs work on it as on
any replica of a fleet. Replicas take the inventory's hosts in order, prefill first (or the
hosts a role lists): ``nodes`` hosts each, ``gpus_per_host`` GPUs of each; a host whose
``gpus`` lists more indices is shared, with the engine's ports and the bootstrap port shifted
by ``fleet.port_stride`` for every replica before it on that host.

The engine flags and environment of a role are the engine module's (``EngineSpec.disagg_role``:
vLLM ``--kv-transfer-config`` with the NixlConnector and its side channel port; SGLang
``--disaggregation-mode``, ``--disaggregation-transfer-backend``,
``--disaggregation-bootstrap-port``). The router:
sglang-router ``--pd-disaggregation --prefill URL BOOTSTRAP_PORT --decode URL``, vllm-router
``--vllm-pd-disaggregation --prefill URL --decode URL`` (their 0.3 / 0.1 releases).
"""

from __future__ import annotations

from dataclasses import replace

from inkctl.errors import InkctlError, counted
from inkctl.plan.deploy import build_plan
from inkctl.plan.step import Plan, WaitHealth
from inkctl.plan.replicas.fleet import FleetPlan, Replica, _renamed, _router_host, router_argv, router_plan, shifted
from inkctl.recipe.disagg import ROLES, Disagg, Role
from inkctl.recipe.engine_registry import spec_of
from inkctl.recipe.fleet import PD_MODE
from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe

PREFIX = {"prefill": "p", "decode": "d"}


def role_name(name: str, role: str, index: int) -> str:
    return f"{name}-{PREFIX[role]}{index}"


def disagg_of(recipe: Recipe) -> Disagg:
    d = recipe.fleet.disagg if recipe.fleet is not None else None
    if d is None:
        raise InkctlError(f"{recipe.name}: the recipe has no fleet.disagg: section", exit_code=2)
    return d


def _at(source: str, path: str) -> str:
    return f"{source}: {path}" if source else path


class _Pool:
    """Free GPUs per host, handed out in order; ``used`` counts the replicas placed on a host."""

    def __init__(self, hosts: list[Host]):
        self.hosts = hosts
        self.free = {h.name: (h.gpus.split(",") if h.gpus else None) for h in hosts}
        self.used = {h.name: 0 for h in hosts}

    def fits(self, h: Host, per: int) -> bool:
        free = self.free[h.name]
        return (self.used[h.name] == 0) if free is None else len(free) >= per

    def take(self, h: Host, per: int) -> Host:
        free = self.free[h.name]
        self.used[h.name] += 1
        if free is None:
            return h
        self.free[h.name] = free[per:]
        return h.model_copy(update={"gpus": ",".join(free[:per])})


def place(recipe: Recipe, hosts: list[Host], source: str = "") -> dict[str, list[tuple[int, tuple[Host, ...]]]]:
    """role -> [(port shift index, the replica's hosts)], prefill first. Raises a located error
    when the inventory cannot hold them."""
    d = disagg_of(recipe)
    pool = _Pool(hosts)
    by_name = {h.name: h for h in hosts}
    out: dict[str, list[tuple[int, tuple[Host, ...]]]] = {}
    for role in ROLES:
        spec: Role = getattr(d, role)
        at = _at(source, f"fleet.disagg.{role}")
        for n in spec.hosts:
            if n not in by_name:
                raise InkctlError(f"{at}.hosts: {n!r} is not a host of the inventory",
                                  hint="its hosts are " + ", ".join(by_name), exit_code=2)
        mine = [by_name[n] for n in spec.hosts] if spec.hosts else hosts
        nodes, per = spec.nodes or recipe.hardware.nodes, spec.gpus_per_host or recipe.hardware.gpus_per_host
        placed: list[tuple[int, tuple[Host, ...]]] = []
        for _ in range(spec.replicas):
            group = [h for h in mine if pool.fits(h, per)][:nodes]
            if len(group) < nodes:
                raise InkctlError(
                    f"{at}.replicas: {counted(spec.replicas, role + ' replica')} of {counted(nodes, 'host')} x "
                    f"{counted(per, 'GPU')} do not fit: {counted(len(placed), 'replica')} placed, then the "
                    + ("hosts it lists" if spec.hosts else "inventory") + " ran out of free GPUs",
                    hint="add hosts (or list more GPU indices in a host's gpus), or lower the replicas", exit_code=2)
            shift = max(pool.used[h.name] for h in group)
            placed.append((shift, tuple(pool.take(h, per) for h in group)))
        out[role] = placed
    return out


def role_recipe(recipe: Recipe, role: str, index: int, shift: int, hosts: tuple[Host, ...] | None) -> Recipe:
    """Replica ``index`` of ``role``: its own name, size, flags and ports."""
    assert recipe.fleet is not None
    d = disagg_of(recipe)
    spec: Role = getattr(d, role)
    name = role_name(recipe.name, role, index)
    if len(name) > 63:
        raise InkctlError(f"name: {recipe.name!r} is too long for P/D: replica names add '-{PREFIX[role]}{index}' and "
                          "must stay within 63 characters", hint="shorten the recipe's name", exit_code=2)
    r = recipe.model_copy(deep=True, update={"name": name, "fleet": None})
    r.hardware.nodes = spec.nodes or r.hardware.nodes
    r.hardware.gpus_per_host = spec.gpus_per_host or r.hardware.gpus_per_host
    r.engine.args.tensor_parallel = spec.tensor_parallel or r.engine.args.tensor_parallel
    d_port = shift * recipe.fleet.port_stride
    bport = d.transfer.bootstrap_port + d_port
    flags, env = spec_of(r.engine.kind).disagg_role(role, d.transfer, bport, hosts[0].ssh_address if hosts else None)
    r.engine.args.extra = [*r.engine.args.extra, *flags, *spec.args]
    if env:
        r.container.env = {**r.container.env, **dict(env)}
    return shifted(r, d_port)


def bootstrap_port(recipe: Recipe, rep: Replica) -> int:
    """The bootstrap port of a prefill replica: shifted as far as its engine's port was."""
    return disagg_of(recipe).transfer.bootstrap_port + rep.recipe.engine.args.port - recipe.engine.args.port


def pd_router_argv(recipe: Recipe, replicas: list[Replica]) -> list[str]:
    """The router in its P/D mode: every prefill replica (with its bootstrap port, for SGLang's
    KV handshake) and every decode replica, instead of --worker-urls."""
    assert recipe.fleet is not None
    router = recipe.fleet.router
    base = router_argv(router, [], recipe.model.name)
    i = base.index("--worker-urls")
    flag, with_port, _ = PD_MODE[router.kind]
    pd = [flag]
    for rep in replicas:
        if rep.role == "prefill":
            pd += ["--prefill", rep.url] + ([str(bootstrap_port(recipe, rep))] if with_port else [])
    for rep in replicas:
        if rep.role == "decode":
            pd += ["--decode", rep.url]
    return base[:i] + pd + base[i + 1:]


def alone(plan: Plan) -> Plan:
    """A role's replica answers no completion by itself (a prefill one waits for the decode side's
    KV handshake, a decode one for a prefill's): its health only; the router's plan sends the
    completion through both roles."""
    stages = []
    for st in plan.stages:
        if st.name == "smoke":
            continue
        stages.append(replace(st, steps=tuple(replace(s, answer_url="", purpose=s.purpose + " (health only: "
                                                      "its completions go through the P/D router)")
                                              if isinstance(s, WaitHealth) else s for s in st.steps)))
    return replace(plan, stages=tuple(stages))


def build_disagg(recipe: Recipe, hosts: list[Host] | None = None, *, source: str = "", **plan_inputs) -> FleetPlan:
    """Every prefill and decode replica's plan and the router's. ``hosts`` None: placeholders."""
    d = disagg_of(recipe)
    placeholder = hosts is None
    if hosts is None:
        groups: dict[str, list[tuple[int, tuple[Host, ...]]]] = {}
        k = 0
        for role in ROLES:
            spec: Role = getattr(d, role)
            n = spec.nodes or recipe.hardware.nodes
            groups[role] = []
            for _ in range(spec.replicas):
                groups[role].append((0, tuple(Host(name=f"host{k + j}") for j in range(n))))
                k += n
    else:
        groups = place(recipe, list(hosts), source)
    replicas = []
    for role in ROLES:
        for i, (shift, group) in enumerate(groups[role]):
            r = role_recipe(recipe, role, i, shift, None if placeholder else group)
            plan = alone(build_plan(r, None if placeholder else list(group), **plan_inputs))
            if placeholder:
                plan = _renamed(plan, group)
            replicas.append(Replica(index=i, recipe=r, hosts=group, plan=plan, role=role))
    assert recipe.fleet is not None
    if PD_MODE[recipe.fleet.router.kind][1]:  # the router is told each prefill's bootstrap port
        replicas = [replace(rep, bootstrap_port=bootstrap_port(recipe, rep)) if rep.role == "prefill" else rep
                    for rep in replicas]
    router = router_plan(recipe, _router_host(recipe, hosts, source), replicas, placeholder=placeholder,
                         argv=pd_router_argv(recipe, replicas))
    return FleetPlan(name=recipe.name, replicas=tuple(replicas), router=router, router_spec=recipe.fleet.router,
                     url=(router.health_url or "").rsplit("/", 1)[0], hosts=tuple(hosts or ()),
                     rollout=recipe.fleet.rollout)


def retired_role_replica(fleet: FleetPlan, deployment: str) -> bool:
    """Is ``deployment`` a replica P/D fleet ``fleet`` no longer has: ``NAME-p<k>`` / ``NAME-d<k>``
    beyond its role's count (a lowered replicas), or ``NAME-r<k>`` (a plain fleet's replica,
    before the recipe split prefill from decode)?"""
    for role, letter in (*PREFIX.items(), ("", "r")):
        prefix = f"{fleet.name}-{letter}"
        if deployment.startswith(prefix) and deployment[len(prefix):].isdigit():
            keep = sum(1 for r in fleet.replicas if r.role == role) if role else 0
            return int(deployment[len(prefix):]) >= keep
    return False


def retired_words(fleet: FleetPlan) -> str:
    """What ``plan`` says is removed on every host."""
    n = {role: sum(1 for r in fleet.replicas if r.role == role) for role in ROLES}
    return (f"containers labelled {fleet.name}-p<k>, k >= {n['prefill']}, {fleet.name}-d<k>, k >= {n['decode']}, "
            f"or {fleet.name}-r<k> (a fleet before fleet.disagg)")
