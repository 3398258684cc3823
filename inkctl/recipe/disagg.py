"""Prefill/decode disaggregation: ``fleet.disagg``, two roles of the recipe's engine behind a P/D router.

A prefill replica computes the prompt's KV cache and hands it to a decode replica, which
streams the tokens; the router in front picks one of each for every request. Each role is
the recipe's engine group with its own replica count, hosts, GPUs and parallelism; the KV
transfer between them is the engine's own (vLLM: ``--kv-transfer-config`` with the
NixlConnector; SGLang: ``--disaggregation-mode``, ``--disaggregation-transfer-backend``,
``--disaggregation-bootstrap-port``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field

from inkctl.errors import Problem
from inkctl.recipe.fields import Strict, default_of, empty_list

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

ROLES = ("prefill", "decode")
# transfer backend -> does it need RDMA (the Mooncake transfer engine moves KV over RDMA only;
# NIXL picks UCX's transports, TCP included)
BACKENDS = {"nixl": False, "mooncake": True}
ENGINE_BACKENDS = {"vllm": ("nixl",), "sglang": ("nixl", "mooncake")}
# flags a role must not set itself: the plan writes them from fleet.disagg
OWNED = {"--disaggregation-mode", "--disaggregation-transfer-backend", "--disaggregation-bootstrap-port",
         "--kv-transfer-config"}
MODEL_FLAGS = ("--model", "--model-path", "--served-model-name")


class Role(Strict):
    """One side of the split: replicas of the recipe's engine group with their own size and flags."""

    replicas: int = Field(1, ge=1, le=1024, description="Replicas of this role, each a whole engine group.")
    nodes: Optional[int] = Field(None, ge=1, le=1024, description="Hosts per replica. Default: the recipe's hardware.nodes.")
    gpus_per_host: Optional[int] = Field(None, ge=1, le=64, description="GPUs per host of one replica. Default: the recipe's hardware.gpus_per_host.")
    tensor_parallel: Optional[int] = Field(None, ge=1, le=1024, description="Tensor-parallel size of this role. Default: the recipe's engine.args.tensor_parallel.")
    hosts: list[str] = Field(default_factory=empty_list, description="Inventory hosts (by name) this role's replicas take, in order. Default: the inventory's hosts in order, prefill first, decode after.")
    args: list[str] = Field(default_factory=empty_list, description="Further engine flags for this role only, after engine.args.extra, e.g. ['--max-num-batched-tokens', '16384'] for prefill.")


class Transfer(Strict):
    """How the KV cache moves from a prefill replica to a decode replica."""

    backend: Optional[Literal["nixl", "mooncake"]] = Field(None, description="KV transfer backend: 'nixl' (vLLM's NixlConnector; SGLang --disaggregation-transfer-backend nixl) or 'mooncake' (SGLang only, RDMA only). Required.")
    bootstrap_port: int = Field(8998, ge=1, le=65535, description="Port a prefill replica's KV bootstrap server listens on (SGLang --disaggregation-bootstrap-port; vLLM's NIXL side channel, VLLM_NIXL_SIDE_CHANNEL_PORT). Shifted by fleet.port_stride for replicas sharing a host.")
    ib_device: Optional[str] = Field(None, description="RDMA device for the transfer (SGLang --disaggregation-ib-device), e.g. 'mlx5_0'.")


class Disagg(Strict):
    """Prefill and decode on their own engine groups behind a P/D router (fleet.router)."""

    prefill: Role = Field(default_factory=default_of(Role), description="The prefill role.")
    decode: Role = Field(default_factory=default_of(Role), description="The decode role.")
    transfer: Transfer = Field(default_factory=default_of(Transfer), description="The KV transfer between the roles.")


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
    kind = r.engine.kind
    out: list[Problem] = []
    if r.fleet is not None and r.fleet.replicas != 1:
        out.append(_err("fleet.replicas", f"fleet.replicas {r.fleet.replicas} with fleet.disagg: each role has its own count",
                        "set fleet.disagg.prefill.replicas and fleet.disagg.decode.replicas; remove fleet.replicas"))
    t = d.transfer
    if t.backend is None:
        out.append(_err(f"{at}.transfer.backend", "no KV transfer backend: the decode replicas cannot get the prefill's KV cache",
                        "set fleet.disagg.transfer.backend: " + " or ".join(ENGINE_BACKENDS[kind])))
    elif t.backend not in ENGINE_BACKENDS[kind]:
        out.append(_err(f"{at}.transfer.backend", f"{kind} has no {t.backend} KV transfer (its P/D uses "
                        + ", ".join(ENGINE_BACKENDS[kind]) + ")", "use transfer.backend: nixl"))
    elif BACKENDS[t.backend] and not r.network.rdma:
        out.append(_err(f"{at}.transfer.backend", f"the {t.backend} transfer moves KV over RDMA only, but network.rdma is off",
                        "set network.rdma: true (RoCE/InfiniBand), or use transfer.backend: nixl"))
    if t.ib_device and kind != "sglang":
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
