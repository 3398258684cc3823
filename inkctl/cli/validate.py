"""``inkctl validate``'s work, without typer: the command a CI job runs on every push, and the
one start-up matters most for (bench/startup.py). ``cli/commands.py`` declares the command;
``cli/app.py`` runs it straight from here when its arguments need no parsing (``plain_arguments``),
without importing typer or building the command tree."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional

from inkctl.cli.values import output_format, overrides
from inkctl.errors import EXIT_INVALID, InkctlError


def validate(paths: List[str], strict: bool = False, output: str = "text", set_: Optional[List[str]] = None,
             hosts: Optional[Path] = None, check_hosts: Optional[Callable] = None) -> int:
    """A line per recipe or gateway file, every problem located; the exit status: EXIT_INVALID if any fails.
    With ``hosts``, ``check_hosts(loaded)`` plans each recipe on them (``cli/commands.py`` passes
    it; a fleet's plan is ``api/fleet.py``'s)."""
    from inkctl.cli.render import plain, print_problems
    from inkctl.recipe.filekind import expand_paths

    fmt = output_format(output)
    results: list[tuple] = []
    cache = None
    if not set_ and hosts is None:  # a verdict on the file alone: kept (cli/validate_cache.py)
        from inkctl.cli.validate_cache import open_cache

        cache = open_cache()
    for path in expand_paths(paths):
        kept = cache.get(path) if cache is not None else None
        if kept is not None:
            problems, warnings = kept
            results.append((path, not problems and not (strict and warnings), problems, warnings))
            continue
        try:
            from inkctl.recipe.filekind import is_gateway_file
            from inkctl.recipe.source import is_inventory, load_inventory

            if is_inventory(path):
                load_inventory(path)
                results.append((path, True, [], []))
                continue
            if is_gateway_file(path):
                from inkctl.cli.validate_gateway import validate_gateway

                problems, warnings = validate_gateway(path, hosts)
                results.append((path, not problems and not (strict and warnings), problems, warnings))
                continue
            loaded = _load(path, set_, hosts, cache)
            if hosts is not None and check_hosts is not None:
                check_hosts(loaded)
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
        import json

        doc = [_result_json(p, ok, pr, wa, strict) for p, ok, pr, wa in results]
        print(json.dumps({"ok": all(r[1] for r in results), "strict": strict, "recipes": doc}, indent=2))
    else:
        out = plain()
        for path, ok, problems, warnings in results:
            mark = "[green]ok[/]" if ok else "[red]FAIL[/]"
            extra = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
            out.print(f"{mark} {path}{extra}")
            print_problems(problems + warnings, strict=strict)
    return 0 if all(r[1] for r in results) else EXIT_INVALID


def _load(path: Path, set_: Optional[List[str]], hosts: Optional[Path], cache):
    """``load_recipe``; with a cache, its verdict kept there, found by what it was made of
    (the recipe, the files it read or looked for), when it is a verdict: loaded, or invalid."""
    from inkctl.errors import RecipeInvalid
    from inkctl.recipe.source import load_recipe

    if cache is None:
        return load_recipe(path, overrides(set_), hosts)
    from inkctl.cli.validate_cache import looked_for, reads_of, recording

    data = path.read_bytes()
    opened: set[str] = set()
    try:
        with recording(opened):
            loaded = load_recipe(path)
    except RecipeInvalid as e:
        if e.problems and path.read_bytes() == data:
            cache.put(path, data, reads_of(path, opened, []), e.problems, [])
        raise
    if path.read_bytes() == data:  # the verdict is on these bytes (not on a file changed meanwhile)
        cache.put(path, data, reads_of(path, opened, looked_for(loaded)), [], loaded.warnings)
    return loaded


def plain_arguments(args: list[str]) -> dict | None:
    """``validate``'s keyword arguments from ARGS (what follows the word ``validate``) when they
    need no parser to tell: paths, ``--strict``, ``-o``/``--output`` with a value. Anything else
    (``--help``, ``--set``, ``--hosts``, ``--``, a misspelt option, a value that looks like an
    option, no path at all): None, and typer parses them, with its messages. Where both read the
    arguments they read them alike (tests/unit/test_validate_light.py)."""
    paths: list[str] = []
    found: dict = {}
    rest = iter(args)
    for a in rest:
        if a == "--strict":
            found["strict"] = True
        elif a in ("-o", "--output"):
            value = next(rest, None)
            if value is None or value.startswith("-"):
                return None
            found["output"] = value
        elif a.startswith("--output="):
            found["output"] = a[len("--output="):]
        elif a.startswith("-"):
            return None
        else:
            paths.append(a)
    return {"paths": paths, **found} if paths else None


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
