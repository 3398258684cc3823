"""SGLang: every rank at once; the ``--dist-init-addr`` ranks retry until the head answers."""

from __future__ import annotations

from inkctl.plan import engines
from inkctl.plan.stages.launch import Launch, all_at_once
from inkctl.plan.step import Stage


def stages(b: Launch) -> list[Stage]:
    return all_at_once(b, lambda c: engines.sglang_launch(b.recipe, c, b.nodes), "workers")
