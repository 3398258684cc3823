"""Golden plans: the exact argv per host for every bundled recipe and example.

A change to what `up` would run shows up here as a diff. Regenerate on purpose with
INKCTL_UPDATE_GOLDEN=1 pytest tests/unit/test_plan_golden.py, then review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from inkctl.cli.show.plan_json import plan_json
from inkctl.plan.deploy import build_plan
from inkctl.plan.inputs import plan_inputs
from inkctl.recipe.reading.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
RECIPES = sorted((ROOT / "recipes").glob("*.yaml")) + sorted((ROOT / "examples").glob("*.yaml"))
RECIPES = [p for p in RECIPES if not p.name.startswith("hosts")]


def _inventory(path: Path, tmp: Path) -> Path:
    """The bundled example inventory of the recipe's size. hosts-one.yaml selects GPU 0; for a
    recipe with another gpus_per_host its copy selects that many (build_plan refuses a mismatch)."""
    import yaml

    hw = load_recipe(path).recipe.hardware
    inv = ROOT / "examples" / ("hosts.yaml" if hw.nodes == 2 else "hosts-one.yaml")
    doc = yaml.safe_load(inv.read_text())
    if all(len(h["gpus"].split(",")) == hw.gpus_per_host for h in doc["hosts"] if "gpus" in h):
        return inv
    for h in doc["hosts"]:
        if "gpus" in h:
            h["gpus"] = ",".join(str(i) for i in range(hw.gpus_per_host))
    out = tmp / inv.name
    out.write_text(yaml.safe_dump(doc))
    return out


def _cases():
    for p in RECIPES:
        yield pytest.param(p, None, id=f"{p.stem}-placeholders")
        yield pytest.param(p, "inventory", id=f"{p.stem}-inventory")


@pytest.mark.parametrize("recipe,hosts", list(_cases()))
def test_plan_matches_golden(recipe: Path, hosts: str | None, tmp_path: Path):
    inv = _inventory(recipe, tmp_path) if hosts else None
    if inv is not None and load_recipe(recipe).recipe.hardware.nodes not in (1, 2):
        pytest.skip("no example inventory of that size")
    loaded = load_recipe(recipe, hosts_file=inv)
    doc = plan_json(build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded)))
    text = json.dumps(doc, indent=2, sort_keys=True) + "\n"
    golden = GOLDEN / f"{recipe.parent.name}-{recipe.stem}-{'inventory' if hosts else 'placeholders'}.json"
    if os.environ.get("INKCTL_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden.name}: run with INKCTL_UPDATE_GOLDEN=1 and review it"
    assert text == golden.read_text(), f"plan for {recipe.name} changed; review and regenerate {golden.name}"


def test_every_recipe_has_a_golden_file():
    names = {g.name for g in GOLDEN.glob("*.json")}
    for p in RECIPES:
        assert f"{p.parent.name}-{p.stem}-placeholders.json" in names
