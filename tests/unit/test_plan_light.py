"""`inkctl plan` without typer (cli/app.py's ``_light``), as `validate` has it: where its
arguments need no parser it runs straight from cli/plan.py; it reads them as typer does,
prints what the typer path prints, and imports neither typer nor click. The speed itself:
benchmarks/startup.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inkctl.cli.plan import plain_arguments

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = {"recipe": None, "hosts": None, "set_": None, "output": "text", "host": None, "full": False,
            "results_dir": Path("bench-results")}
RECIPE = "recipes/inkling-small-2x-dgx-spark-vllm.yaml"

PLAIN = [
    ["a.yaml"],
    ["a.yaml", "--full"],
    ["--full", "-o", "json", "a.yaml"],
    ["a.yaml", "--output=json", "--host", "h1"],
    ["a.yaml", "--hosts", "hosts.yaml", "--host=h2"],
    ["a.yaml", "--hosts=hosts.yaml"],
    ["a.yaml", "--results-dir", "runs", "--hosts=hosts.yaml"],
    ["a.yaml", "--set", "engine.args.port=8001", "--set=name=x"],
    ["--set", "a=-1", "a.yaml", "-o", "text", "-o", "json"],
    ["vllm-single-docker"],
]
NOT_PLAIN = [
    [],
    ["--full"],
    ["--help"],
    ["-h", "a.yaml"],
    ["a.yaml", "b.yaml"],
    ["--", "a.yaml"],
    ["-", "a.yaml"],
    ["--ful", "a.yaml"],
    ["--full=true", "a.yaml"],
    ["a.yaml", "-o"],
    ["a.yaml", "--host", "--full"],
    ["-ojson", "a.yaml"],
    ["-o=json", "a.yaml"],
]


def _typer_reads(args: list[str]) -> dict:
    """What typer hands the plan command for ARGS (its parser and its type coercion)."""
    import typer.main

    import inkctl.cli.commands  # noqa: F401  (registers plan)
    from inkctl.cli.app import app

    command = typer.main.get_command(app).commands["plan"]  # type: ignore[attr-defined]
    ctx = command.make_context("plan", list(args))
    return dict(ctx.params)


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_plain_arguments_read_as_typer_reads_them(args):
    light = plain_arguments(args)
    assert light is not None
    got = {**DEFAULTS, **light}
    typer_got = _typer_reads(args)
    typer_got["set_"] = list(typer_got["set_"]) or None  # () from typer, None here: no --set
    assert typer_got == got


@pytest.mark.parametrize("args", NOT_PLAIN, ids=lambda a: " ".join(a) or "nothing")
def test_anything_else_goes_to_typer(args):
    assert plain_arguments(args) is None


def _both_ways(args: list[str]) -> tuple[tuple, tuple]:
    """(rc, stdout, stderr) of `inkctl plan ARGS` through the light path and through typer."""
    runner = ("import sys\nfrom inkctl.cli import app\n"
              "if sys.argv[1] == 'typer':\n    app._light = lambda args: None\n"
              "try:\n    app.main(sys.argv[2:])\n"
              "finally:\n    print('MODULES', 'typer' in sys.modules, 'click' in sys.modules, file=sys.stderr)")
    out = []
    for way in ("light", "typer"):
        r = subprocess.run([sys.executable, "-c", runner, way, "plan", *args], cwd=ROOT, capture_output=True, text=True)
        out.append((r.returncode, r.stdout, r.stderr))
    return out[0], out[1]


@pytest.mark.parametrize("args", [
    [RECIPE],
    [RECIPE, "--full", "--host", "spark-1"],
    ["-o", "json", RECIPE],
    ["examples/vllm-native-2node.yaml", "--hosts", "examples/hosts.yaml", "--set", "engine.args.port=8001"],
    [RECIPE, "--host", "nowhere"],
    ["tests/data/ten-mistakes.yaml"],
    ["no-such-file.yaml"],
    ["vllm-single-docker", "--output=xml"],
])
def test_the_light_path_prints_what_typer_prints(args):
    (rc, out, err), (trc, tout, terr) = _both_ways(args)
    assert (rc, out) == (trc, tout)
    assert err.replace("MODULES False False", "") == terr.replace("MODULES True False", "")
    assert "MODULES False False" in err  # neither typer nor click was imported
    assert out or err.strip()
    if "json" in args:
        assert json.loads(out)
