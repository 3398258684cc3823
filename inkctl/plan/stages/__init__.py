"""How an engine starts its ranks: the engine's own ``stages(b)`` (its spec, ``inkctl/engines/<kind>.py``).

``launch_stages(b)`` asks the registry for the recipe's engine and returns its stages;
``launch.py`` has what the engines share (``Launch``, ``all_at_once``); ``plan/deploy.py``
adds what every engine shares: health, smoke, the record, the page cache and the teardown.
"""

from __future__ import annotations

from inkctl.plan.stages.launch import Launch
from inkctl.plan.step import Stage
from inkctl.recipe.engine_registry import spec_of

__all__ = ["Launch", "launch_stages"]


def launch_stages(b: Launch) -> list[Stage]:
    return spec_of(b.recipe.engine.kind).stages(b)
