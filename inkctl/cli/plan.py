"""``inkctl plan``'s work, without typer: like ``validate`` (cli/validate.py), a command run on
paper whose start-up is measured (benchmarks/startup.py). ``cli/commands.py`` declares the
command; ``cli/app.py`` runs it straight from here when its arguments need no parsing
(``plain_arguments``), without importing typer or building the command tree."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

from inkctl.cli.common.values import output_format, overrides


def plan(recipe: Path, hosts: Optional[Path] = None, set_: Optional[List[str]] = None, output: str = "text",
         host: Optional[str] = None, full: bool = False, results_dir: Path = Path("bench-results")) -> int:
    """What `up` will run: per rank the host, role, image and exact argv (secrets masked); a
    gateway file (with hosts): every model's group and the gateway's steps. A fleet's rolling
    update: per replica what changes against the last launch ``up`` recorded under ``results_dir``."""
    from inkctl.api.paper.plan import check_host, on_paper, up_command
    from inkctl.api.target import Target
    from inkctl.cli.show.errors_view import print_problems

    fmt = output_format(output)
    target = Target.of(recipe, hosts, overrides(set_))
    paper = on_paper(target)
    if fmt == "json":
        import json

        print(json.dumps({**_plan_json(paper, results_dir), "warnings": [w.as_dict() for w in paper.loaded.warnings]}, indent=2))
        return 0
    check_host(paper, host)
    print_problems(paper.loaded.warnings, strict=False, stream=sys.stderr)
    _print_paper(paper, host, full, up_command(paper, target), results_dir)
    return 0


def _plan_json(paper, results_dir: Path) -> dict:
    if paper.plan is None:
        from inkctl.cli.show.fleet_plan import fleet_json

        return fleet_json(paper.fleet, results_dir)
    from inkctl.cli.show.plan_json import plan_json

    return plan_json(paper.plan)


def _print_paper(paper, host: Optional[str], full: bool, next_command: str, results_dir: Path) -> None:
    from inkctl.api.paper.plan import argv_verdicts
    from inkctl.cli.show.plan_text import print_plan
    from inkctl.cli.show.terminal import plain

    if paper.plan is not None:
        print_plan(plain(), paper.plan, paper.loaded, only_host=host, full=full, next_command=next_command,
                   verdicts=argv_verdicts(paper))
    else:
        from inkctl.cli.show.fleet_plan import print_fleet_plan

        print_fleet_plan(paper.loaded, paper.fleet, full=full, only_host=host, next_command=next_command,
                         results_dir=results_dir)


VALUED = {"-o": "output", "--output": "output", "--host": "host", "--hosts": "hosts", "--set": "set_",
          "--results-dir": "results_dir"}


def plain_arguments(args: list[str]) -> dict | None:
    """``plan``'s keyword arguments from ARGS (what follows the word ``plan``) when they need no
    parser to tell: one recipe, ``--full``, and ``-o``/``--output``, ``--host``, ``--hosts``,
    ``--results-dir``, ``--set`` (repeatable) each with a value, also written ``--name=value``. Anything else
    (``--help``, ``--``, a misspelt option, a value that looks like an option, no recipe or two):
    None, and typer parses them, with its messages. Where both read the arguments they read them
    alike (tests/unit/test_plan_light.py)."""
    found: dict = {}
    recipes: list[str] = []
    rest = iter(args)
    for a in rest:
        name, eq, value = a.partition("=") if a.startswith("--") else (a, "", "")
        if a == "--full":
            found["full"] = True
        elif name in VALUED:
            if not eq:
                value = next(rest, None)  # type: ignore[assignment]
                if value is None or value.startswith("-"):
                    return None
            _take(found, VALUED[name], value)
        elif a.startswith("-"):
            return None
        else:
            recipes.append(a)
    if len(recipes) != 1:
        return None
    return {"recipe": Path(recipes[0]), **found}


def _take(found: dict, key: str, value: str) -> None:
    if key == "set_":
        found.setdefault("set_", []).append(value)
    else:
        found[key] = Path(value) if key in ("hosts", "results_dir") else value
