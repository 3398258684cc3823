"""``inkctl validate``'s work, without typer: the command a CI job runs on every push, and the
one start-up matters most for (benchmarks/startup.py). ``cli/commands.py`` declares the command;
``cli/app.py`` runs it straight from here when its arguments need no parsing (``plain_arguments``),
without importing typer or building the command tree."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, List, Optional

from inkctl.cli.common.values import output_format
from inkctl.errors import EXIT_INVALID


def validate(paths: List[str], strict: bool = False, output: str = "text", set_: Optional[List[str]] = None,
             hosts: Optional[Path] = None, check_hosts: Optional[Callable] = None) -> int:
    """A line per recipe or gateway file, every problem located; the exit status: EXIT_INVALID if any fails.
    With ``hosts``, ``check_hosts(loaded)`` plans each recipe on them (``cli/commands.py`` passes
    ``api/plan.check_hosts``)."""
    from inkctl.api.paper.validate import verdicts

    fmt = output_format(output)
    results = verdicts(paths, strict, set_, hosts, check_hosts)
    if fmt == "json":
        import json

        doc = [_result_json(p, ok, pr, wa, strict) for p, ok, pr, wa in results]
        print(json.dumps({"ok": all(r[1] for r in results), "strict": strict, "recipes": doc}, indent=2))
    else:
        _text(results, strict)
    return 0 if all(r[1] for r in results) else EXIT_INVALID


def _text(results: list, strict: bool) -> None:
    from inkctl.cli.show.errors_view import print_problems
    from inkctl.cli.show.terminal import plain

    out = plain()
    for path, ok, problems, warnings in results:
        mark = "[green]ok[/]" if ok else "[red]FAIL[/]"
        extra = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
        out.print(f"{mark} {path}{extra}")
        print_problems(problems + warnings, strict=strict)


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
