"""What the engine modules share: small argv and rule helpers (no engine's name in here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.errors import Problem

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

# cache location variables of the libraries under the engines (Triton, Inductor, FlashInfer, DeepGEMM),
# relative to the compile cache directory (plan/compilecache.py)
COMPILE_CACHE_COMMON = (("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
                        ("FLASHINFER_WORKSPACE_BASE", "flashinfer"), ("DG_JIT_CACHE_DIR", "deep_gemm"))


def opt(argv: list[str], flag: str, value: object) -> None:
    if value is not None:
        argv += [flag, str(value)]


def problem(path: str, message: str, hint: str | None = None) -> Problem:
    return Problem(message, path=path, hint=hint)


def expert_on(r: Recipe) -> bool:
    ep = r.engine.args.expert
    return ep is not None and ep.enabled


def port_clash(r: Recipe, *rendezvous: int) -> list[Problem]:
    """The API port may not be one of the head's rendezvous ports (multi-node)."""
    port = r.engine.args.port
    return [problem("engine.args.port", f"port {port} is also the rendezvous port")] if r.multinode and port in rendezvous else []


def gpu_count_finding(r: Recipe, world: int) -> Problem | None:
    """tensor x pipeline (x data) against the GPUs the hosts provide."""
    a, hw = r.engine.args, r.hardware
    dp, have = a.data_parallel, hw.nodes * hw.gpus_per_host
    if world == have:
        return None
    tp_pp = f"tensor_parallel {a.tensor_parallel} x pipeline_parallel {a.pipeline_parallel}"
    return problem("engine.args.tensor_parallel",
                   f"{tp_pp}{f' x data_parallel {dp.size}' if dp.size > 1 else ''} = {world} GPUs, but the hosts provide "
                   f"{hw.nodes} x {hw.gpus_per_host} = {have}",
                   "make tensor_parallel x pipeline_parallel" + (" x data_parallel" if dp.size > 1 else "")
                   + " equal hardware.nodes x hardware.gpus_per_host")
