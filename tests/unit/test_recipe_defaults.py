"""A section a recipe leaves out gets its defaults from ``fields.default_of``: the section made
without its validator (``model_construct``), so that validating a recipe builds one validator,
the recipe's, and not one more per section left out (start-up: benchmarks/startup.py). What it makes
must be what ``Section()`` makes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from inkctl.recipe.gateway import GatewayFile
from inkctl.recipe.model import Recipe

ROOT = Path(__file__).resolve().parents[2]


def _sections(model: type[BaseModel], seen: set) -> list[tuple[type[BaseModel], str]]:
    """(model, field) for every field whose default is made by default_of, in every model below MODEL."""
    out = []
    if model in seen:
        return out
    seen.add(model)
    for name, f in model.model_fields.items():
        factory = f.default_factory
        if factory is not None and factory.__name__.startswith("default_"):
            out.append((model, name))
        for t in _models_in(f.annotation):
            out += _sections(t, seen)
    return out


def _models_in(annotation) -> list[type[BaseModel]]:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models_in(a)]


SECTIONS = _sections(Recipe, set()) + _sections(GatewayFile, set())


def test_every_section_default_is_made_by_default_of():
    names = {f"{m.__name__}.{f}" for m, f in SECTIONS}
    assert {"Recipe.container", "Recipe.health", "Recipe.smoke", "ModelSpec.weights", "EngineArgs.data_parallel",
            "Fleet.router", "GatewayFile.gateway"} <= names


@pytest.mark.parametrize("model,name", SECTIONS, ids=lambda x: x if isinstance(x, str) else x.__name__)
def test_a_default_equals_the_validated_section(model, name):
    made = model.model_fields[name].default_factory()
    section = type(made)
    validated = section()
    assert made == validated
    assert made.model_fields_set == validated.model_fields_set == set()
    assert made.model_dump() == validated.model_dump()
    assert repr(made) == repr(validated)


def test_validating_a_recipe_builds_one_validator():
    code = ("from inkctl.recipe.reading.source import load_recipe\nfrom inkctl.recipe import model, container, patch\n"
            "load_recipe('examples/vllm-single-docker.yaml')\n"
            "built = [c.__name__ for m in (model, container, patch) for c in vars(m).values()\n"
            "         if isinstance(c, type) and getattr(c, '__pydantic_complete__', False)]\n"
            "print(sorted(built))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "['Recipe']"
