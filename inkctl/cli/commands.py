"""validate, plan, schema, recipes: everything that works on paper, without hosts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import HostsOpt, OutputOpt, RecipeArg, SetOpt, output_format, overrides


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
    from inkctl.api.plan import check_hosts

    check_hosts(loaded)


@app.command()
def plan(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    output: str = OutputOpt,
    host: Optional[str] = typer.Option(None, "--host", help="Show only this host's steps."),
    full: bool = typer.Option(False, "--full", help="Every stage and step, with the contents of every file written."),
) -> None:
    """Show what `up` will run: per rank the host, role, image and exact argv (secrets masked).
    A gateway file (with --hosts): every model's group and the gateway's steps."""
    from inkctl.api.plan import check_host, on_paper, up_command
    from inkctl.api.target import Target
    from inkctl.cli.errors_view import print_problems

    fmt = output_format(output)
    target = Target.of(recipe, hosts, overrides(set_))
    paper = on_paper(target)
    if fmt == "json":
        print(json.dumps({**_plan_json(paper), "warnings": [w.as_dict() for w in paper.loaded.warnings]}, indent=2))
        return
    check_host(paper, host)
    print_problems(paper.loaded.warnings, strict=False, stream=sys.stderr)
    _print_paper(paper, host, full, up_command(paper, target))


def _plan_json(paper) -> dict:
    from inkctl.cli.fleet import fleet_json
    from inkctl.cli.plan_json import plan_json

    return plan_json(paper.plan) if paper.plan is not None else fleet_json(paper.fleet)


def _print_paper(paper, host: Optional[str], full: bool, next_command: str) -> None:
    from inkctl.api.plan import argv_verdicts
    from inkctl.cli.fleet import print_fleet_plan
    from inkctl.cli.plan_text import print_plan
    from inkctl.cli.terminal import plain

    if paper.plan is not None:
        print_plan(plain(), paper.plan, paper.loaded, only_host=host, full=full, next_command=next_command,
                   verdicts=argv_verdicts(paper))
    else:
        print_fleet_plan(paper.loaded, paper.fleet, full=full, only_host=host, next_command=next_command)


@app.command()
def schema(
    output: str = typer.Option("json", "--output", "-o", metavar="json|markdown",
                               help="json (JSON Schema for editors) or markdown (the recipe reference)."),
    format_: Optional[str] = typer.Option(None, "--format", hidden=True, help="The old name of --output."),
) -> None:
    """Print the recipe JSON Schema, or the recipe reference in Markdown (-o markdown)."""
    from inkctl.api.recipes import schema as schema_text

    sys.stdout.write(schema_text(format_ or output))


@app.command()
def recipes(
    directory: Optional[Path] = typer.Argument(None, metavar="[DIR]", help="A directory of recipes to list instead of the bundled ones."),
    from_: Optional[str] = typer.Option(None, "--from", metavar="GIT_URL|DIR", help="List a recipe repository: a git URL is cloned into inkctl's cache at --ref and pinned to that commit; nothing from it runs."),
    ref: Optional[str] = typer.Option(None, "--ref", help="With --from GIT_URL: the commit, tag or branch (default: the remote's HEAD)."),
    output: str = OutputOpt,
) -> None:
    """List recipes (default: the bundled ones) with hardware, engine, parallelism and status."""
    from inkctl.api.recipes import listing
    from inkctl.cli.listing import recipe_listing

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
