"""`inkctl validate` keeps its verdict on a recipe file (api/paper/validate_cache.py): a verdict found
again prints exactly what a fresh one prints, and anything it was made of that changes (the
file, the lock file, a hotfix source, a file read while loading, inkctl, Python, pydantic)
makes it a verdict that is not used. The speed itself: benchmarks/startup.py (cold and warm)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from inkctl.api.paper import validate_cache
from inkctl.api.paper.validate_cache import Cache, environment, reads_of, recording
from inkctl.errors import Problem

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ("import sys\nfrom inkctl.cli import app\n"
          "try:\n    app.main(sys.argv[1:])\n"
          "finally:\n    print('PYDANTIC', 'pydantic' in sys.modules, file=sys.stderr)")


def _validate(args: list[str], cache: Path | None, cwd: Path = ROOT) -> tuple[int, str, str, bool]:
    """(rc, stdout, stderr, whether pydantic was imported) of `inkctl validate ARGS`."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache or "/nonexistent"), INKCTL_VALIDATE_CACHE="1" if cache else "0",
               PYTHONPATH=str(ROOT), COLUMNS="400")
    r = subprocess.run([sys.executable, "-c", RUNNER, "validate", *args], cwd=cwd, capture_output=True, text=True, env=env)
    err, _, flag = r.stderr.rpartition("PYDANTIC ")
    return r.returncode, r.stdout, err, flag.strip() == "True"


@pytest.mark.parametrize("args", [
    ["recipes/", "tests/data/ten-mistakes.yaml"],
    ["--strict", "recipes/", "examples/"],  # examples/ has inventories: checked anew, not kept
    ["-o", "json", "tests/data/ten-mistakes.yaml", "recipes/"],
    ["--strict", "-o", "json", "vllm-single-docker"],
    ["--output=xml", "recipes/"],
])
def test_a_kept_verdict_prints_what_a_fresh_one_prints(tmp_path, args):
    fresh = _validate(args, None)
    first = _validate(args, tmp_path)  # made and kept
    again = _validate(args, tmp_path)  # found
    assert fresh[:3] == first[:3] == again[:3]
    assert fresh[0] in (0, 2) and (fresh[1] or fresh[2])
    if "examples/" not in args and "--output=xml" not in args:
        assert fresh[3] and first[3] and not again[3]  # found: no model was built
    assert bool(list((tmp_path / "inkctl" / "validate").glob("*.json"))) == ("--output=xml" not in args)


def _copy(tmp_path: Path, recipe: str) -> Path:
    d = tmp_path / "project"
    d.mkdir(exist_ok=True)
    return Path(shutil.copy(ROOT / recipe, d / "r.yaml"))


def _same_as_fresh(recipe: Path, cache: Path) -> tuple[int, str, str]:
    args = [str(recipe)]
    fresh, kept = _validate(args, None), _validate(args, cache)
    assert fresh[:3] == kept[:3]
    return fresh[:3]


def test_a_changed_recipe_is_validated_anew(tmp_path):
    cache = tmp_path / "cache"
    recipe = _copy(tmp_path, "examples/vllm-single-docker.yaml")
    text = recipe.read_text()
    ok = _same_as_fresh(recipe, cache)
    assert ok[0] == 0
    recipe.write_text(text.replace("gpus_per_host: 1", "gpus_per_host: 0"))
    bad = _same_as_fresh(recipe, cache)
    assert bad[0] == 2 and "hardware.gpus_per_host" in bad[1]
    recipe.write_text(text)
    assert _same_as_fresh(recipe, cache) == ok


def test_the_lock_file_and_hotfix_sources_are_looked_at_again(tmp_path):
    cache = tmp_path / "cache"
    recipe = _copy(tmp_path, "recipes/inkling-small-2x-dgx-spark-vllm.yaml")
    without = _same_as_fresh(recipe, cache)
    assert "hotfix-inkling-sm121-relattn.py is not in" in without[1]
    patches = recipe.parent / "patches"
    patches.mkdir()
    (patches / "hotfix-inkling-sm121-relattn.py").write_text("# one\n")
    with_file = _same_as_fresh(recipe, cache)
    assert with_file != without and "hotfix-inkling-sm121-relattn.py is not in" not in with_file[1]
    lock = recipe.with_name("r.lock.json")
    lock.write_text("not json")
    broken_lock = _same_as_fresh(recipe, cache)
    assert "not a readable lock file" in broken_lock[1]
    lock.unlink()
    (patches / "hotfix-inkling-sm121-relattn.py").unlink()
    assert _same_as_fresh(recipe, cache) == without


def test_a_verdict_is_kept_for_one_inkctl_python_and_pydantic(tmp_path, monkeypatch):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: a\n")
    verdict = ([Problem("bad", "name", str(recipe), 1, 1, code="INK101")], [])
    Cache(tmp_path / "c", env=["this"]).put(recipe, recipe.read_bytes(), {}, *verdict)
    assert Cache(tmp_path / "c", env=["this"]).get(recipe) == verdict
    assert Cache(tmp_path / "c", env=["another"]).get(recipe) is None
    monkeypatch.chdir(tmp_path / "c")
    assert Cache(tmp_path / "c", env=["this"]).get(recipe) is None  # another working directory

    before = environment()
    import inkctl

    monkeypatch.setattr(inkctl, "__version__", "0.0.0-other")
    assert environment() != before
    monkeypatch.undo()
    monkeypatch.setattr(sys, "version", sys.version + " (another build)")
    assert environment() != before
    monkeypatch.undo()
    # another pydantic: a library's distribution (its version) or its files
    site = tmp_path / "site"
    (site / "pydantic").mkdir(parents=True)
    (site / "pydantic" / "__init__.py").write_text("")
    (site / "pydantic-2.0.0.dist-info").mkdir()
    monkeypatch.setattr(validate_cache, "_package_dir", lambda name: site / name if name == "pydantic" else None)
    one = environment()
    (site / "pydantic-2.0.0.dist-info").rename(site / "pydantic-2.0.1.dist-info")
    two = environment()
    (site / "pydantic" / "__init__.py").write_text("VERSION = 3\n")
    three = environment()
    assert len({repr(one), repr(two), repr(three)}) == 3


def test_a_changed_inkctl_file_is_another_inkctl(tmp_path, monkeypatch):
    import inkctl

    fake = tmp_path / "inkctl"
    (fake / "recipe").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "recipe" / "model.py").write_text("A = 1\n")
    monkeypatch.setattr(inkctl, "__file__", str(fake / "__init__.py"))
    before = environment()
    (fake / "recipe" / "model.py").write_text("A = 22\n")
    assert environment() != before


def test_a_file_opened_while_loading_is_looked_at_again(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: a\n")
    other = tmp_path / "included.txt"
    other.write_text("one")
    opened: set[str] = set()
    with recording(opened):
        other.read_text()
    assert str(other) in opened
    reads = reads_of(recipe, opened, [tmp_path / "absent.lock.json"])
    assert reads == {str(other): validate_cache.file_state(other), str(tmp_path / "absent.lock.json"): "missing"}
    cache = Cache(tmp_path / "c", env=["this"])
    cache.put(recipe, recipe.read_bytes(), reads, [], [])
    assert cache.get(recipe) == ([], [])
    other.write_text("two")
    assert cache.get(recipe) is None
    other.write_text("one")
    (tmp_path / "absent.lock.json").write_text("{}")
    assert cache.get(recipe) is None


def test_off_and_unwritable(tmp_path, monkeypatch):
    monkeypatch.setenv("INKCTL_VALIDATE_CACHE", "0")
    assert validate_cache.open_cache() is None
    monkeypatch.setenv("INKCTL_VALIDATE_CACHE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert validate_cache.cache_dir() == tmp_path / "xdg" / "inkctl" / "validate"
    (tmp_path / "ro").write_text("a file where the directory should be")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("name: a\n")
    Cache(tmp_path / "ro" / "validate", env=[]).put(recipe, b"", {}, [], [])  # says nothing, keeps nothing
