"""How each engine starts its ranks: one module per engine (and launch mode), named after it.

``launch_stages(b)`` imports the module for the recipe's engine (``engine.kind``; vLLM over Ray
is ``vllm_ray``) and returns its ``stages(b)``. Adding an engine is adding a module here (with
its command line in ``plan/engines.py`` and its member of the union in ``recipe/engine.py``);
``plan/deploy.py`` adds what every engine shares: health, smoke, the record, the page cache
and the teardown.
"""

from __future__ import annotations

import importlib

from inkctl.plan.stages.launch import Launch
from inkctl.plan.step import Stage

__all__ = ["Launch", "launch_stages", "module_name"]


def module_name(b: Launch) -> str:
    e = b.recipe.engine
    if getattr(e, "multinode", None) == "ray" and b.nodes > 1:
        return f"{e.kind}_ray"
    return e.kind


def launch_stages(b: Launch) -> list[Stage]:
    return importlib.import_module(f"{__name__}.{module_name(b)}").stages(b)
