"""validate, plan, schema, recipes: everything that works on paper, without hosts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import HostsOpt, OutputOpt, SetOpt, output_format, overrides
from inkctl.errors import EXIT_INVALID, InkctlError


@app.command()
def validate(
    paths: List[str] = typer.Argument(..., help="Recipe files, directories or globs."),
    strict: bool = typer.Option(False, "--strict", help="Treat warnings (unpinned digests, missing patch files) as errors."),
    output: str = OutputOpt,
    set_: Optional[List[str]] = SetOpt,
    hosts: Optional[Path] = HostsOpt,
) -> None:
    """Validate recipes: a line per recipe, every problem located; non-zero if any fails."""
    from inkctl.cli.render import plain, print_problems
    from inkctl.recipe.source import expand_paths, is_inventory, load_inventory, load_recipe

    fmt = output_format(output)
    results = []
    for path in expand_paths(paths):
        try:
            if is_inventory(path):
                load_inventory(path)
                results.append((path, True, [], []))
                continue
            loaded = load_recipe(path, overrides(set_), hosts)
            if hosts is not None:
                _check_hosts(loaded)
            problems, warnings = [], loaded.warnings
            ok = not (strict and warnings)
        except InkctlError as e:
            from inkctl.errors import Problem, RecipeInvalid

            problems = e.problems if isinstance(e, RecipeInvalid) else []
            warnings = []
            if not problems:
                from inkctl.codes import code

                problems = [Problem(e.message, file=str(path), hint=e.hint, code=code("cannot-load"))]
            ok = False
        results.append((path, ok, problems, warnings))
    if fmt == "json":
        doc = [_result_json(p, ok, pr, wa, strict) for p, ok, pr, wa in results]
        print(json.dumps({"ok": all(r[1] for r in results), "strict": strict, "recipes": doc}, indent=2))
    else:
        out = plain()
        for path, ok, problems, warnings in results:
            mark = "[green]ok[/]" if ok else "[red]FAIL[/]"
            extra = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
            out.print(f"{mark} {path}{extra}")
            print_problems(problems + warnings, strict=strict)
    if not all(r[1] for r in results):
        raise typer.Exit(EXIT_INVALID)


def _result_json(path, ok: bool, problems: list, warnings: list, strict: bool) -> dict:
    """One recipe's result: ``errors`` is every problem that fails it (warnings that --strict turns into
    failures among them, marked ``"strict": true``); ``warnings`` those that do not."""
    def item(p, fails: bool) -> dict:
        return {**p.as_dict(), "fails": fails, "strict": fails and p.severity != "error"}

    warnings = warnings + [p for p in problems if p.severity != "error"]
    errors = [item(p, True) for p in problems if p.severity == "error"]
    errors += [item(w, True) for w in warnings] if strict else []
    return {"recipe": str(path), "ok": ok, "errors": errors,
            "warnings": [] if strict else [item(w, False) for w in warnings]}


def _check_hosts(loaded) -> None:
    from inkctl.plan.deploy import build_plan

    build_plan(loaded.recipe, loaded.hosts)


@app.command()
def plan(
    recipe: Path = typer.Argument(..., help="Recipe file."),
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    output: str = OutputOpt,
    host: Optional[str] = typer.Option(None, "--host", help="Show only this host's steps."),
) -> None:
    """Show every step `up` will run, per host and rank, with the exact argv (secrets masked)."""
    from inkctl.cli.render import plain, plan_json, print_plan, print_problems
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs
    from inkctl.recipe.source import load_recipe

    fmt = output_format(output)
    loaded = load_recipe(recipe, overrides(set_), hosts)
    the_plan = build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded))
    if fmt == "json":
        doc = plan_json(the_plan)
        doc["warnings"] = [w.as_dict() for w in loaded.warnings]
        print(json.dumps(doc, indent=2))
        return
    print_problems(loaded.warnings, strict=False, stream=sys.stderr)
    print_plan(plain(), the_plan, loaded, only_host=host)


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
    directory: Optional[Path] = typer.Argument(None, help="Directory of recipes (default: the bundled ones)."),
    output: str = OutputOpt,
) -> None:
    """List recipes: hardware, engine, parallelism, status."""
    from inkctl.cli.render import console, recipe_table
    from inkctl.recipe.source import expand_paths, load_recipe

    fmt = output_format(output)
    d = directory or bundled_recipes_dir()
    rows = []
    for path in expand_paths([str(d)]):
        try:
            r = load_recipe(path).recipe
        except InkctlError:
            rows.append({"recipe": str(path), "error": "invalid (run inkctl validate)"})
            continue
        rows.append({
            "recipe": path.name, "path": str(path), "name": r.name, "model": r.model.repo,
            "hardware": f"{r.hardware.nodes}x{r.hardware.gpus_per_host} {r.hardware.accelerator}",
            "engine": f"{r.engine.kind} {r.engine.version.split()[0]}" + (f" ({r.engine.multinode})" if r.engine.kind == "vllm" and r.multinode else ""),
            "parallel": f"TP={r.engine.args.tensor_parallel} PP={r.engine.args.pipeline_parallel}",
            "runtime": r.container.runtime, "patches": r.patches.mode,
            "status": r.provenance.status if r.provenance else "draft",
        })
    if fmt == "json":
        print(json.dumps(rows, indent=2))
    else:
        console().print(recipe_table(rows))


def bundled_recipes_dir() -> Path:
    """recipes/ of the source tree; installed copies look next to the package too."""
    here = Path(__file__).resolve().parent.parent
    for cand in (here.parent / "recipes", here / "recipes"):
        if cand.is_dir():
            return cand
    raise InkctlError("no bundled recipes found", hint="pass a directory: inkctl recipes DIR")
