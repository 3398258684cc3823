"""`inkctl validate` without typer (cli/app.py's ``_light``): where its arguments need no parser
it runs straight from cli/validate.py; it reads them as typer does, prints what the typer path
prints, and imports neither typer nor click. The speed itself: benchmarks/startup.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inkctl.cli.validate import plain_arguments
from inkctl.cli.common.values import overrides

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = {"paths": None, "strict": False, "output": "text", "set_": None, "hosts": None}

PLAIN = [
    ["recipes/"],
    ["--strict", "recipes/"],
    ["recipes/", "--strict", "-o", "json"],
    ["-o", "json", "a.yaml", "b.yaml"],
    ["--output", "text", "a.yaml"],
    ["--output=json", "a.yaml"],
    ["--output=", "a.yaml"],
    ["-o", "xml", "a.yaml"],
    ["-o", "json", "-o", "text", "a.yaml", "--strict", "--strict"],
    ["", "a.yaml"],
    ["validate", "plan"],
]
NOT_PLAIN = [
    [],
    ["--strict"],
    ["--help"],
    ["-h", "a.yaml"],
    ["a.yaml", "--set", "engine.args.port=8001"],
    ["a.yaml", "--hosts", "hosts.yaml"],
    ["--", "a.yaml"],
    ["-", "a.yaml"],
    ["--stric", "a.yaml"],
    ["--strict=true", "a.yaml"],
    ["a.yaml", "-o"],
    ["a.yaml", "-o", "--strict"],
    ["-ojson", "a.yaml"],
]


def _typer_reads(args: list[str]) -> dict:
    """What typer hands the validate command for ARGS (its parser and its type coercion)."""
    import typer.main

    import inkctl.cli.commands  # noqa: F401  (registers validate)
    from inkctl.cli.app import app

    command = typer.main.get_command(app).commands["validate"]  # type: ignore[attr-defined]
    ctx = command.make_context("validate", list(args))
    return dict(ctx.params)


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_plain_arguments_read_as_typer_reads_them(args):
    light = plain_arguments(args)
    assert light is not None
    got = {**DEFAULTS, **light}
    typer_got = _typer_reads(args)
    typer_got["paths"] = list(typer_got["paths"])
    assert overrides(typer_got.pop("set_")) == overrides(got.pop("set_")) == []  # () from typer, None here: no --set
    assert typer_got == got


@pytest.mark.parametrize("args", NOT_PLAIN, ids=lambda a: " ".join(a) or "nothing")
def test_anything_else_goes_to_typer(args):
    assert plain_arguments(args) is None


def _both_ways(args: list[str]) -> tuple[tuple, tuple]:
    """(rc, stdout, stderr) of `inkctl validate ARGS` through the light path and through typer."""
    runner = ("import sys\nfrom inkctl.cli import app\n"
              "if sys.argv[1] == 'typer':\n    app._light = lambda args: None\n"
              "try:\n    app.main(sys.argv[2:])\n"
              "finally:\n    print('MODULES', 'typer' in sys.modules, 'click' in sys.modules, file=sys.stderr)")
    out = []
    for way in ("light", "typer"):
        r = subprocess.run([sys.executable, "-c", runner, way, "validate", *args], cwd=ROOT, capture_output=True, text=True)
        out.append((r.returncode, r.stdout, r.stderr))
    return out[0], out[1]


@pytest.mark.parametrize("args", [
    ["recipes/"],
    ["--strict", "recipes/", "examples/"],
    ["-o", "json", "tests/data/ten-mistakes.yaml", "recipes/"],
    ["--output=xml", "recipes/"],
    ["no-such-file.yaml"],
    ["vllm-single-docker"],
])
def test_the_light_path_prints_what_typer_prints(args):
    (rc, out, err), (trc, tout, terr) = _both_ways(args)
    assert (rc, out) == (trc, tout)
    assert err.replace("MODULES False False", "") == terr.replace("MODULES True False", "")
    assert "MODULES False False" in err  # neither typer nor click was imported
    assert out or err.strip()
    if "-o" in args:
        assert json.loads(out)["recipes"]


def test_help_and_hosts_still_go_through_typer():
    r = subprocess.run([sys.executable, "-m", "inkctl", "validate", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("Usage: inkctl validate [OPTIONS] PATHS...")
    r = subprocess.run([sys.executable, "-m", "inkctl", "validate"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "Missing argument" in r.stderr


def test_a_text_composed_once_is_read_anew_each_time(tmp_path):
    """validate reads a file up to three times; the second reading reuses the first's node tree
    (document._COMPOSED), yet every reading gets data and positions of its own, and a changed
    file is read as it is now."""
    from inkctl.recipe.reading import document

    p = tmp_path / "r.yaml"
    p.write_text("name: a\nengine:\n  args: [x, y]\n")
    first = document.parse(p, str(p))
    first.data["engine"]["args"].append("z")
    first.forget(("engine",))
    again = document.parse(p, str(p))
    assert again.data == {"name": "a", "engine": {"args": ["x", "y"]}}
    assert again.position("engine.args[1]") == (3, 13)
    p.write_text("name: b\nname: c\n")
    changed = document.parse(p, str(p))
    assert changed.data == {"name": "c"}
    assert [x.message for x in changed.problems] == ["duplicate key 'name' (first defined at line 1)"]


def test_a_closed_pipe_ends_both_paths_alike():
    """`inkctl validate -o json ... | head -1`: stdout closes while validate writes; typer's main
    (through click) exits 1 and says nothing; the light path does the same."""
    runner = ("import sys\nfrom inkctl.cli import app\n"
              "if sys.argv[1] == 'typer':\n    app._light = lambda args: None\n"
              "sys.argv[1:2] = []\napp.run()")
    got = []
    for way in ("light", "typer"):
        p = subprocess.Popen([sys.executable, "-c", runner, way, "validate", "-o", "json", "recipes/", "examples/"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stdout.close()  # type: ignore[union-attr]
        err = p.stderr.read()  # type: ignore[union-attr]
        got.append((p.wait(), err))
    assert got[0] == got[1] == (1, "")
