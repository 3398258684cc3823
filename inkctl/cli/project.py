"""``inkctl init``: start a project from a bundled recipe, the way ``kamal init`` starts one."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Optional

import typer

from inkctl.api.paper.init import DEFAULT
from inkctl.cli.app import app


@app.command()
def init(
    name: Optional[str] = typer.Argument(None, metavar="[RECIPE]",
                                         help=f"A bundled recipe (see `inkctl recipes`; default {DEFAULT}), or a recipe file."),
    api_key: bool = typer.Option(False, "--api-key", help="Also make a random API key in ./api-key (0600) and name it "
                                 "in the recipe (api_key): the endpoint then answers only requests that carry it."),
) -> None:
    """Copy a bundled recipe and an inventory template here, to edit; overwrites nothing."""
    from inkctl.api.paper.init import init as start

    project = start(name, Path.cwd(), lambda path: print(f"wrote {path}"), api_key=api_key)
    inv, recipe_file = project.inventory, project.recipe_file
    if project.missing:
        print(textwrap.fill(f"to add: {', '.join(project.missing)} in {project.patch_dir}/ (the recipe says where each "
                            "comes from)", 80, subsequent_indent="  ", break_on_hyphens=False))
    if api_key:
        print(textwrap.fill("the endpoint's API key is in ./api-key (0600; the recipe's api_key reads it there): "
                            "clients send it as Authorization: Bearer KEY; smoke, bench and top send it themselves",
                            80, break_on_hyphens=False))
    if inv != "hosts.yaml":
        print(textwrap.fill(f"(hosts.yaml was here already and is kept; {inv} is this recipe's inventory)", 80,
                            break_on_hyphens=False))
    nics = ", NIC names" if project.recipe.hardware.nodes > 1 and not project.recipe.network.rdma else ""  # rdma: read
    then = textwrap.fill(f"then put your hosts in {inv} (rank order: name or ssh alias, address, user{nics}), "
                         f"edit {recipe_file} to taste, check and launch:", 80, break_on_hyphens=False)
    see = textwrap.fill(f"next: see what will run (on the placeholder hosts in {inv}):", 80, subsequent_indent="    ",
                        break_on_hyphens=False)
    print(f"""
{see}
  inkctl plan {recipe_file} --hosts {inv}
{then}
  inkctl doctor {recipe_file} --hosts {inv}
  inkctl up {recipe_file} --hosts {inv}""")
