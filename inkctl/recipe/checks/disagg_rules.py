"""What users get wrong in ``fleet.disagg`` (the rules validate runs; the fields: recipe.disagg)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.errors import Problem
from inkctl.recipe.disagg import BACKENDS, MODEL_FLAGS, OWNED, ROLES, Disagg, Role

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe


def _err(path: str, message: str, hint: str | None = None) -> Problem:
    return Problem(message, path=path, hint=hint)


def flag_value(args: list[str], flag: str) -> str | None:
    """The value ``args`` gives ``flag`` (``--f v`` or ``--f=v``; the last one wins)."""
    out = None
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            out = args[i + 1]
        elif a.startswith(flag + "="):
            out = a.split("=", 1)[1]
    return out


def disagg_findings(r: "Recipe") -> list[Problem]:
    """What users get wrong in fleet.disagg (empty without it)."""
    d = r.fleet.disagg if r.fleet is not None else None
    if d is None:
        return []
    at = "fleet.disagg"
    from inkctl.recipe.engine_registry import spec_of

    kind = r.engine.kind
    backends = spec_of(kind).disagg_backends
    out: list[Problem] = []
    if r.fleet is not None and r.fleet.replicas != 1:
        out.append(_err("fleet.replicas", f"fleet.replicas {r.fleet.replicas} with fleet.disagg: each role has its own count",
                        "set fleet.disagg.prefill.replicas and fleet.disagg.decode.replicas; remove fleet.replicas"))
    t = d.transfer
    if not backends:
        return out + [_err(at, f"inkctl has no prefill/decode disaggregation for {spec_of(kind).name}",
                           "remove fleet.disagg (or use vllm or sglang)")]
    if t.backend is None:
        out.append(_err(f"{at}.transfer.backend", "no KV transfer backend: the decode replicas cannot get the prefill's KV cache",
                        "set fleet.disagg.transfer.backend: " + " or ".join(backends)))
    elif t.backend not in backends:
        out.append(_err(f"{at}.transfer.backend", f"{kind} has no {t.backend} KV transfer (its P/D uses "
                        + ", ".join(backends) + ")", f"use transfer.backend: {backends[0]}"))
    elif BACKENDS[t.backend] and not r.network.rdma:
        out.append(_err(f"{at}.transfer.backend", f"the {t.backend} transfer moves KV over RDMA only, but network.rdma is off",
                        "set network.rdma: true (RoCE/InfiniBand), or use transfer.backend: nixl"))
    if t.ib_device and not any("--disaggregation-ib-device" in f for f in spec_of(kind).disagg_role("prefill", t, 1, None)[0]):
        out.append(_err(f"{at}.transfer.ib_device", "ib_device is SGLang's --disaggregation-ib-device; vLLM's NIXL finds its devices through UCX",
                        "remove it (set UCX_NET_DEVICES in env: instead)"))
    out += _port_findings(r, d, at)
    for role in ROLES:
        out += _role_findings(r, getattr(d, role), f"{at}.{role}")
    return out


def _port_findings(r: "Recipe", d: Disagg, at: str) -> list[Problem]:
    port = d.transfer.bootstrap_port
    stride = r.fleet.port_stride if r.fleet is not None else 10
    router = r.fleet.router if r.fleet is not None else None
    used = {r.engine.args.port: "API port"}  # the engine's ports on its host (plan.fleet.engine_ports)
    for attr in ("master_port", "ray_port", "dist_init_port"):
        if hasattr(r.engine, attr):
            used[getattr(r.engine, attr)] = attr
    if router is not None:
        used.update({router.port: "fleet.router.port", router.prometheus_port: "fleet.router.prometheus_port"})
    n = d.prefill.replicas + d.decode.replicas  # as many as may share one host
    mine = {port + k * stride for k in range(n)}
    for p in sorted(mine):
        for k in range(n):  # the engine's ports shift by the same stride on a shared host
            other = {q + k * stride: w for q, w in used.items()}
            if p in other:
                return [_err(f"{at}.transfer.bootstrap_port", f"bootstrap port {p} is also the {other[p]}"
                             + (f" of the replica {k} places on a shared host" if k else ""),
                             "pick a bootstrap_port away from the engine's and the router's ports (and their port_stride shifts)")]
    return []


def _role_findings(r: "Recipe", role: Role, at: str) -> list[Problem]:
    out = []
    for flag in OWNED:
        if flag_value(role.args, flag) is not None or flag in role.args:
            out.append(_err(f"{at}.args", f"{flag} is written by inkctl from fleet.disagg",
                            "remove it; set fleet.disagg.transfer instead"))
    for flag in MODEL_FLAGS:
        v = flag_value(role.args, flag)
        if v is not None and v not in (r.model.repo, r.model.name):
            out.append(_err(f"{at}.args", f"{flag} {v!r}: the roles serve different models (the recipe's is {r.model.name!r}); "
                            "a decode replica can only continue a prefill of the same weights",
                            f"remove {flag} from the role's args: both roles serve model:"))
    tp = role.tensor_parallel or r.engine.args.tensor_parallel
    gpus = (role.nodes or r.hardware.nodes) * (role.gpus_per_host or r.hardware.gpus_per_host)
    if tp * r.engine.args.pipeline_parallel > gpus:
        out.append(_err(f"{at}.tensor_parallel", f"tensor_parallel {tp} x pipeline_parallel {r.engine.args.pipeline_parallel} "
                        f"needs more GPUs than one {at.rsplit('.', 1)[1]} replica has ({gpus})",
                        "lower tensor_parallel, or raise the role's nodes / gpus_per_host"))
    return out
