"""vLLM, native multi-node: every rank at once; ranks above 0 run ``--headless``."""

from __future__ import annotations

from inkctl.plan import engines
from inkctl.plan.stages.launch import Launch, all_at_once
from inkctl.plan.step import Stage


def stages(b: Launch) -> list[Stage]:
    return all_at_once(b, lambda c: engines.vllm_serve(b.recipe, c, b.nodes), "headless workers")
