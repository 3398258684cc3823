"""Guarded endpoints (issue 29): with ``api_key`` the engine answers only requests that carry the
key, ``up`` proves a request without it gets 401, smoke/bench/top and a router work through it,
and the value shows nowhere: not in ``ps`` on the host, not in logs, run records or exports."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.cluster.proc import wait_for

pytestmark = pytest.mark.cluster

KEY = "sk-e2e-guarded-3f9a1c77d2b84e06a5"
ENV = {"E2E_API_KEY_SRC": KEY}


def _status(url: str, key: str | None = None, model: str = "fake") -> int:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", data=body, headers={
        "content-type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _grep_tree(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def _guarded(recipe, base: str, name: str, **over):
    return recipe(base, name=name, secrets={"API_KEY": {"env": "E2E_API_KEY_SRC"}}, api_key="API_KEY", **over)


def _ps_never_shows_the_key(cluster, deployment: str) -> None:
    def booting():
        return cluster.exec("h1", ["docker", "ps", "--filter", f"label=inkctl.deployment={deployment}", "-q"]).stdout.strip()
    wait_for("the boot to begin", booting, timeout=60)
    assert KEY not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("base,hosts", [("single", ("h1",)), ("sglang-2", ("h1", "h2"))])
def test_up_guards_the_endpoint_and_the_key_shows_nowhere(cluster, inkctl, inventory, recipe, tmp_path, base, hosts):
    name = f"e2e-key-{base}"
    r = _guarded(recipe, base, name, container={"env": {"FAKE_READY_AFTER": "3"}})
    inv = inventory(*hosts)
    proc = inkctl.start("up", r, "--hosts", inv, env=ENV)
    try:
        _ps_never_shows_the_key(cluster, name)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    printed = [out, err]
    assert proc.returncode == 0, out + err
    assert "a request without it gets 401" in out + err
    url = f"http://{cluster.hosts[0].address}:18000"
    assert _status(url) == 401 and _status(url, "sk-wrong-key-000000") == 401
    assert _status(url, KEY) == 200
    # the engine's own command line: never the value (SGLang: only the config file's path)
    dump = json.loads(cluster.docker("h1", "exec", f"inkctl-{name}-r0", "cat", "/tmp/inkctl-fake-engine.json").stdout)
    assert KEY not in " ".join(dump["argv"])
    if base == "sglang-2":
        assert "--config" in dump["argv"] and "INKCTL_API_KEY" not in dump["env"]
    else:
        assert dump["env"]["VLLM_API_KEY"] == KEY

    for args in (["smoke", r, "--hosts", inv], ["bench", r, "--hosts", inv, "-c", "2", "-n", "4", "--output-len", "4",
                                                  "--input-len", "8", "--results-dir", tmp_path / "res"]):
        res = inkctl(*args, env=ENV, timeout=180)
        printed += [res.stdout, res.stderr]
        assert res.rc == 0, res
    # without the key in reach, smoke says which secret it could not read
    res = inkctl("smoke", r, "--hosts", inv)
    assert res.rc != 0 and "API_KEY" in res.out and "E2E_API_KEY_SRC" in res.out
    for args in (["plan", r, "--hosts", inv, "-o", "json"], ["status", r, "--hosts", inv],
                 ["logs", r, "--hosts", inv, "--tail", "200"], ["export", "k8s", r, "--hosts", inv],
                 ["export", "slurm", r], ["export", "systemd", r, "--hosts", inv]):
        res = inkctl(*args, env=ENV, timeout=120)
        printed += [res.stdout, res.stderr]
    for text in printed:
        assert KEY not in text
    d = inkctl("down", r, "--hosts", inv, env=ENV, timeout=120)
    assert d.rc == 0, d
    # the run records (HOME is under tmp_path), the bench results, the hosts' state: no value
    assert _grep_tree(tmp_path, KEY) == []
    for h in hosts:
        assert _grep_tree(Path(cluster.host(h).state_dir), KEY) == []

