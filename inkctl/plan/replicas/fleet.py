"""recipe (with ``fleet:``) + hosts -> one plan per replica and one for the router. Pure.

A replica is the recipe's whole engine group under its own deployment name (``NAME-r0``,
``NAME-r1``...), so its containers, labels, state directory and deploy lock are its own and
every command that works on one deployment (up, down, status, watch, logs) works on a replica
unchanged. Replicas take the inventory's hosts in order, ``hardware.nodes`` each; a host whose
``gpus`` lists more indices than ``gpus_per_host`` is shared: consecutive subsets, one per
replica, with the engine's ports shifted by ``fleet.port_stride`` for every replica before it
on that host.

The router is a plan of its own (deployment ``NAME-router``): one container on one host, then
health and one streamed completion through it, so ``up`` runs it with the same runner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inkctl.errors import InkctlError, counted
from inkctl.plan.deploy import api_port, build_plan, deployment_dir
from inkctl.plan.replicas.router import RouterBox, serving_flags
from inkctl.plan.step import Plan, Run, Stage, WaitHealth
from inkctl.recipe.fleet import Fleet, Router
from inkctl.recipe.hosts import Host
from inkctl.recipe.reading.loaded import Loaded
from inkctl.recipe.model import Recipe
from inkctl.recipe.rollout import Rollout


@dataclass(frozen=True)
class Replica:
    """One engine group of a fleet: a replica, or one model of a gateway (``model`` set,
    ``source`` its recipe as loaded from its own file)."""

    index: int
    recipe: Recipe  # the engine group: its own name and ports, fleet removed
    hosts: tuple[Host, ...]  # with ``gpus`` set to the replica's subset on a shared host
    plan: Plan
    model: str = ""
    source: Loaded | None = None
    role: str = ""  # P/D (fleet.disagg): 'prefill' or 'decode'; index counts within the role
    bootstrap_port: int | None = None  # P/D, a prefill replica behind sglang-router: its KV bootstrap port

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def worker(self) -> dict:
        """What a P/D router is told besides its URL when it is put back (sglang-router's ``POST
        /workers``): its role, and a prefill replica's bootstrap port. Empty for a plain replica."""
        if not self.role:
            return {}
        return {"worker_type": self.role, **({"bootstrap_port": self.bootstrap_port} if self.bootstrap_port else {})}

    @property
    def label(self) -> str:
        if self.role:
            return f"{self.role} replica {self.index}"
        return f"model {self.model}" if self.model else f"replica {self.index}"

    @property
    def url(self) -> str:
        return self.plan.health_url.rsplit("/", 1)[0] if self.plan.health_url else ""

    @property
    def gpus(self) -> str:
        """Its GPUs in words: 'h1:0,1 h2:0,1', or 'h1:all'."""
        return " ".join(f"{h.name}:{h.gpus or 'all'}" for h in self.hosts)


@dataclass(frozen=True)
class FleetPlan:
    name: str
    replicas: tuple[Replica, ...]
    router: Plan
    router_spec: Router
    url: str  # the router's OpenAI-compatible base URL
    hosts: tuple[Host, ...] = ()  # every inventory host (replicas of a larger fleet may be on any)
    rollout: Rollout = field(default_factory=Rollout)  # how up replaces replicas that run another version
    surge: Replica | None = None  # fleet.rollout.surge: one more replica on the inventory's spare room (plan.rollout)

    @property
    def gateway(self) -> bool:
        """Several models behind one endpoint (a gateway file), not replicas of one."""
        return any(r.model for r in self.replicas)

    @property
    def disagg(self) -> bool:
        """Prefill and decode replicas behind a P/D router (fleet.disagg)."""
        return any(r.role for r in self.replicas)

    @property
    def plans(self) -> tuple[Plan, ...]:
        return tuple(r.plan for r in self.replicas) + (self.router,)


def fleet_of(recipe: Recipe) -> Fleet:
    """The recipe's fleet section (callers plan fleets only)."""
    if recipe.fleet is None:
        raise InkctlError(f"{recipe.name}: the recipe has no fleet: section", hint="add fleet: {replicas: N}", exit_code=2)
    return recipe.fleet


def replica_name(name: str, index: int) -> str:
    return f"{name}-r{index}"


def router_name(name: str) -> str:
    return f"{name}-router"


def where(recipe: Recipe, source: str = "") -> str:
    return f"{source}: fleet.replicas" if source else "fleet.replicas"


def split_hosts(recipe: Recipe, hosts: list[Host], source: str = "") -> list[tuple[int, tuple[Host, ...]]]:
    """[(port shift index, the replica's hosts)] for every replica, in order. Raises a located
    error when the inventory cannot hold them, or holds more than they use."""
    fleet = fleet_of(recipe)
    nodes, per = recipe.hardware.nodes, recipe.hardware.gpus_per_host
    want = fleet.replicas
    at = where(recipe, source)
    if len(hosts) % nodes:
        raise InkctlError(
            f"{at}: each replica is {counted(nodes, 'host')} (hardware.nodes) but the inventory lists "
            f"{counted(len(hosts), 'host')}, not a multiple of {nodes}",
            hint=f"list {nodes} hosts per replica, in order", exit_code=2)
    out: list[tuple[int, tuple[Host, ...]]] = []
    for g in range(0, len(hosts), nodes):
        group = hosts[g:g + nodes]
        chunks = []
        for h in group:
            idx = h.gpus.split(",") if h.gpus else None
            if idx is not None and len(idx) < per:
                raise InkctlError(f"{at}: host {h.name}: gpus {h.gpus!r} has {counted(len(idx), 'GPU')}, "
                                  f"fewer than one replica needs (hardware.gpus_per_host {per})",
                                  hint=f"give {h.name} at least {per} GPU indices, or change gpus_per_host", exit_code=2)
            chunks.append([",".join(idx[i:i + per]) for i in range(0, len(idx) - per + 1, per)] if idx else [None])
        for j in range(min(len(c) for c in chunks)):
            if len(out) == want:
                break
            out.append((j, tuple(h.model_copy(update={"gpus": c[j]}) if c[j] is not None else h
                                 for h, c in zip(group, chunks))))
        if len(out) == want:  # hosts after these are spare: replicas of a larger fleet there are removed
            break
    if len(out) < want:
        slots = len(out)
        raise InkctlError(
            f"{at}: {counted(want, 'replica')} of {counted(nodes, 'host')} x {counted(per, 'GPU')} need more than "
            f"the inventory has: its {counted(len(hosts), 'host')} hold {counted(slots, 'replica')}",
            hint=f"add hosts (or list more GPU indices in a host's gpus), or set fleet.replicas to {max(1, slots)}",
            exit_code=2)
    return out


def replica_recipe(recipe: Recipe, index: int, shift: int) -> Recipe:
    """The engine group of replica ``index``: its own name, its ports shifted by ``shift`` steps."""
    fleet = fleet_of(recipe)
    name = replica_name(recipe.name, index)
    if len(name) > 63:
        raise InkctlError(f"name: {recipe.name!r} is too long for a fleet: replica names add '-r{index}' and "
                          "must stay within 63 characters", hint="shorten the recipe's name", exit_code=2)
    return shifted(recipe.model_copy(deep=True, update={"name": name, "fleet": None}), shift * fleet.port_stride)


PORT_ATTRS = ("master_port", "ray_port", "dist_init_port")


def shifted(r: Recipe, d: int) -> Recipe:
    """``r`` (a copy of its own) with the engine's ports moved up by ``d``."""
    if d:
        r.engine.args.port += d
        for attr in PORT_ATTRS:
            if hasattr(r.engine, attr):
                setattr(r.engine, attr, getattr(r.engine, attr) + d)
    return r


def engine_ports(r: Recipe) -> dict[int, str]:
    """port -> what it is, for every port the engine group binds on its hosts."""
    used = {api_port(r): "API port"}
    for attr in PORT_ATTRS:
        if hasattr(r.engine, attr):
            used[getattr(r.engine, attr)] = attr
    return used


def build_fleet(recipe: Recipe, hosts: list[Host] | None = None, *, source: str = "", **plan_inputs) -> FleetPlan:
    """Every replica's plan and the router's. ``hosts`` None: placeholders, one set per replica."""
    fleet = fleet_of(recipe)
    placeholder = hosts is None
    if hosts is None:
        n = recipe.hardware.nodes
        groups = [(0, tuple(Host(name=f"host{i * n + k}") for k in range(n))) for i in range(fleet.replicas)]
    else:
        groups = split_hosts(recipe, list(hosts), source)
    replicas = []
    for i, (shift, group) in enumerate(groups):
        r = replica_recipe(recipe, i, shift)
        plan = build_plan(r, None if placeholder else list(group), **plan_inputs)
        if placeholder:  # name the placeholders per replica, so plans do not show host0 five times
            plan = _renamed(plan, group)
        replicas.append(Replica(index=i, recipe=r, hosts=group, plan=plan))
    router_host = _router_host(recipe, hosts, source)
    router = router_plan(recipe, router_host, replicas, placeholder=placeholder)
    surge = None
    if fleet.rollout.surge and hosts is not None:
        surge = surge_replica(recipe, list(hosts), source, plan_inputs)
    return FleetPlan(name=recipe.name, replicas=tuple(replicas), router=router, router_spec=fleet.router,
                     url=(router.health_url or "").rsplit("/", 1)[0], hosts=tuple(hosts or ()), rollout=fleet.rollout,
                     surge=surge)


def surge_replica(recipe: Recipe, hosts: list[Host], source: str, plan_inputs: dict) -> Replica | None:
    """The extra replica a surge starts first (``fleet.rollout.surge``): the slot after the last
    replica's (``NAME-r<N>``), or None when the inventory has no room for it."""
    fleet = fleet_of(recipe)
    n = fleet.replicas
    bigger = recipe.model_copy(deep=True, update={"fleet": fleet.model_copy(update={"replicas": n + 1})})
    try:
        shift, group = split_hosts(bigger, hosts, source)[n]
        r = replica_recipe(bigger, n, shift)
        return Replica(index=n, recipe=r, hosts=group, plan=build_plan(r, list(group), **plan_inputs))
    except InkctlError:
        return None


def spare_hosts(fleet: FleetPlan) -> list[str]:
    """Inventory hosts no replica uses (replicas of a larger fleet found there are removed)."""
    used = {h.name for r in fleet.replicas for h in r.hosts} | {fleet.router.hosts[0].name}
    return [h.name for h in fleet.hosts if h.name not in used]


def retired_replica(name: str, replicas: int, deployment: str) -> bool:
    """Is ``deployment`` a replica of fleet ``name`` beyond its ``replicas`` (a lowered count)?"""
    prefix = f"{name}-r"
    if not deployment.startswith(prefix) or not deployment[len(prefix):].isdigit():
        return False
    return int(deployment[len(prefix):]) >= replicas


def retire_steps(host: Host, rt: str, deployment: str, containers: list[str] | tuple[str, ...]) -> tuple[Run, ...]:
    """Remove a replica the recipe no longer has from one host: the one removal (``removal``)."""
    from inkctl.plan.removal import removal

    return removal(host.name, rt, list(containers), deployment_dir(host, deployment))


def _renamed(plan: Plan, group: tuple[Host, ...]) -> Plan:
    from dataclasses import replace

    text_map = {f"host{k}": h.name for k, h in enumerate(group)}
    if all(a == b for a, b in text_map.items()):
        return plan

    import re

    def fix(s: str) -> str:  # one pass: host0 -> host2 and host2 -> host4 do not chain
        return re.sub(r"<(host[0-9]+)\.", lambda m: f"<{text_map.get(m.group(1), m.group(1))}.", s)

    def step(s):
        kw = {"host": text_map.get(s.host, s.host)}
        if hasattr(s, "argv"):
            kw["argv"] = tuple(fix(a) for a in s.argv)
        if isinstance(s, WaitHealth):
            kw.update(url=fix(s.url), answer_url=fix(s.answer_url),
                      watch=tuple((text_map.get(h, h), c, r) for h, c, r in s.watch))
        if isinstance(s, Run) and s.files:
            kw["files"] = tuple(replace(f, host=text_map.get(f.host, f.host)) for f in s.files)
        return replace(s, **kw)

    return replace(
        plan,
        hosts=tuple(replace(h, name=text_map.get(h.name, h.name), address=fix(h.address)) for h in plan.hosts),
        stages=tuple(replace(st, steps=tuple(step(s) for s in st.steps)) for st in plan.stages),
        containers=tuple(replace(c, host=text_map.get(c.host, c.host)) for c in plan.containers),
        teardown=tuple(step(s) for s in plan.teardown))


def _router_host(recipe: Recipe, hosts: list[Host] | None, source: str) -> Host:
    want = fleet_of(recipe).router.host
    if hosts is None:
        return Host(name=want or "host0")
    if want is None:
        return hosts[0]
    for h in hosts:
        if h.name == want:
            return h
    at = f"{source}: fleet.router.host" if source else "fleet.router.host"
    raise InkctlError(f"{at}: {want!r} is not a host of the inventory",
                      hint="its hosts are " + ", ".join(h.name for h in hosts), exit_code=2)


def router_argv(router: Router, urls: list[str], model: str) -> list[str]:
    """The router's command line (inside its image): the replicas' URLs, the policy, the ports."""
    program = ["python3", "-m", "sglang_router.launch_router"] if router.kind == "sglang" else ["vllm-router"]
    return program + serving_flags(router.port, router.policy_name, router.prometheus_port,
                                   router.health_check_interval_s, router.breaker_failures, urls=urls) + list(router.args)


def router_plan(recipe: Recipe, host: Host, replicas: list[Replica], *, placeholder: bool = False,
                argv: list[str] | None = None) -> Plan:
    """``argv``: the router's command line when it is not the replicas' (P/D: plan.disagg)."""
    r = fleet_of(recipe).router
    _check_ports(recipe, host, replicas, placeholder)
    box = RouterBox(router_name(recipe.name), host, recipe.container.runtime, r.image_ref,
                    tuple(argv or router_argv(r, [rep.url for rep in replicas], recipe.model.name)),
                    placeholder=placeholder)
    base = box.base_url(r.port)
    return box.plan((
        Stage("launch", f"start the {r.kind} router in front of {counted(len(replicas), 'replica')}",
              (box.start(f"start the {r.kind} router ({r.policy_name})"),)),
        Stage("health", "wait for the router, then one streamed completion through it", (WaitHealth(
            host=host.name, rank=0, purpose="wait for the router to serve", url=base + "/health",
            timeout_s=120, interval_s=1.0, watch=box.watch,
            answer_url=base + "/v1/chat/completions", model=recipe.model.name, api_key=recipe.api_key),)),
    ))


def _check_ports(recipe: Recipe, host: Host, replicas: list[Replica], placeholder: bool) -> None:
    r = fleet_of(recipe).router
    if r.port == r.prometheus_port:
        raise InkctlError(f"fleet.router: port and prometheus_port are both {r.port}",
                          hint="give the router's exporter another port", exit_code=2)
    if placeholder:
        return
    for rep in replicas:
        if any(h.name == host.name for h in rep.hosts):
            used = engine_ports(rep.recipe)
            for port in (r.port, r.prometheus_port):
                if port in used:
                    raise InkctlError(
                        f"fleet.router: port {port} on {host.name} is also replica {rep.index}'s {used[port]}",
                        hint="set fleet.router.port / prometheus_port to a free port", exit_code=2)
