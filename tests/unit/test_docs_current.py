"""The checked-in schema and reference are what the model generates today."""

from __future__ import annotations

import json
from pathlib import Path

from inkctl.recipe.reference import json_schema, markdown_reference

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_json_schema_is_current():
    on_disk = json.loads((DOCS / "recipe.schema.json").read_text())
    assert on_disk == json_schema(), "run: inkctl schema > docs/recipe.schema.json"


def test_reference_is_current():
    assert (DOCS / "recipe-reference.md").read_text() == markdown_reference(), \
        "run: inkctl schema -o markdown > docs/recipe-reference.md"


def test_every_field_is_described():
    """Every property of every model in the schema says what it is (directly, or through the one
    model it refers to: the schema keeps a description once)."""
    s = json_schema()
    models = {"Recipe": s, **s["$defs"]}
    missing = [f"{name}.{field}" for name, m in models.items() for field, prop in m.get("properties", {}).items()
               if not prop.get("description")
               and not models.get(prop.get("$ref", "").rsplit("/", 1)[-1], {}).get("description")]
    assert missing == []
    assert len(models) > 20  # the walk saw the whole recipe
