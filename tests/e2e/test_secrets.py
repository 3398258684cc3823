"""Secrets never show: not on a remote command line during boot, not in anything inkctl
prints, not in any file it leaves behind; the container still gets the value."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cluster.proc import wait_for

pytestmark = pytest.mark.cluster

SECRET = "hf_s3cr3t-Value_that'must;never$(show)"


def _grep_tree(root: Path, needle: str) -> list[str]:
    hits = []
    for p in root.rglob("*"):
        try:
            if p.is_file() and needle.encode() in p.read_bytes():
                hits.append(str(p))
        except OSError:
            pass
    return hits


def test_secret_reaches_the_container_and_nothing_else(cluster, inkctl, inventory, recipe, tmp_path):
    r = recipe("single", name="e2e-secret", secrets={"HF_TOKEN": {"env": "HF_TOKEN"}},
               container={"env": {"FAKE_READY_AFTER": "4"}})
    inv = inventory("h1")
    env = {"HF_TOKEN": SECRET}
    printed = []

    proc = inkctl.start("up", r, "--hosts", inv, env=env)
    try:
        # during the boot, the host's process table never shows the value (argv of anything)
        def booting():
            out = cluster.exec("h1", ["docker", "ps", "--filter", "label=inkctl.deployment=e2e-secret", "-q"]).stdout
            return out.strip()
        wait_for("the boot to begin", booting, timeout=60)
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert SECRET not in ps
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    printed += [out, err]
    assert proc.returncode == 0, out + err

    state = Path(cluster.host("h1").state_dir) / "e2e-secret"
    env_file = state / "rank0.env"
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    assert env_file.read_text() == f"HF_TOKEN={SECRET}\n"

    # the engine sees the literal value
    dump = json.loads(cluster.docker("h1", "exec", "inkctl-e2e-secret-r0", "cat", "/tmp/inkctl-fake-engine.json").stdout)
    assert dump["env"]["HF_TOKEN"] == SECRET
    assert SECRET not in " ".join(dump["argv"])

    for args in (["plan", r, "--hosts", inv], ["plan", r, "--hosts", inv, "--output", "json"],
                 ["status", r, "--hosts", inv], ["status", r, "--hosts", inv, "--output", "json"],
                 ["logs", r, "--hosts", inv, "--tail", "200"], ["up", r, "--hosts", inv, "--output", "json"],
                 ["down", r, "--hosts", inv]):
        res = inkctl(*args, env=env)
        printed += [res.stdout, res.stderr]
    for text in printed:
        assert SECRET not in text
    assert any("HF_TOKEN=***" in t for t in printed)

    # down removed the env file; nothing inkctl left on the host or next to the recipe holds it
    assert not env_file.exists()
    assert _grep_tree(Path(cluster.host("h1").state_dir), SECRET) == []
    assert _grep_tree(tmp_path, SECRET) == []


def test_missing_secret_stops_before_anything_starts(cluster, inkctl, inventory, recipe):
    r = recipe("single", name="e2e-nosecret", secrets={"HF_TOKEN": {"env": "INKCTL_TEST_UNSET_TOKEN"}})
    res = inkctl("up", r, "--hosts", inventory("h1"))
    assert res.rc != 0
    assert "HF_TOKEN" in res.out and "INKCTL_TEST_UNSET_TOKEN" in res.out
    ps = cluster.docker("h1", "ps", "--all", "--filter", "label=inkctl.deployment=e2e-nosecret", "-q").stdout
    assert ps.strip() == ""
    assert os.environ.get("INKCTL_TEST_UNSET_TOKEN") is None
