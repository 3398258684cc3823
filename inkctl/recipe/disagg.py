"""Prefill/decode disaggregation: ``fleet.disagg``, two roles of the recipe's engine behind a P/D router.

A prefill replica computes the prompt's KV cache and hands it to a decode replica, which
streams the tokens; the router in front picks one of each for every request. Each role is
the recipe's engine group with its own replica count, hosts, GPUs and parallelism; the KV
transfer between them is the engine's own (vLLM: ``--kv-transfer-config`` with the
NixlConnector; SGLang: ``--disaggregation-mode``, ``--disaggregation-transfer-backend``,
``--disaggregation-bootstrap-port``).
"""

from typing import Literal, Optional

from pydantic import Field

from inkctl.recipe.fields import Strict, default_of, empty_list

ROLES = ("prefill", "decode")
# transfer backend -> does it need RDMA (the Mooncake transfer engine moves KV over RDMA only;
# NIXL picks UCX's transports, TCP included)
BACKENDS = {"nixl": False, "mooncake": True}
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
