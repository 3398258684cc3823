"""Installed like any CLI: a wheel built from this tree, installed into a fresh venv, run from
another directory. The bundled recipes, examples, patches and reference must come with it.

No network: the wheel is built without build isolation (setuptools and wheel from this Python)
and installed with --no-deps --no-index into a venv that takes the dependencies from the
Python running the tests. Runs where venv, pip, setuptools and wheel are at hand; skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
pytestmark = pytest.mark.install


def _needs(*modules: str) -> None:
    import importlib.util

    for m in modules:
        if importlib.util.find_spec(m) is None:
            pytest.skip(f"needs {m} in this Python to build and install a wheel offline")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ of a fresh venv holding inkctl from a wheel of this tree."""
    _needs("pip", "setuptools", "wheel")
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"  # a copy: building in place would leave build/ in the checkout (and reuse a stale one)
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__",
                                                             ".venv", ".pytest_cache", ".hypothesis", "tests"))
    wheels = tmp / "wheels"
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    b = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(src)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert b.returncode == 0, b.stderr
    (whl,) = wheels.glob("inkctl-*.whl")
    venv.EnvBuilder(with_pip=False).create(tmp / "venv")
    bin_ = tmp / "venv" / "bin"
    # the dependencies (and pip) from the Python running the tests, which may itself be a venv:
    # its site directories as plain path entries (their .pth files, e.g. an editable inkctl, stay out)
    (site,) = (tmp / "venv" / "lib").glob("python3*/site-packages")
    outer = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    (site / "outer-site.pth").write_text("\n".join(sorted(outer)) + "\n")
    i = subprocess.run([str(bin_ / "python"), "-m", "pip", "install", "-q", "--no-deps", str(whl)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert i.returncode == 0, i.stderr
    return bin_


def run(bin_: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "INKCTL_UPDATE_GOLDEN")}
    env.update(COLUMNS="80", NO_COLOR="1")
    return subprocess.run([str(bin_ / "inkctl"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_the_wheel_lists_plans_and_inits_bundled_recipes(installed, tmp_path):
    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    r = run(installed, elsewhere, "recipes", "-o", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    venv_dir = installed.parent.resolve()
    assert rows and all(Path(row["path"]).resolve().is_relative_to(venv_dir) for row in rows), rows  # the wheel's copies
    names = [row["recipe"] for row in rows]
    assert "inkling-small-2x-dgx-spark-vllm" in names and "vllm-single-docker" in names
    assert "hosts" not in names and "hosts-one" not in names  # inventories are not recipes

    # every listed name plans, with or without .yaml, and the plan is the checkout's golden plan
    for row in rows:
        name = row["recipe"]
        p = run(installed, elsewhere, "plan", name, "-o", "json")
        assert p.returncode == 0, (name, p.stderr)
        doc = json.loads(p.stdout)
        doc.pop("warnings")
        kind = Path(row["path"]).parent.name
        golden = json.loads((GOLDEN / f"{kind}-{name}-placeholders.json").read_text())
        assert doc == golden, f"the installed plan of {name} differs from tests/golden"
    assert run(installed, elsewhere, "plan", names[0] + ".yaml").returncode == 0

    text = run(installed, elsewhere, "recipes")
    assert text.returncode == 0 and "inkling-small-2x-dgx-spark-vllm" in text.stdout, text.stderr
    assert max(len(ln) for ln in text.stdout.splitlines()) <= 80, text.stdout

    # the recipe reference comes along
    ref = installed.parent / "lib"
    assert list(ref.glob("python3*/site-packages/inkctl/share/docs/recipe-reference.md"))

    i = run(installed, elsewhere, "init", "inkling-small-2x-dgx-spark-vllm")
    assert i.returncode == 0, i.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["hosts.yaml", "inkling-small-2x-dgx-spark-vllm.yaml"]
    assert "inkctl plan inkling-small-2x-dgx-spark-vllm.yaml --hosts hosts.yaml" in i.stdout
    plan = run(installed, elsewhere, "plan", "inkling-small-2x-dgx-spark-vllm.yaml", "--hosts", "hosts.yaml")
    assert plan.returncode == 0, plan.stderr
    assert "gpu-0" in plan.stdout  # the inventory init wrote is what it planned for
    again = run(installed, elsewhere, "init", "inkling-small-2x-dgx-spark-vllm")
    assert again.returncode == 2 and "overwrites nothing" in " ".join(again.stderr.split())
