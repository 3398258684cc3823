"""validate, plan, schema, recipes: everything that works on paper, without hosts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import HostsOpt, OutputOpt, RecipeArg, SetOpt, output_format


@app.command()
def validate(
    paths: List[str] = typer.Argument(..., help="Recipe files, gateway files, directories or globs."),
    strict: bool = typer.Option(False, "--strict", help="Treat warnings (unpinned digests, missing patch files) as errors."),
    output: str = OutputOpt,
    set_: Optional[List[str]] = SetOpt,
    hosts: Optional[Path] = HostsOpt,
) -> None:
    """Validate recipes (and gateway files, their recipes and how their models fit together):
    a line per file, every problem located; non-zero if any fails."""
    from inkctl.cli.validate import validate as run_validate

    code = run_validate(paths, strict=strict, output=output, set_=set_, hosts=hosts, check_hosts=_check_hosts)
    if code:
        raise typer.Exit(code)


def _check_hosts(loaded) -> None:
    from inkctl.api.paper.plan import check_hosts

    check_hosts(loaded)


@app.command()
def plan(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    output: str = OutputOpt,
    host: Optional[str] = typer.Option(None, "--host", help="Show only this host's steps."),
    full: bool = typer.Option(False, "--full", help="Every stage and step, with the contents of every file written."),
    results_dir: Path = typer.Option(Path("bench-results"), "--results-dir",
                                     help="Where up keeps its records: a fleet's rolling update is diffed against "
                                          "the last launch recorded there."),
) -> None:
    """Show what `up` will run: per rank the host, role, image and exact argv (secrets masked).
    A gateway file (with --hosts): every model's group and the gateway's steps."""
    from inkctl.cli.plan import plan as run_plan

    run_plan(recipe, hosts=hosts, set_=set_, output=output, host=host, full=full, results_dir=results_dir)


@app.command()
def schema(
    output: str = typer.Option("json", "--output", "-o", metavar="json|markdown",
                               help="json (JSON Schema for editors) or markdown (the recipe reference)."),
    format_: Optional[str] = typer.Option(None, "--format", hidden=True, help="The old name of --output."),
) -> None:
    """Print the recipe JSON Schema, or the recipe reference in Markdown (-o markdown)."""
    from inkctl.api.paper.recipes import schema as schema_text

    sys.stdout.write(schema_text(format_ or output))


@app.command()
def recipes(
    directory: Optional[Path] = typer.Argument(None, metavar="[DIR]", help="A directory of recipes to list instead of the bundled ones."),
    from_: Optional[str] = typer.Option(None, "--from", metavar="GIT_URL|DIR", help="List a recipe repository: a git URL is cloned into inkctl's cache at --ref and pinned to that commit; nothing from it runs."),
    ref: Optional[str] = typer.Option(None, "--ref", help="With --from GIT_URL: the commit, tag or branch (default: the remote's HEAD)."),
    output: str = OutputOpt,
) -> None:
    """List recipes (default: the bundled ones) with hardware, engine, parallelism and status."""
    from inkctl.api.paper.recipes import listing
    from inkctl.cli.show.listing import recipe_listing

    fmt = output_format(output)
    found = listing(directory, from_, ref)
    if fmt == "json":
        print(json.dumps(found.as_json(), indent=2))
        return
    if found.checkout is not None:
        _print_checkout(found.checkout, len(found.rows))
    print(recipe_listing(found.rows))
    print("\nnext: inkctl plan RECIPE   the exact plan, per host and rank (no hosts needed)\n"
          "      inkctl init RECIPE   a copy to edit here, with an inventory for it")


def _print_checkout(checkout, count: int) -> None:
    """Where a repository's recipes come from; a long URL or path folds: every line fits 80 columns."""
    at = f"at commit {checkout.commit}" if checkout.commit else "(a directory, not pinned)"
    for line in (checkout.source, f"  {at}", f"  in {checkout.path}",
                 f"  {count} file(s); nothing from it runs until you plan or up one"):
        while len(line) > 80:
            print(line[:80])
            line = "    " + line[80:]
        print(line)
