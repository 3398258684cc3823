"""An engine's launch is a module of its own in plan/stages/, found by the engine's kind."""

from __future__ import annotations

import importlib
import typing
from pathlib import Path

from inkctl.plan.deploy import build_plan
from inkctl.plan.stages import module_name
from inkctl.recipe.engine import Engine
from inkctl.recipe.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]


def test_every_engine_kind_has_its_module():
    union = typing.get_args(typing.get_args(Engine)[0])
    kinds = [typing.get_args(m.model_fields["kind"].annotation)[0] for m in union]
    assert sorted(kinds) == ["sglang", "vllm"]
    for kind in kinds + ["vllm_ray"]:
        assert callable(importlib.import_module(f"inkctl.plan.stages.{kind}").stages)


def test_the_module_is_chosen_by_kind_and_launch_mode():
    seen = {}
    for f in sorted((ROOT / "examples").glob("[!h]*.yaml")):
        loaded = load_recipe(f)
        plan = build_plan(loaded.recipe)
        seen[f.stem] = [s.name for s in plan.stages if s.name != "page-cache"]
    assert seen["vllm-ray-2node"][:5] == ["ray-head", "ray-head-ready", "ray-workers", "ray-cluster-ready", "serve"]
    assert seen["vllm-native-2node"][0] == "launch" and seen["sglang-2node-podman"][0] == "launch"
    assert all(names[-2:] in (["health", "smoke"],) or names[-1] == "health" for names in seen.values())


def test_module_name():
    class B:
        def __init__(self, kind, multinode, nodes):
            self.recipe = type("R", (), {"engine": type("E", (), {"kind": kind, "multinode": multinode})()})()
            self.nodes = nodes

    assert module_name(B("vllm", "ray", 2)) == "vllm_ray"
    assert module_name(B("vllm", "ray", 1)) == "vllm"
    assert module_name(B("sglang", None, 2)) == "sglang"
