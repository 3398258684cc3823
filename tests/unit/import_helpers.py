"""Shared by the import tests: import a file, load what it wrote, plan it, find the engine's argv."""

from __future__ import annotations

import json
from pathlib import Path

from inkctl.api.paper.importing import import_recipe
from inkctl.plan.deploy import build_plan
from inkctl.recipe.reading.source import load_recipe

PROGRAMS = (["vllm", "serve"], ["sglang", "serve"], ["python3", "-m", "sglang.launch_server"])


def imported(src: Path, out: Path, **kw):
    """The import's result, the written recipe loaded (its warnings), and rank 0's engine argv."""
    result = import_recipe(src, out=out, **kw)
    errors = [p for p in result.problems if p.severity == "error"]
    assert not errors, [p.render() for p in errors]
    out.write_text(result.text)
    loaded = load_recipe(out)
    return result, loaded, engine_argv(loaded)


def engine_argv(loaded) -> list[str]:
    plan = build_plan(loaded.recipe)
    image = loaded.recipe.engine.image.ref
    for stage in plan.stages:
        for step in stage.steps:
            argv = list(getattr(step, "argv", None) or [])
            if image in argv and "--entrypoint" in argv:
                run = [argv[argv.index("--entrypoint") + 1], *argv[argv.index(image) + 1:]]
                if any(run[:len(p)] == p for p in PROGRAMS):
                    return run
            for i in range(len(argv)):
                if any(argv[i:i + len(p)] == p for p in PROGRAMS):
                    return argv[i:]
    raise AssertionError("no engine command in the plan")


def same_value(want: str, got: str) -> bool:
    if want == got:
        return True
    try:
        return float(want) == float(got)
    except ValueError:
        pass
    try:
        return json.loads(want) == json.loads(got)
    except ValueError:
        return False


def values_after(argv: list[str], flag: str, n: int) -> list[list[str]]:
    """Every occurrence of FLAG in ARGV with the N words after it (or its =value)."""
    out = []
    for i, a in enumerate(argv):
        if a == flag:
            out.append(argv[i + 1:i + 1 + n])
        elif a.startswith(flag + "="):
            out.append([a.partition("=")[2]])
    return out
