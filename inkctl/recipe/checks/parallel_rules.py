"""The parallel layout against the hardware: the checks every engine shares, and its own
(``EngineSpec.parallel_findings``, ``expert_findings``: how the engine lays its ranks out)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.errors import Problem
from inkctl.recipe.engine_registry import spec_of

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe


def parallel_findings(r: Recipe) -> list[Problem]:
    engine = spec_of(r.engine.kind)
    dp, ep = r.engine.args.data_parallel, r.engine.args.expert
    out = engine.parallel_findings(r)
    if dp.attention and dp.size == 1:
        out.append(Problem("DP attention with data_parallel 1 does nothing", path="engine.args.data_parallel.attention",
                           hint="set data_parallel.size", severity="warning"))
    if ep is None or not ep.enabled:
        return out
    out += engine.expert_findings(r)
    if ep.deepep and r.multinode and not r.network.rdma:
        out.append(Problem("DeepEP between hosts runs over RDMA (NVSHMEM), but network.rdma is off",
                           path="engine.args.expert.all2all_backend",
                           hint="set network.rdma: true (RoCE/InfiniBand), or keep DeepEP on one host"))
    return out
