"""``inkctl init``: start a project from a bundled recipe, the way ``kamal init`` starts one."""

from __future__ import annotations

import shutil
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
    from inkctl.recipe.source import load_recipe

    wanted = name or DEFAULT
    src = bundled.find(wanted)
    if src is None:
        raise UsageError(f"no bundled recipe named {wanted!r}", hint="one of: " + ", ".join(bundled.names()))
    loaded = load_recipe(src)
    recipe = loaded.recipe
    inventory = src.parent.parent / "examples" / ("hosts-one.yaml" if recipe.hardware.nodes == 1 else "hosts.yaml")
    here = Path.cwd()
    copies = [(src, here / src.name), (inventory, here / "hosts.yaml")]
    p = recipe.patches
    sources = [h.source for h in p.hotfixes] + [f.source for f in p.files if hasattr(f, "source")]
    patch_dir = here / p.directory
    copies += [(loaded.patch_dir / s, patch_dir / s) for s in sources if (loaded.patch_dir / s).is_file()]
    there = [str(dst.relative_to(here)) for _, dst in copies if dst.exists()]
    if there:
        raise UsageError(f"{', '.join(there)} already exist{'s' if len(there) == 1 else ''} here; init overwrites nothing",
                         hint="run it in an empty directory, or move those files away")
    for s, dst in copies:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(s, dst)
        print(f"wrote {dst.relative_to(here)}")
    missing = [s for s in sources if not (loaded.patch_dir / s).is_file()]
    if missing:
        print(f"to add: {', '.join(missing)} in {p.directory}/ (the recipe says where each comes from)")
    nics = ", NIC names" if recipe.hardware.nodes > 1 else ""
    print(f"""
next: edit hosts.yaml (your hosts in rank order: name or ssh alias, address, user{nics})
and {src.name} (model, image, engine args); then see what will run, check, launch:
  inkctl plan {src.name} --hosts hosts.yaml
  inkctl doctor {src.name} --hosts hosts.yaml
  inkctl up {src.name} --hosts hosts.yaml""")
