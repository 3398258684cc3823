"""A gateway file + its inventory -> one plan per model's engine group and one for the router
in front of them all (a ``FleetPlan``, so up, down and status of a fleet run it). Pure.

Each group is its recipe as it is (its own name: its deployment), on the hosts the file gives
it, with the GPU subset the file gives it; a group sharing a host with groups before it gets
the engine's ports shifted by ``port_stride`` for each of them. GPUs and ports that still
collide on a host are an error located in the gateway file.

The router's plan: its container (vllm-router --enable-igw, no engine on its command line),
health, then every group registered with its model (``Register``, from this machine), then
one streamed completion per model through the one endpoint.
"""

from __future__ import annotations

from inkctl.errors import InkctlError, Problem, counted
from inkctl.runtimes.spec import LABEL_PREFIX
from inkctl.plan.deploy import build_plan
from inkctl.plan.replicas.fleet import FleetPlan, Replica, engine_ports, shifted
from inkctl.plan.replicas.router import RouterBox, serving_flags
from inkctl.plan.step import Plan, Register, Stage, WaitHealth
from inkctl.recipe.gateway import Gateway, LoadedGateway
from inkctl.recipe.hosts import Host


GATEWAY_LABEL = "gateway"  # inkctl.gateway=NAME on every container of a gateway's groups


def dropped_group(fleet: FleetPlan, deployment: str) -> bool:
    """Is ``deployment`` (labelled as one of gateway ``fleet``'s groups) one the file no longer lists?"""
    return deployment not in {g.name for g in fleet.replicas} and deployment != fleet.router.deployment


def gateway_name(name: str) -> str:
    return f"{name}-gateway"


class GatewayConflict(InkctlError):
    """A gateway file whose models do not fit together (or on the inventory): one problem,
    located in the gateway file (``validate`` reports it as such)."""

    def __init__(self, problem: Problem):
        super().__init__(f"{problem.location}: {problem.message}", hint=problem.hint, exit_code=2)
        self.problem = problem


def _bad(lg: LoadedGateway, path: tuple, message: str, hint: str | None) -> GatewayConflict:
    return GatewayConflict(lg.problem(path, message, hint))


def build_gateway(lg: LoadedGateway, inputs: list[dict] | None = None) -> FleetPlan:
    """Every group's plan and the router's. ``inputs``: each group's plan inputs (lock pins,
    hotfix files: ``plan.inputs.plan_inputs`` of its recipe), in the file's order."""
    spec = lg.spec
    inventory = {h.name: h for h in lg.hosts}
    on_host: dict[str, list[int]] = {}  # host -> the groups placed on it so far
    groups: list[Replica] = []
    names: dict[str, int] = {}
    models: dict[str, int] = {}
    for i, (m, loaded) in enumerate(zip(spec.models, lg.groups)):
        r = loaded.recipe
        if r.fleet is not None:
            raise _bad(lg, ("models", i, "recipe"), f"{m.recipe} has a fleet: section; each model of a gateway "
                       "is one engine group", "remove fleet: from that recipe (or list it twice, on other hosts)")
        for k, n in enumerate(m.hosts):
            if n not in inventory:
                raise _bad(lg, ("models", i, "hosts"), f"models[{i}].hosts[{k}]: {n!r} is not a host of the "
                           "inventory", "its hosts are " + ", ".join(inventory))
        if len(m.hosts) != r.hardware.nodes:
            raise _bad(lg, ("models", i, "hosts"), f"{m.recipe} runs on {counted(r.hardware.nodes, 'host')} "
                       f"(hardware.nodes) but models[{i}].hosts lists {len(m.hosts)}",
                       f"list {r.hardware.nodes} hosts for it")
        if m.gpus and len(m.gpus.split(",")) < r.hardware.gpus_per_host:
            raise _bad(lg, ("models", i, "gpus"), f"gpus {m.gpus!r} is fewer than {m.recipe} needs "
                       f"(hardware.gpus_per_host {r.hardware.gpus_per_host})", "list as many GPU indices as it needs")
        if r.name in names:
            raise _bad(lg, ("models", i), f"{m.recipe} and models[{names[r.name]}] have the same name {r.name!r}: their "
                       "containers would be one deployment", "give each recipe its own name:")
        if r.model.name in models:
            raise _bad(lg, ("models", i), f"models[{models[r.model.name]}] serves {r.model.name!r} already: the gateway routes by "
                       "model name", "give the recipe another model.served_name")
        names[r.name], models[r.model.name] = i, i
        hosts = tuple(inventory[n].model_copy(update={"gpus": m.gpus}) if m.gpus else inventory[n] for n in m.hosts)
        shift = max(len(on_host.get(n, [])) for n in m.hosts)
        for n in m.hosts:
            on_host.setdefault(n, []).append(i)
        rr = shifted(r.model_copy(deep=True), shift * spec.port_stride)
        try:
            plan = build_plan(rr, list(hosts), **((inputs or [{}] * len(lg.groups))[i]),
                              extra_labels=((LABEL_PREFIX + GATEWAY_LABEL, spec.name),))
        except InkctlError as e:  # the group's recipe on the hosts this file gives it: said here
            raise _bad(lg, ("models", i), f"models[{i}] ({m.recipe}): {e.message}", e.hint) from None
        groups.append(Replica(index=i, recipe=rr, hosts=hosts, plan=plan, model=r.model.name, source=loaded))
    router_host = _router_host(lg)
    _check_sharing(lg, groups, router_host)
    router = gateway_plan(spec.name, spec.gateway, router_host, groups,
                          lg.groups[0].recipe.container.runtime)
    return FleetPlan(name=spec.name, replicas=tuple(groups), router=router, router_spec=spec.gateway,
                     url=(router.health_url or "").rsplit("/", 1)[0], hosts=tuple(lg.hosts))


def _router_host(lg: LoadedGateway) -> Host:
    want = lg.spec.gateway.host
    if want is None:
        return next(h for h in lg.hosts if h.name == lg.spec.models[0].hosts[0])
    for h in lg.hosts:
        if h.name == want:
            return h
    raise _bad(lg, ("gateway", "host"), f"gateway.host: {want!r} is not a host of the inventory",
               "its hosts are " + ", ".join(h.name for h in lg.hosts))


def _check_sharing(lg: LoadedGateway, groups: list[Replica], router_host: Host) -> None:
    """No GPU and no port used twice on one host."""
    gw = lg.spec.gateway
    if gw.port == gw.prometheus_port:
        raise _bad(lg, ("gateway", "port"), f"gateway: port and prometheus_port are both {gw.port}",
                   "give the router's exporter another port")
    gpus: dict[str, list[tuple[int, set[str] | None]]] = {}
    ports: dict[str, dict[int, str]] = {router_host.name: {gw.port: "the gateway's port",
                                                           gw.prometheus_port: "the gateway's prometheus_port"}}
    for g in groups:
        for h in g.hosts:
            mine = set(h.gpus.split(",")) if h.gpus else None
            for j, theirs in gpus.get(h.name, []):
                if mine is None or theirs is None or mine & theirs:
                    what = "all its GPUs" if mine is None or theirs is None else "GPU " + ",".join(sorted(mine & theirs))
                    raise _bad(lg, ("models", g.index, "gpus"), f"models[{g.index}] and models[{j}] both use "
                               f"{what} on {h.name}", f"give each group on {h.name} its own gpus: subset")
            gpus.setdefault(h.name, []).append((g.index, mine))
            used = ports.setdefault(h.name, {})
            for port, what in engine_ports(g.recipe).items():
                if port in used:
                    raise _bad(lg, ("models", g.index), f"models[{g.index}]'s {what} {port} on {h.name} is also "
                               f"{used[port]}", "change the engine's ports in its recipe, or port_stride")
                used[port] = f"models[{g.index}]'s {what}"


def gateway_argv(gw: Gateway) -> list[str]:
    """vllm-router in multi-model mode: no engine URLs (they are registered with their model)."""
    return ["vllm-router", *serving_flags(gw.port, gw.policy_name, gw.prometheus_port, gw.health_check_interval_s,
                                          gw.breaker_failures, mode=["--enable-igw"]), *gw.args]


def gateway_plan(name: str, gw: Gateway, host: Host, groups: list[Replica], rt: str) -> Plan:
    box = RouterBox(gateway_name(name), host, rt, gw.image_ref, tuple(gateway_argv(gw)), what="gateway")
    base = box.base_url(gw.port)
    workers = tuple((g.url, g.model) for g in groups)
    return box.plan((
        Stage("launch", f"start the gateway in front of {counted(len(groups), 'model')}",
              (box.start(f"start vllm-router, multi-model ({gw.policy_name})"),)),
        Stage("health", "wait for the gateway", (WaitHealth(
            host=host.name, rank=0, purpose="wait for the gateway to answer", url=base + "/health",
            timeout_s=120, interval_s=1.0, watch=box.watch),)),
        Stage("register", "tell the gateway which engine serves which model", (Register(
            host=host.name, rank=0, purpose="register every model's engine", url=base + "/workers",
            workers=workers),)),
        Stage("answer", "one streamed completion per model through the one endpoint", tuple(WaitHealth(
            host=host.name, rank=0, purpose=f"a completion of {g.model} through the gateway", url=base + "/health",
            timeout_s=120, interval_s=1.0, watch=box.watch, answer_url=base + "/v1/chat/completions", model=g.model,
            api_key=g.recipe.api_key)
            for g in groups)),
    ))
