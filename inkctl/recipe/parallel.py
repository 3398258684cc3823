"""Data and expert parallelism: the typed form of vLLM's --data-parallel-* / --enable-expert-parallel
/ --all2all-backend / EPLB and SGLang's --dp-size / --enable-dp-attention / --ep-size /
--moe-a2a-backend / --deepep-mode, and the GPU arithmetic that ties them to the hardware.

How the engines lay ranks out (their docs' multi-node data-parallel and expert-parallel pages):
- vLLM: every data-parallel rank is a tensor x pipeline group inside one host, so
  tensor_parallel x pipeline_parallel x data_parallel = nodes x gpus_per_host, and each host runs
  data_parallel / nodes ranks (--data-parallel-size-local). Expert parallelism spreads the experts
  over all tensor x data ranks (its size is not a flag).
- SGLang without DP attention: data_parallel copies of a tensor x pipeline group (the same
  product). With --enable-dp-attention the data-parallel ranks live inside the tensor group:
  tensor_parallel x pipeline_parallel = nodes x gpus_per_host and data_parallel divides
  tensor_parallel. --ep-size divides tensor_parallel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field

from inkctl.errors import Problem
from inkctl.recipe.fields import Strict

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

VLLM_ALL2ALL = ("naive", "allgather_reducescatter", "pplx", "deepep_high_throughput", "deepep_low_latency",
                "flashinfer_all2allv")
SGLANG_A2A = ("none", "deepep", "mooncake", "mori", "ascend_fuseep", "flashinfer")


class ExpertParallel(Strict):
    """Expert parallelism for MoE models: experts spread over ranks instead of sliced by tensor parallelism."""

    enabled: bool = Field(True, description="vLLM --enable-expert-parallel; SGLang --ep-size (size below, default tensor_parallel).")
    size: Optional[int] = Field(None, ge=1, le=4096, description="SGLang --ep-size: ranks the experts are spread over; must divide tensor_parallel. Default: tensor_parallel. vLLM derives it (tensor_parallel x data_parallel) and takes no size.")
    all2all_backend: Optional[str] = Field(None, description="Token dispatch between expert ranks: vLLM --all2all-backend (e.g. 'deepep_high_throughput', 'deepep_low_latency', 'pplx', 'allgather_reducescatter'); SGLang --moe-a2a-backend (e.g. 'deepep').")
    deepep_mode: Optional[Literal["auto", "normal", "low_latency"]] = Field(None, description="SGLang --deepep-mode (with all2all_backend: deepep).")
    eplb: bool = Field(False, description="Expert-parallel load balancing: vLLM --enable-eplb, SGLang --enable-eplb.")
    deepep_max_dispatch_tokens_per_rank: Optional[int] = Field(None, ge=1, description="SGLang's SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK (its docs: default 128), set in the container's environment.")

    @property
    def deepep(self) -> bool:
        return self.all2all_backend is not None and self.all2all_backend.startswith("deepep")


class DataParallel(Strict):
    """Data parallelism: several copies of the model (vLLM) or attention ranks (SGLang DP attention) behind one server."""

    size: int = Field(1, ge=1, le=4096, description="vLLM --data-parallel-size; SGLang --dp-size.")
    attention: bool = Field(False, description="SGLang --enable-dp-attention: data-parallel attention ranks inside the tensor-parallel group (DeepSeek, Qwen3 MoE). Not for vLLM.")
    rpc_port: int = Field(13345, ge=1, le=65535, description="vLLM --data-parallel-rpc-port on the head, for multi-node data parallelism.")


def world_gpus(r: "Recipe") -> int:
    """GPUs the engine arguments ask for: tensor x pipeline x data, but for SGLang's DP attention."""
    a = r.engine.args
    dp = a.data_parallel.size
    if r.engine.kind == "sglang" and a.data_parallel.attention:
        dp = 1
    return a.tensor_parallel * a.pipeline_parallel * dp


def dp_local(r: "Recipe") -> int:
    """vLLM data-parallel ranks per host (--data-parallel-size-local)."""
    return max(1, r.engine.args.data_parallel.size // r.hardware.nodes)


def _err(path: str, message: str, hint: str | None = None) -> Problem:
    return Problem(message, path=path, hint=hint)


def parallel_findings(r: "Recipe") -> list[Problem]:
    a, hw, kind = r.engine.args, r.hardware, r.engine.kind
    dp, ep = a.data_parallel, a.expert
    have = hw.nodes * hw.gpus_per_host
    out: list[Problem] = []
    tp_pp = f"tensor_parallel {a.tensor_parallel} x pipeline_parallel {a.pipeline_parallel}"
    if kind == "sglang" and dp.attention:
        if a.tensor_parallel * a.pipeline_parallel != have:
            out.append(_err("engine.args.tensor_parallel",
                            f"{tp_pp} = {a.tensor_parallel * a.pipeline_parallel} GPUs, but the hosts provide "
                            f"{hw.nodes} x {hw.gpus_per_host} = {have} (with DP attention the data-parallel ranks "
                            "live inside the tensor-parallel group)",
                            "make tensor_parallel x pipeline_parallel equal hardware.nodes x hardware.gpus_per_host"))
        if a.tensor_parallel % dp.size:
            out.append(_err("engine.args.data_parallel.size", f"data_parallel {dp.size} does not divide "
                            f"tensor_parallel {a.tensor_parallel} (DP attention splits the tensor group)",
                            f"use a divisor of {a.tensor_parallel}, e.g. {a.tensor_parallel}"))
    elif world_gpus(r) != have:
        out.append(_err("engine.args.tensor_parallel",
                        f"{tp_pp}{f' x data_parallel {dp.size}' if dp.size > 1 else ''} = {world_gpus(r)} GPUs, but the hosts provide "
                        f"{hw.nodes} x {hw.gpus_per_host} = {have}",
                        "make tensor_parallel x pipeline_parallel" + (" x data_parallel" if dp.size > 1 else "")
                        + " equal hardware.nodes x hardware.gpus_per_host"))
    elif kind == "vllm" and dp.size > 1 and hw.nodes > 1 and dp.size % hw.nodes:
        out.append(_err("engine.args.data_parallel.size", f"data_parallel {dp.size} does not split evenly over "
                        f"{hw.nodes} hosts (vLLM runs data_parallel / nodes ranks on each)",
                        f"use a multiple of {hw.nodes}"))
    if dp.attention and kind == "vllm":
        out.append(_err("engine.args.data_parallel.attention", "DP attention is SGLang's (--enable-dp-attention)",
                        "remove it: vLLM's data parallelism needs no switch"))
    if dp.attention and dp.size == 1:
        out.append(Problem("DP attention with data_parallel 1 does nothing", path="engine.args.data_parallel.attention",
                           hint="set data_parallel.size", severity="warning"))
    if ep is None or not ep.enabled:
        return out
    if kind == "vllm":
        if ep.size is not None and ep.size != a.tensor_parallel * dp.size:
            out.append(_err("engine.args.expert.size", f"vLLM spreads experts over tensor_parallel x data_parallel = "
                            f"{a.tensor_parallel * dp.size} ranks; it takes no size ({ep.size} given)", "remove size"))
        if ep.all2all_backend and ep.all2all_backend not in VLLM_ALL2ALL:
            out.append(_err("engine.args.expert.all2all_backend", f"vLLM has no all2all backend {ep.all2all_backend!r}",
                            f"known: {', '.join(VLLM_ALL2ALL)}"))
        if ep.deepep_mode:
            out.append(_err("engine.args.expert.deepep_mode", "deepep_mode is SGLang's (--deepep-mode)",
                            "vLLM picks the DeepEP kernels by all2all_backend: deepep_high_throughput or deepep_low_latency"))
        if ep.deepep_max_dispatch_tokens_per_rank:
            out.append(_err("engine.args.expert.deepep_max_dispatch_tokens_per_rank",
                            "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK is SGLang's", "remove it"))
    else:
        size = ep.size or a.tensor_parallel
        if a.tensor_parallel % size:
            out.append(_err("engine.args.expert.size", f"expert size {size} does not divide tensor_parallel "
                            f"{a.tensor_parallel} (SGLang's expert ranks live inside the tensor group)",
                            f"use a divisor of {a.tensor_parallel}"))
        if ep.all2all_backend and ep.all2all_backend not in SGLANG_A2A:
            out.append(_err("engine.args.expert.all2all_backend", f"SGLang has no --moe-a2a-backend {ep.all2all_backend!r}",
                            f"known: {', '.join(SGLANG_A2A)}"))
        if ep.deepep_mode and ep.all2all_backend != "deepep":
            out.append(_err("engine.args.expert.deepep_mode", "deepep_mode needs all2all_backend: deepep"))
    if ep.deepep and r.multinode and not r.network.rdma:
        out.append(_err("engine.args.expert.all2all_backend", "DeepEP between hosts runs over RDMA (NVSHMEM), "
                        "but network.rdma is off", "set network.rdma: true (RoCE/InfiniBand), or keep DeepEP on one host"))
    return out


def parallel_env(r: "Recipe") -> list[tuple[str, str]]:
    ep = r.engine.args.expert
    if r.engine.kind == "sglang" and ep is not None and ep.enabled and ep.deepep_max_dispatch_tokens_per_rank:
        return [("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", str(ep.deepep_max_dispatch_tokens_per_rank))]
    return []


def vllm_args(r: "Recipe", rank: int, head_address: str) -> list[str]:
    """vLLM's data- and expert-parallel flags for one host (rank = the host's index)."""
    a, hw = r.engine.args, r.hardware
    dp, ep, argv = a.data_parallel, a.expert, []
    if dp.size > 1:
        argv += ["--data-parallel-size", str(dp.size)]
        if hw.nodes > 1:
            local = dp_local(r)
            argv += ["--data-parallel-size-local", str(local), "--data-parallel-address", head_address,
                     "--data-parallel-rpc-port", str(dp.rpc_port)]
            if rank > 0:
                argv += ["--data-parallel-start-rank", str(rank * local), "--headless"]
    if ep is not None and ep.enabled:
        argv.append("--enable-expert-parallel")
        if ep.all2all_backend:
            argv += ["--all2all-backend", ep.all2all_backend]
        if ep.eplb:
            argv.append("--enable-eplb")
    return argv


def sglang_args(r: "Recipe") -> list[str]:
    a = r.engine.args
    dp, ep, argv = a.data_parallel, a.expert, []
    if dp.size > 1:
        argv += ["--dp-size", str(dp.size)]
    if dp.attention:
        argv.append("--enable-dp-attention")
    if ep is not None and ep.enabled:
        argv += ["--ep-size", str(ep.size or a.tensor_parallel)]
        if ep.all2all_backend:
            argv += ["--moe-a2a-backend", ep.all2all_backend]
        if ep.deepep_mode:
            argv += ["--deepep-mode", ep.deepep_mode]
        if ep.eplb:
            argv.append("--enable-eplb")
    return argv
