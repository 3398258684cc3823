"""``inkctl init``: start a project from a bundled recipe, the way ``kamal init`` starts one."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path
from typing import Optional

import typer

from inkctl.cli.app import app
from inkctl.errors import UsageError

DEFAULT = "vllm-single-docker"


@app.command()
def init(
    name: Optional[str] = typer.Argument(None, metavar="[RECIPE]",
                                         help=f"A bundled recipe (see `inkctl recipes`; default {DEFAULT})."),
) -> None:
    """Copy a bundled recipe and an inventory template here, to edit; overwrites nothing."""
    from inkctl import bundled
    from inkctl.recipe.inventory_template import inventory_for
    from inkctl.recipe.source import load_recipe

    wanted = name or DEFAULT
    src = bundled.find(wanted)
    if src is None:
        raise UsageError(f"no bundled recipe named {wanted!r}", hint=bundled.unknown_hint(wanted))
    loaded = load_recipe(src)
    recipe = loaded.recipe
    here = Path.cwd()
    text = src.read_text()
    # a second recipe in one project: hosts.yaml stays as it is, this recipe's template goes beside it
    inv = "hosts.yaml" if not (here / "hosts.yaml").exists() else f"hosts-{src.stem}.yaml"
    written = {here / src.name: _own_schema(text), here / inv: inventory_for(recipe, text, src.name)}
    copies: list[tuple[Path, Path]] = []
    p = recipe.patches
    sources = [h.source for h in p.hotfixes] + [f.source for f in p.files if hasattr(f, "source")]
    patch_dir = here / p.directory
    copies += [(loaded.patch_dir / s, patch_dir / s) for s in sources if (loaded.patch_dir / s).is_file()]
    there = [str(dst.relative_to(here)) for dst in [*written, *(d for _, d in copies)] if dst.exists()]
    if there:
        raise UsageError(f"{', '.join(there)} already exist{'s' if len(there) == 1 else ''} here; init overwrites nothing",
                         hint="run it in an empty directory, or move those files away")
    for dst, body in written.items():
        dst.write_text(body)
        print(f"wrote {dst.relative_to(here)}")
    for s, dst in copies:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(s, dst)
        print(f"wrote {dst.relative_to(here)}")
    missing = [s for s in sources if not (loaded.patch_dir / s).is_file()]
    if missing:
        print(textwrap.fill(f"to add: {', '.join(missing)} in {p.directory}/ (the recipe says where each comes "
                            "from)", 80, subsequent_indent="  ", break_on_hyphens=False))
    if inv != "hosts.yaml":
        print(textwrap.fill(f"(hosts.yaml was here already and is kept; {inv} is this recipe's inventory)", 80,
                            break_on_hyphens=False))
    nics = ", NIC names" if recipe.hardware.nodes > 1 else ""
    then = textwrap.fill(f"then put your hosts in {inv} (rank order: name or ssh alias, address, user{nics}), "
                         f"edit {src.name} to taste, check and launch:", 80, break_on_hyphens=False)
    see = textwrap.fill(f"next: see what will run (on the placeholder hosts in {inv}):", 80, subsequent_indent="    ",
                        break_on_hyphens=False)
    print(f"""
{see}
  inkctl plan {src.name} --hosts {inv}
{then}
  inkctl doctor {src.name} --hosts {inv}
  inkctl up {src.name} --hosts {inv}""")


SCHEMA_LINE = "# yaml-language-server: $schema="


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
