"""``init``: start a project from a bundled recipe, the way ``kamal init`` starts one: the recipe,
an inventory template for it and its patch files, copied here to edit; nothing overwritten."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inkctl.errors import UsageError

DEFAULT = "vllm-single-docker"
SCHEMA_LINE = "# yaml-language-server: $schema="


@dataclass
class Project:
    """What ``init`` wrote: the recipe's file name, its inventory's, the patch files the recipe
    names that the bundled recipe does not carry (to add by hand) and where they go."""

    recipe_file: str
    inventory: str
    recipe: Any
    missing: list[str] = field(default_factory=list)
    patch_dir: str = ""


def init(name: str | None, here: Path, wrote: Callable[[Path], None]) -> Project:
    """Copy the bundled recipe NAME (default ``DEFAULT``), an inventory template for it and its
    patch files into HERE; ``wrote(path)`` after each file. Checks first: nothing is written if
    any of them is there already."""
    from inkctl import bundled
    from inkctl.recipe.inventory_template import inventory_for
    from inkctl.recipe.source import load_recipe

    wanted = name or DEFAULT
    src = bundled.find(wanted)
    if src is None:
        raise UsageError(f"no bundled recipe named {wanted!r}", hint=bundled.unknown_hint(wanted))
    loaded = load_recipe(src)
    recipe = loaded.recipe
    text = src.read_text()
    # a second recipe in one project: hosts.yaml stays as it is, this recipe's template goes beside it
    inv = "hosts.yaml" if not (here / "hosts.yaml").exists() else f"hosts-{src.stem}.yaml"
    written = {here / src.name: _own_schema(text), here / inv: inventory_for(recipe, text, src.name)}
    p = recipe.patches
    sources = [h.source for h in p.hotfixes] + [f.source for f in p.files if hasattr(f, "source")]
    patch_dir = here / p.directory
    copies = [(loaded.patch_dir / s, patch_dir / s) for s in sources if (loaded.patch_dir / s).is_file()]
    there = [str(dst.relative_to(here)) for dst in [*written, *(d for _, d in copies)] if dst.exists()]
    if there:
        raise UsageError(f"{', '.join(there)} already exist{'s' if len(there) == 1 else ''} here; init overwrites nothing",
                         hint="run it in an empty directory, or move those files away")
    for dst, body in written.items():
        dst.write_text(body)
        wrote(dst.relative_to(here))
    for s, dst in copies:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(s, dst)
        wrote(dst.relative_to(here))
    missing = [s for s in sources if not (loaded.patch_dir / s).is_file()]
    return Project(src.name, inv, recipe, missing, str(p.directory))


def _own_schema(text: str) -> str:
    """The recipe's editor schema line, pointed at the schema that ships with this inkctl (the
    bundled file's ``../docs/recipe.schema.json`` means nothing beside the copy)."""
    from inkctl import bundled

    root = bundled.share_dir()
    schema = root / "docs" / "recipe.schema.json" if root else None
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(SCHEMA_LINE):
            lines[i] = f"{SCHEMA_LINE}{schema.as_uri()}\n" if schema and schema.is_file() else ""
    return "".join(lines)
