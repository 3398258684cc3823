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
        "run: inkctl schema --format markdown > docs/recipe-reference.md"


def test_every_field_is_described():
    from inkctl.recipe.model import Recipe

    seen, todo, missing = set(), [Recipe], []
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        for name, f in m.model_fields.items():
            if not f.description:
                missing.append(f"{m.__name__}.{name}")
            from inkctl.recipe.reference import _models_in

            todo += _models_in(f.annotation)
    assert missing == []
