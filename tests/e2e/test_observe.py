"""``inkctl doctor``, ``status`` and ``logs`` for real: the CLI as a subprocess against the test
cluster's hosts (sshd + dockerd/podman, nvidia-smi stand-ins: h1/h2 gb10, h3 h200x8 on podman,
h4 rtxpro6000x2). Assertions are about what the hosts really have and answer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from tests.cluster.proc import wait_for
from tests.e2e.conftest import ROOT, containers

pytestmark = pytest.mark.cluster
CHECKS = ["ssh", "runtime", "gpus", "gpu-free", "image", "argv", "paths", "ports", "memory", "fabric", "name"]


def checks(ran) -> dict[tuple[str, str], dict]:
    doc = json.loads(ran.stdout)
    return {(c["host"], c["check"]): c for c in doc["checks"]}


def up(inkctl, rec, inv):
    r = inkctl("up", rec, "--hosts", inv)
    assert r.rc == 0, r
    return r


# ------------------------------------------------------------------------------------ doctor

def test_doctor_all_pass_on_two_hosts(cluster, inkctl, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-doctor", container={"mounts": [{"source": "${HF_HOME}", "target": "/hf"}]})
    inv = inventory("h1", "h2")
    r = inkctl("doctor", rec, "--hosts", inv, "--output", "json")
    assert r.rc == 0, r
    got = checks(r)
    assert sorted(got) == sorted((h, c) for h in ("h1", "h2") for c in CHECKS + ["network"])  # multi-node: NCCL's NIC
    assert {c["status"] for c in got.values()} == {"ok"}, r
    assert got[("h1", "gpus")]["detail"].startswith("1x NVIDIA GB10, sm 12.1, unified memory: MemAvailable")
    assert got[("h1", "paths")]["detail"] == f"present: {cluster.host('h1').hf_dir}"
    assert got[("h2", "paths")]["detail"] == f"present: {cluster.host('h2').hf_dir}"
    assert got[("h1", "ports")]["detail"] == "free: 18000 (engine), 29611 (master)"
    assert got[("h1", "image")]["detail"].startswith("inkctl-fake-engine:latest present (sha256:")
    text = inkctl("doctor", rec, "--hosts", inv)
    assert text.rc == 0 and "ready: every check passed on 2 host(s)" in text.stdout, text
    assert containers(cluster, "h1") == [] and containers(cluster, "h2") == []  # doctor starts nothing


def test_doctor_podman_host_with_eight_h200(cluster, inkctl, inventory, recipe):
    rec = recipe("podman", name="e2e-doctor-podman", hardware={"gpus_per_host": 8}, engine={"args": {"tensor_parallel": 8}})
    r = inkctl("doctor", rec, "--hosts", inventory("h3"), "--output", "json")
    assert r.rc == 0, r
    got = checks(r)
    assert got[("h3", "runtime")]["detail"].startswith("podman ")
    assert got[("h3", "gpus")]["detail"] == "8x NVIDIA H200, sm 9.0, 140.4 GiB (139.8 free) each, driver 580.159.04"


def test_doctor_missing_image_fails_and_names_the_host(cluster, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-doctor-img", engine={"image": {"ref": "inkctl-fake-engine:not-built"}})
    r = inkctl("doctor", rec, "--hosts", inventory("h1"))
    assert r.rc == 1, r
    assert "inkctl-fake-engine:not-built is not on the host" in r.stdout
    assert "preflight failed on h1 (image)" in r.stderr
    up_ = inkctl("up", rec, "--hosts", inventory("h1"))  # and up launches nothing
    assert up_.rc == 1 and "preflight failed on h1 (image)" in up_.stderr, up_
    assert containers(cluster, "h1", "e2e-doctor-img") == []


@pytest.mark.parametrize("host,base", [("h2", "vllm-native-2"), ("h3", "podman")])
def test_doctor_runtime_down(cluster, inkctl, inventory, recipe, host, base):
    inv = inventory("h1", "h2") if host == "h2" else inventory("h3")
    rec = recipe(base, name=f"e2e-doctor-rt-{host}")
    cluster.stop_runtime(host)
    try:
        r = inkctl("doctor", rec, "--hosts", inv, "--output", "json")
    finally:
        cluster.start_runtime(host)
    assert r.rc == 1, r
    got = checks(r)
    rt = cluster.host(host).runtime
    assert got[(host, "runtime")]["status"] == "fail"
    assert got[(host, "runtime")]["detail"].startswith(f"{rt} is installed but not answering (runtime down): ")
    assert got[(host, "image")]["status"] == "not-run" and got[(host, "name")]["status"] == "not-run"
    assert got[(host, "gpus")]["status"] == "ok"  # what does not need the runtime is still reported
    if host == "h2":
        assert got[("h1", "runtime")]["status"] == "ok"
    assert f"preflight failed on {host} (runtime)" in r.stderr


def test_doctor_h200_recipe_on_a_gb10_host(cluster, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-doctor-cc",
                 hardware={"accelerator": "h200", "compute_capability": "9.0", "unified_memory": False})
    r = inkctl("doctor", rec, "--hosts", inventory("h1"))
    assert r.rc == 1, r
    assert "found compute capability 12.1 (NVIDIA GB10); the recipe needs 9.0 (h200)" in r.stdout
    assert "preflight failed on h1 (gpus)" in r.stderr
    waived = inkctl("doctor", rec, "--hosts", inventory("h1"), "--skip-check", "gpus")
    assert waived.rc == 0 and "skipped (--skip-check); would be: found compute capability 12.1" in waived.stdout, waived


def test_doctor_foreign_container_holding_the_name_and_port(cluster, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-doctor-name")
    name = "inkctl-e2e-doctor-name-r0"
    cluster.docker("h1", "run", "--detach", "--name", name, "--network", "host", "--entrypoint", "python3",
                   "inkctl-fake-engine:latest", "-m", "http.server", "18000", check=True)
    try:
        wait_for("the foreign server to listen on 18000", lambda: _listening(cluster, "h1", 18000), timeout=30)
        r = inkctl("doctor", rec, "--hosts", inventory("h1"), "--output", "json")
    finally:
        cluster.docker("h1", "rm", "--force", name)
    assert r.rc == 1, r
    got = checks(r)
    assert got[("h1", "name")]["detail"] == f"{name} is taken by another container (no inkctl label, running)"
    assert got[("h1", "ports")]["detail"] == "in use: 18000 (engine)"


def _listening(cluster, host: str, port: int) -> bool:
    text = cluster.exec(host, ["cat", "/proc/net/tcp", "/proc/net/tcp6"]).stdout
    return any(f.split()[3] == "0A" and f.split()[1].endswith(f":{port:04X}") for f in text.splitlines()[1:] if len(f.split()) > 3)


def test_doctor_unreachable_host(cluster, inkctl, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-doctor-cut")
    cluster.cut("h2")
    try:
        r = inkctl("doctor", rec, "--hosts", inventory("h1", "h2"), "--output", "json", timeout=90)
    finally:
        cluster.heal("h2")
    assert r.rc == 1, r
    got = checks(r)
    assert got[("h2", "ssh")]["status"] == "fail"
    assert any(w in got[("h2", "ssh")]["detail"] for w in ("unreachable", "timed out")), r
    assert all(got[("h1", c)]["status"] == "ok" for c in CHECKS)


# ------------------------------------------------------------------------------------ status

def test_status_of_a_running_deployment_then_a_dead_rank_then_a_cut_host(cluster, inkctl, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-status")
    inv = inventory("h1", "h2")
    up(inkctl, rec, inv)
    r = inkctl("status", rec, "--hosts", inv, "--output", "json")
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    plan = json.loads(inkctl("plan", rec, "--hosts", inv, "--output", "json").stdout)
    assert doc["ok"] is True and doc["recipe_hash"] == plan["recipe_hash"]
    assert doc["health"]["state"] == "up" and doc["health"]["url"] == f"http://{cluster.host('h1').address}:18000/health"
    ranks = {(x["host"], x["rank"]): x for x in doc["ranks"]}
    assert sorted(ranks) == [("h1", 0), ("h2", 1)]
    image_id = cluster.docker("h1", "image", "inspect", "--format", "{{.Id}}", "inkctl-fake-engine:latest").stdout.strip()
    for (_host, rank), x in ranks.items():
        assert x["container"] == f"inkctl-e2e-status-r{rank}" and x["state"] == "running"
        assert x["recipe_hash"] == plan["recipe_hash"] and x["hash_matches"] is True
        assert x["image"] == "inkctl-fake-engine:latest" and image_id.removeprefix("sha256:").startswith(x["image_id"])
        assert 0 <= x["uptime_s"] < 300
    assert ranks[("h1", 0)]["health"] == "up" and ranks[("h2", 1)]["health"] is None
    text = inkctl("status", rec, "--hosts", inv)
    assert text.rc == 0 and "inkctl-e2e-status-r1" in text.stdout and "current" in text.stdout, text

    # the recipe changed since: the running containers carry the old hash
    changed = inkctl("status", rec, "--hosts", inv, "--set", "smoke.max_tokens=4", "--output", "json")
    assert all(x["hash_matches"] is False and x["recipe_hash"] == plan["recipe_hash"] for x in json.loads(changed.stdout)["ranks"])

    cluster.docker("h2", "kill", "inkctl-e2e-status-r1", check=True)
    r = inkctl("status", rec, "--hosts", inv, "--output", "json")
    assert r.rc == 1, r
    ranks = {x["rank"]: x for x in json.loads(r.stdout)["ranks"]}
    assert ranks[1]["state"] == "exited" and ranks[1]["exit_code"] == 137
    assert "h2/1 exited (exit 137)" in r.stderr

    cluster.cut("h2")
    try:
        r = inkctl("status", rec, "--hosts", inv, "--output", "json", timeout=90)
    finally:
        cluster.heal("h2")
    assert r.rc == 1, r
    doc = json.loads(r.stdout)
    assert "h2" in doc["unreachable"] and {x["rank"]: x["state"] for x in doc["ranks"]}[1] == "unreachable"
    assert "unreachable: h2" in r.stderr


def test_status_of_nothing_deployed(cluster, inkctl, inventory, recipe):
    r = inkctl("status", recipe("single", name="e2e-status-none"), "--hosts", inventory("h1"), "--output", "json")
    assert r.rc == 1, r
    (rank,) = json.loads(r.stdout)["ranks"]
    assert rank["state"] == "missing" and rank["container"] == "inkctl-e2e-status-none-r0"


# -------------------------------------------------------------------------------------- logs

def test_logs_merged_prefixed_and_filtered(cluster, inkctl, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-logs")
    inv = inventory("h1", "h2")
    up(inkctl, rec, inv)
    for host, rank in (("h1", 0), ("h2", 1)):
        cluster.docker(host, "exec", f"inkctl-e2e-logs-r{rank}", "sh", "-c", f"echo marker-{host} > /proc/1/fd/1", check=True)
    r = inkctl("logs", rec, "--hosts", inv)
    assert r.rc == 0, r
    lines = r.stdout.splitlines()
    assert "h1/0 | marker-h1" in lines and "h2/1 | marker-h2" in lines
    assert all(ln.startswith(("h1/0 | ", "h2/1 | ")) for ln in lines)
    assert any("Headless node rank 1" in ln for ln in lines if ln.startswith("h2/1"))

    only = inkctl("logs", rec, "--hosts", inv, "--rank", "1", "--tail", "1", "--output", "json")
    assert only.rc == 0, only
    assert [json.loads(ln) for ln in only.stdout.splitlines()] == [{"host": "h2", "rank": 1, "line": "marker-h2"}]
    assert inkctl("logs", rec, "--hosts", inv, "--host", "h1", "--tail", "1").stdout == "h1/0 | marker-h1\n"
    future = inkctl("logs", rec, "--hosts", inv, "--since", "2099-01-01T00:00:00")
    assert future.rc == 0 and future.stdout == "", future
    bad = inkctl("logs", rec, "--hosts", inv, "--rank", "7")
    assert bad.rc == 2 and "this deployment has h1/0, h2/1" in bad.stderr


def test_logs_follow_both_hosts_until_sigint(cluster, inkctl, home, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-follow")
    inv = inventory("h1", "h2")
    up(inkctl, rec, inv)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSH_", "INKCTL_"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), NO_COLOR="1", PYTHONFAULTHANDLER="1")
    p = subprocess.Popen([sys.executable, "-m", "inkctl", "logs", str(rec), "--hosts", str(inv), "-f", "--tail", "1"],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(p.stdout), daemon=True)
    reader.start()
    try:
        # both streams attached: each host's last line arrived
        # bounds are generous (a busy machine); the assertions are on what arrived, never on how fast
        wait_for("a line from each host", lambda: {ln[:4] for ln in out} >= {"h1/0", "h2/1"}, timeout=120, on_timeout=lambda: f"got {out}")
        for host, rank in (("h2", 1), ("h1", 0)):
            cluster.docker(host, "exec", f"inkctl-e2e-follow-r{rank}", "sh", "-c", f"echo live-{host} > /proc/1/fd/1", check=True)
        wait_for("the new lines", lambda: {"h1/0 | live-h1\n", "h2/1 | live-h2\n"} <= set(out), timeout=120, on_timeout=lambda: f"got {out}")
        assert p.poll() is None  # still following
    finally:
        p.send_signal(signal.SIGINT)
        try:
            rc = p.wait(timeout=60)  # it stops within a second (tests/unit/test_logs_follow.py); this only bounds a hang
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGABRT)  # the fault handler prints where each thread was
            p.wait(timeout=10)
            raise AssertionError("logs -f did not end after SIGINT:\n" + p.stderr.read()[-16000:]) from None
    err = p.stderr.read()
    assert rc == 0, err
    assert "Traceback" not in err and "internal error" not in err
