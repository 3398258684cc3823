"""An engine's launch is its spec's ``stages`` (inkctl/engines/<kind>.py), found by the engine's kind."""

from __future__ import annotations

from pathlib import Path

from inkctl.plan.deploy import build_plan
from inkctl.recipe.engine_registry import kinds, spec_of
from inkctl.recipe.reading.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]


def test_every_engine_kind_has_its_module():
    assert {"sglang", "vllm"} <= set(kinds())
    for kind in kinds():
        assert callable(spec_of(kind).stages) and spec_of(kind).config.__module__ == f"inkctl.engines.{kind}"


def test_the_module_is_chosen_by_kind_and_launch_mode():
    seen = {}
    for f in sorted((ROOT / "examples").glob("[!h]*.yaml")):
        loaded = load_recipe(f)
        plan = build_plan(loaded.recipe)
        seen[f.stem] = [s.name for s in plan.stages if s.name != "page-cache"]
    assert seen["vllm-ray-2node"][:5] == ["ray-head", "ray-head-ready", "ray-workers", "ray-cluster-ready", "serve"]
    assert seen["vllm-native-2node"][0] == "launch" and seen["sglang-2node-podman"][0] == "launch"
    assert all(names[-2:] in (["health", "smoke"],) or names[-1] == "health" for names in seen.values())
