"""The README as written: every shell block, run the way a new user runs it.

Each ```sh block in README.md carries a marker on the line before it (an HTML comment, which
renders as nothing):

- ``<!-- readme-test: run -->``: needs no hosts. Run here, in order, in one empty directory,
  with inkctl from a wheel of this tree in a fresh venv first on PATH, each block by ``sh -e``
  exactly as written. One failing command fails the test.
- ``<!-- readme-test: hosts -->``: needs hosts. Run on the test cluster (``-m cluster``), after
  the edit the README asks for: the user's hosts in hosts.yaml (here the cluster's), the recipe
  fitted to them (the cluster's GPUs and its engine image).
- ``<!-- readme-test: skip: WHY -->``: not run here, and why (it installs, or needs a checkout or
  a Kubernetes cluster).

A shell block without a marker fails the test: a new block is classified when it is written.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_install import installed  # noqa: F401  (the fixture: a wheel in a fresh venv)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARK = re.compile(r"<!--\s*readme-test:\s*(run|hosts|skip)\b\s*:?\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\w*)\s*$")


def blocks(text: str) -> list[tuple[int, str, str, str]]:
    """(line, kind, why, body) of every shell block; kind "" when unmarked."""
    lines = text.splitlines()
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        lang, start = m.group(1), i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if lang in ("sh", "bash", "shell", "console"):
            prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            mark = MARK.search(prev)
            out.append((start + 1, mark.group(1) if mark else "", mark.group(2) if mark else "",
                        "\n".join(lines[start + 1:j]) + "\n"))
        i = j + 1
    return out


def test_every_shell_block_is_marked():
    found = blocks(README.read_text())
    assert found, "no shell block found"
    unmarked = [line for line, kind, _, _ in found if not kind]
    assert not unmarked, f"README.md: shell blocks at lines {unmarked} carry no <!-- readme-test: ... --> marker"
    assert all(why for _, kind, why, _ in found if kind == "skip"), "a skipped block says why"
    assert any(kind == "run" for _, kind, _, _ in found) and any(kind == "hosts" for _, kind, _, _ in found)


def user_env(bin_: Path, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "INKCTL_UPDATE_GOLDEN", "COLUMNS")}
    env.update(PATH=f"{bin_}{os.pathsep}{env.get('PATH', '')}", HOME=str(home), NO_COLOR="1",
               HF_HUB_OFFLINE="1")
    return env


@pytest.mark.install
def test_the_blocks_that_need_no_hosts_run_as_written(installed, tmp_path):  # noqa: F811
    work, home = tmp_path / "empty", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = user_env(installed, home)
    ran = 0
    for line, kind, _, body in blocks(README.read_text()):
        if kind != "run":
            continue
        r = subprocess.run(["sh", "-e", "-c", body], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"README.md:{line}: the block failed (exit {r.returncode})\n{body}\n" \
                                  f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
        ran += 1
    assert ran >= 2


@pytest.mark.cluster
def test_the_blocks_that_need_hosts_run_on_the_test_cluster(installed, tmp_path, cluster, home):  # noqa: F811
    """As the README says: init (a run block), put your hosts in hosts.yaml and fit the recipe to
    them, then the hosts blocks as written."""
    work = tmp_path / "project"
    work.mkdir()
    env = user_env(installed, home)
    env["HF_TOKEN"] = "hf_readme_test_token_0123456789"
    found = blocks(README.read_text())
    for line, kind, _, body in found:  # the project the run blocks make
        if kind == "run":
            r = subprocess.run(["sh", "-e", "-c", body], cwd=work, env=env, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, f"README.md:{line}\n{r.stderr}"
    recipes = [p for p in work.glob("*.yaml") if p.name != "hosts.yaml"]
    assert len(recipes) == 1, recipes
    # the user's edit: their host (h1 here), the recipe fitted to its GPU and the image it has
    inv = yaml.safe_load(Path(cluster.inventory).read_text())["hosts"]
    (work / "hosts.yaml").write_text(yaml.safe_dump({"hosts": [inv[0]]}, sort_keys=False))
    doc = yaml.safe_load(recipes[0].read_text())
    doc["hardware"].update(accelerator="dgx-spark-gb10", compute_capability="12.1", unified_memory=True)
    doc["engine"]["image"] = {"ref": "inkctl-fake-engine:latest", "pull": False}
    doc["engine"]["args"]["port"] = 18000
    doc["health"] = {"timeout_s": 120, "interval_s": 0.5}
    recipes[0].write_text(yaml.safe_dump(doc, sort_keys=False))
    for m in doc.get("container", {}).get("mounts", []):  # the host side of each mount exists on a real host
        src = m["source"].replace("${HOME}", "/root")
        cluster.exec(inv[0]["name"], ["mkdir", "-p", src])
    try:
        for line, kind, _, body in found:
            if kind != "hosts":
                continue
            r = subprocess.run(["sh", "-e", "-c", body], cwd=work, env=env, capture_output=True, text=True,
                               timeout=600)
            assert r.returncode == 0, f"README.md:{line}: the block failed (exit {r.returncode})\n{body}\n" \
                                      f"--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-4000:]}"
            assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    finally:
        subprocess.run(["inkctl", "down", recipes[0].name, "--hosts", "hosts.yaml"], cwd=work, env=env,
                       capture_output=True, timeout=120)


@pytest.mark.install
def test_from_the_wheel_lock_names_the_copy_to_lock_not_site_packages(installed, tmp_path):  # noqa: F811
    home = tmp_path / "home"
    home.mkdir()
    env = user_env(installed, home)
    r = subprocess.run(["inkctl", "lock", "inkling-small-2x-dgx-spark-vllm", "--local"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    said = " ".join(r.stderr.replace(" \\\n", " ").split())  # as it reads, however it was folded
    assert "installed with inkctl" in said and "`inkctl init inkling-small-2x-dgx-spark-vllm` here" in said, r.stderr
    assert "site-packages" not in r.stderr.split("hint:", 1)[1]
    assert not list((installed.parent / "lib").glob("python3*/site-packages/inkctl/share/recipes/*.lock.json"))
