"""validate, plan, schema, recipes: everything that works on paper, without hosts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import HostsOpt, OutputOpt, RecipeArg, SetOpt, output_format, overrides
from inkctl.errors import EXIT_INVALID, InkctlError


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
    if loaded.recipe.fleet is not None:
        from inkctl.api.fleet import fleet_of

        fleet_of(loaded)
        return
    from inkctl.plan.deploy import build_plan

    build_plan(loaded.recipe, loaded.hosts)


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
    from inkctl.cli.render import plain, plan_json, print_plan, print_problems
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs
    from inkctl.recipe.source import load_recipe

    fmt = output_format(output)
    from inkctl.recipe.filekind import is_gateway_file

    if is_gateway_file(recipe):
        return _plan_gateway(recipe, hosts, fmt, host, full)
    loaded = load_recipe(recipe, overrides(set_), hosts)
    if loaded.recipe.fleet is not None:
        return _plan_fleet(loaded, recipe, fmt, host, full)
    the_plan = build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded))
    if fmt == "json":
        doc = plan_json(the_plan)
        doc["warnings"] = [w.as_dict() for w in loaded.warnings]
        print(json.dumps(doc, indent=2))
        return
    if host is not None and host not in {h.name for h in the_plan.hosts}:
        from inkctl.errors import UsageError

        raise UsageError(f"--host {host}: no such host in this plan",
                         hint="its hosts are " + ", ".join(h.name for h in the_plan.hosts))
    print_problems(loaded.warnings, strict=False, stream=sys.stderr)
    if loaded.hosts_source and loaded.hosts_source.startswith("--hosts "):
        where = " " + loaded.hosts_source
    elif loaded.hosts is None:
        where = " --hosts FILE"
    else:
        where = ""
    from inkctl.plan.quote import command_line

    print_plan(plain(), the_plan, loaded, only_host=host, full=full,
               next_command=command_line(("inkctl", "up", str(recipe))) + where
               + ("    (an inventory: inkctl init writes one to edit)" if loaded.hosts is None else ""))


def _plan_gateway(recipe, hosts, fmt: str, host: Optional[str], full: bool) -> None:
    """A gateway file: every model's group and the router in front (a fleet's plan)."""
    from inkctl.api.fleet import load_gateway_fleet
    from inkctl.api.target import Target
    from inkctl.cli.fleet import fleet_json, print_fleet_plan
    from inkctl.cli.render import print_problems
    from inkctl.plan.quote import command_line

    lg, fleet = load_gateway_fleet(Target.of(recipe, hosts), "plan")
    if fmt == "json":
        print(json.dumps({**fleet_json(fleet), "warnings": [w.as_dict() for w in lg.warnings]}, indent=2))
        return
    print_problems(lg.warnings, strict=False, stream=sys.stderr)
    print_fleet_plan(lg, fleet, full=full, only_host=host,
                     next_command=command_line(("inkctl", "up", str(recipe), "--hosts", str(hosts))))


def _plan_fleet(loaded, recipe, fmt: str, host: Optional[str], full: bool) -> None:
    from inkctl.api.fleet import fleet_of
    from inkctl.cli.fleet import fleet_json, print_fleet_plan
    from inkctl.cli.render import print_problems
    from inkctl.plan.quote import command_line

    fleet = fleet_of(loaded)
    if fmt == "json":
        doc = fleet_json(fleet)
        doc["warnings"] = [w.as_dict() for w in loaded.warnings]
        print(json.dumps(doc, indent=2))
        return
    names = {h.name for p in fleet.plans for h in p.hosts}
    if host is not None and host not in names:
        from inkctl.errors import UsageError

        raise UsageError(f"--host {host}: no such host in this plan", hint="its hosts are " + ", ".join(sorted(names)))
    print_problems(loaded.warnings, strict=False, stream=sys.stderr)
    where = f" {loaded.hosts_source}" if loaded.hosts_source and loaded.hosts_source.startswith("--hosts ") else (
        " --hosts FILE" if loaded.hosts is None else "")
    print_fleet_plan(loaded, fleet, full=full, only_host=host,
                     next_command=command_line(("inkctl", "up", str(recipe))) + where)


@app.command()
def schema(
    format_: str = typer.Option("json", "--format", help="json (JSON Schema for editors) or markdown (the recipe reference)."),
) -> None:
    """Print the recipe JSON Schema, or the recipe reference in Markdown."""
    from inkctl.recipe.reference import json_schema, markdown_reference

    if format_ == "json":
        print(json.dumps(json_schema(), indent=2))
    elif format_ == "markdown":
        sys.stdout.write(markdown_reference())
    else:
        raise InkctlError(f"--format must be json or markdown, not {format_!r}", exit_code=EXIT_INVALID)


@app.command()
def recipes(
    directory: Optional[Path] = typer.Argument(None, metavar="[DIR]", help="A directory of recipes to list instead of the bundled ones."),
    from_: Optional[str] = typer.Option(None, "--from", metavar="GIT_URL|DIR", help="List a recipe repository: a git URL is cloned into inkctl's cache at --ref and pinned to that commit; nothing from it runs."),
    ref: Optional[str] = typer.Option(None, "--ref", help="With --from GIT_URL: the commit, tag or branch (default: the remote's HEAD)."),
    output: str = OutputOpt,
) -> None:
    """List recipes (default: the bundled ones) with hardware, engine, parallelism and status."""
    from inkctl import bundled
    from inkctl.cli.render import recipe_listing
    from inkctl.recipe.filekind import expand_paths
    from inkctl.recipe.source import is_inventory, load_recipe

    fmt = output_format(output)
    checkout = None
    if from_ is not None:
        from inkctl.recipe.repository import fetch

        if directory is not None:
            raise InkctlError("give a directory or --from, not both", exit_code=EXIT_INVALID)
        checkout = fetch(from_, ref)
        directory = checkout.path
    if directory is None:
        paths = bundled.bundled_files()
        if not paths:
            raise InkctlError("no bundled recipes found: this installation of inkctl is incomplete",
                              hint="reinstall inkctl, or pass a directory: inkctl recipes DIR")
    else:
        paths = [p for p in expand_paths([str(directory)]) if not is_inventory(p)]
    rows = []
    for path in paths:
        # what `plan` accepts: the bundled name, or the path of a recipe in DIR
        ref = bundled.name_of(path) if directory is None else str(path)
        if checkout is not None:  # a repository's files by their path in it (the header says where it is)
            ref = str(path.relative_to(checkout.path))
        try:
            r = load_recipe(path).recipe
        except InkctlError:
            rows.append({"recipe": ref, "path": str(path), "error": _foreign(path, ref) or "invalid (run inkctl validate)"})
            continue
        rows.append({
            "recipe": ref, "path": str(path), "name": r.name, "model": r.model.repo,
            "hardware": f"{r.hardware.nodes}x{r.hardware.gpus_per_host} {r.hardware.accelerator}",
            "engine": f"{r.engine.kind} {r.engine.version.split()[0]}" + (f" ({r.engine.multinode})" if r.engine.kind == "vllm" and r.multinode else ""),
            "parallel": _parallel(r),
            "runtime": r.container.runtime, "patches": r.patches.mode,
            "status": r.provenance.status if r.provenance else "draft",
        })
    if fmt == "json":
        print(json.dumps({"source": checkout.source, "commit": checkout.commit, "path": str(checkout.path),
                          "recipes": rows} if checkout else rows, indent=2))
    else:
        if checkout is not None:
            at = f"at commit {checkout.commit}" if checkout.commit else "(a directory, not pinned)"
            for line in (checkout.source, f"  {at}", f"  in {checkout.path}",
                         f"  {len(rows)} file(s); nothing from it runs until you plan or up one"):
                while len(line) > 80:  # a long URL or path folds; every line fits 80 columns
                    print(line[:80])
                    line = "    " + line[80:]
                print(line)
        print(recipe_listing(rows))
        print("\nnext: inkctl plan RECIPE   the exact plan, per host and rank (no hosts needed)\n"
              "      inkctl init RECIPE   a copy to edit here, with an inventory for it")


def _parallel(r) -> str:
    a = r.engine.args
    text = f"TP={a.tensor_parallel} PP={a.pipeline_parallel}"
    if a.data_parallel.size > 1:
        text += f" DP={a.data_parallel.size}" + (" (attention)" if a.data_parallel.attention else "")
    if a.expert is not None and a.expert.enabled:
        text += " EP"
    return text


def _foreign(path: Path, shown: str) -> str | None:
    """A recipe of another tool: say how to import it instead of calling it invalid."""
    import yaml

    from inkctl.recipe.foreign import detect

    try:
        kind = detect(yaml.safe_load(path.read_text()))
    except Exception:
        return None
    return f"a {kind} recipe: inkctl import it" if kind else None
