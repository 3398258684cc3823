"""``inkctl up`` / ``inkctl down`` for real: the CLI as a subprocess, sshd + dockerd/podman hosts,
the fake engine image. Every assertion is about what is (or is not) on the hosts afterwards.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pytest

import signal

from tests.cluster.proc import wait_for
from tests.e2e.conftest import containers, finish

pytestmark = pytest.mark.cluster
PORT = 18000


def http(url: str) -> httpx.Response:
    return httpx.get(url, timeout=5, trust_env=False)


def address(cluster, name: str) -> str:
    return cluster.host(name).address


def state_dir(cluster, name: str, deployment: str) -> Path:
    return Path(cluster.host(name).state_dir) / deployment


def engine_argv(cluster, host: str, container: str) -> list[str]:
    """The argv the fake engine was started with (it records it in the container)."""
    r = cluster.docker(host, "exec", container, "cat", "/tmp/inkctl-fake-engine.json", check=True)
    return json.loads(r.stdout)["argv"]


def test_single_host_up_healthy_twice_down(cluster, inkctl, inventory, recipe):
    inv = inventory("h1")
    rec = recipe("single", secrets={"HF_TOKEN": {"env": "E2E_TOKEN"}})
    token = "hf_e2e_" + os.urandom(6).hex()
    r = inkctl("up", rec, "--hosts", inv, env={"E2E_TOKEN": token})
    assert r.rc == 0, r
    url = f"http://{address(cluster, 'h1')}:{PORT}"
    assert f"e2e-single is up: {url}" in r.stdout and "smoke: 1/1 checks passed" in r.stdout
    assert containers(cluster, "h1", "e2e-single") == ["inkctl-e2e-single-r0 running"]
    assert http(url + "/health").status_code == 200
    assert http(url + "/v1/models").json()["data"][0]["id"] == "fake"
    # the secret: in a 0600 env file and the container's env, never on a command line or in output
    env_file = state_dir(cluster, "h1", "e2e-single") / "rank0.env"
    assert env_file.read_text() == f"HF_TOKEN={token}\n" and oct(env_file.stat().st_mode & 0o777) == "0o600"
    args = cluster.docker("h1", "inspect", "--format", "{{.Path}} {{json .Args}}", "inkctl-e2e-single-r0").stdout
    assert token not in args and token not in r.out
    assert cluster.docker("h1", "exec", "inkctl-e2e-single-r0", "printenv", "HF_TOKEN").stdout.strip() == token

    again = inkctl("up", rec, "--hosts", inv, env={"E2E_TOKEN": token})
    assert again.rc == 0 and "already up" in again.stdout, again
    assert containers(cluster, "h1", "e2e-single") == ["inkctl-e2e-single-r0 running"]  # no duplicate

    d = inkctl("down", rec, "--hosts", inv)
    assert d.rc == 0, d
    assert containers(cluster, "h1", "e2e-single") == []
    assert not state_dir(cluster, "h1", "e2e-single").exists()
    with pytest.raises(httpx.ConnectError):
        http(url + "/health")
    d2 = inkctl("down", rec, "--hosts", inv)  # idempotent
    assert d2.rc == 0 and "nothing to remove" in d2.stdout, d2


def test_up_refuses_the_same_version_left_stopped(cluster, inkctl, inventory, recipe):
    # (another version is replaced: tests/e2e/test_guard.py)
    inv = inventory("h1")
    rec = recipe("single", name="e2e-twice")
    assert inkctl("up", rec, "--hosts", inv).rc == 0
    cluster.docker("h1", "stop", "--time", "1", "inkctl-e2e-twice-r0", check=True)
    r = inkctl("up", rec, "--hosts", inv)
    assert r.rc == 1 and "already has containers" in r.stderr and "nothing was changed" in r.stderr, r
    assert containers(cluster, "h1", "e2e-twice") == ["inkctl-e2e-twice-r0 exited"]  # untouched, not rolled back


@pytest.mark.parametrize("base,name,worker_flag", [
    ("vllm-native-2", "e2e-vllm-native", "--headless"),
    ("vllm-ray-2", "e2e-vllm-ray", None),
    ("sglang-2", "e2e-sglang", "--dist-init-addr"),
])
def test_two_hosts(cluster, inkctl, inventory, base, name, worker_flag):
    inv = inventory("h1", "h2")
    rec = Path(__file__).parent / "recipes" / f"{base}.yaml"
    r = inkctl("up", rec, "--hosts", inv, "--output", "json")
    assert r.rc == 0, r
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert events[-1]["event"] == "finished" and events[-1]["ok"] is True
    stages = [e["name"] for e in events if e["event"] == "stage_started"]
    # unified memory (the GB10 hosts): the page cache is dropped everywhere first, and up says how much it freed
    assert stages.pop(0) == "page-cache"
    freed = sorted(e["text"] for e in events if e["event"] == "info" and "page cache" in e["text"])
    assert [t.split(":")[0] for t in freed] == ["h1", "h2"] and all("freed" in t and "MemAvailable" in t for t in freed), freed
    checks = {(c["host"], c["check"]): c for e in events if e["event"] == "preflight" for c in e["checks"]}
    assert checks[("h2", "network")]["status"] == "ok" and checks[("h2", "network")]["detail"] == "eth0 up"
    if base == "vllm-ray-2":
        assert stages[0] == "ray-head" and stages.index("health") > 3  # Ray keeps its order
    else:
        assert stages[:2] == ["launch", "health"]  # every rank at once: the workers retry until the head answers
    assert containers(cluster, "h1", name) == [f"inkctl-{name}-r0 running"]
    assert containers(cluster, "h2", name) == [f"inkctl-{name}-r1 running"]
    head = address(cluster, "h1")
    assert http(f"http://{head}:{PORT}/health").status_code == 200
    if worker_flag:
        assert worker_flag in engine_argv(cluster, "h2", f"inkctl-{name}-r1")
    runs = [e for e in events if e["event"] == "step_started" and e["kind"] == "run"]
    assert sorted(e["host"] for e in runs) == ["h1", "h2"] or base == "vllm-ray-2"  # one remote command per rank
    assert inkctl("down", rec, "--hosts", inv).rc == 0
    assert containers(cluster, "h1", name) == [] and containers(cluster, "h2", name) == []


def test_podman_host(cluster, inkctl, inventory):
    inv = inventory("h3")
    rec = Path(__file__).parent / "recipes" / "podman.yaml"
    r = inkctl("up", rec, "--hosts", inv)
    assert r.rc == 0, r
    assert containers(cluster, "h3", "e2e-podman") == ["inkctl-e2e-podman-r0 running"]
    assert http(f"http://{address(cluster, 'h3')}:{PORT}/health").status_code == 200
    assert inkctl("down", rec, "--hosts", inv).rc == 0
    assert containers(cluster, "h3", "e2e-podman") == []


def test_wrong_nccl_interface_and_missing_rdma_adapter_stop_up_before_anything_starts(cluster, inkctl, inventory):
    # the test hosts have eth0 and lo, and no /sys/class/infiniband
    inv = inventory("h1", "h2", h2={"nccl_socket_ifname": "enp1s0f1np1", "ib_hca": ["rocep1s0f1"]})
    rec = Path(__file__).parent / "recipes" / "vllm-native-2.yaml"
    r = inkctl("up", rec, "--hosts", inv, "--output", "json", timeout=90)
    assert r.rc == 1, r
    checks = {(c["host"], c["check"]): c for line in r.stdout.splitlines() if line.startswith("{")
              for e in [json.loads(line)] if e["event"] == "preflight" for c in e["checks"]}
    assert checks[("h1", "network")]["status"] == "ok"
    bad = checks[("h2", "network")]
    assert bad["status"] == "fail"
    assert bad["detail"] == "interface enp1s0f1np1 (NCCL_SOCKET_IFNAME) does not exist on h2; it has: eth0 (up), lo (up)"
    assert containers(cluster, "h1", "e2e-vllm-native") == [] and containers(cluster, "h2", "e2e-vllm-native") == []
    # with the interface right, the missing adapter is what stops it
    inv = inventory("h1", "h2", h2={"ib_hca": ["rocep1s0f1"]})
    r = inkctl("up", rec, "--hosts", inv, timeout=90)
    assert r.rc == 1 and "h2 (network)" in r.stderr, r
    assert "RDMA adapter rocep1s0f1 (NCCL_IB_HCA) not in /sys/class/infiniband on h2" in r.out, r


def test_host_cut_off_before_launch_starts_nothing_anywhere(cluster, inkctl, inventory):
    inv = inventory("h1", "h2")
    rec = Path(__file__).parent / "recipes" / "vllm-native-2.yaml"
    cluster.cut("h2")
    try:
        r = inkctl("up", rec, "--hosts", inv, timeout=90)
    finally:
        cluster.heal("h2")
    assert r.rc == 1, r
    assert "h2:" in r.stderr and "nothing was started on any host" in r.stderr
    assert any(w in r.stderr for w in ("unreachable", "timed out")), r
    assert containers(cluster, "h1", "e2e-vllm-native") == []
    assert not state_dir(cluster, "h1", "e2e-vllm-native").exists()


def test_rank_crashing_during_boot_is_reported_and_everything_removed(cluster, inkctl, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-crash", container={"env": {
        "FAKE_READY_AFTER": "20", "FAKE_CRASH_AFTER": "${CRASH_AFTER}", "FAKE_EXIT_CODE": "3", "FAKE_LOG_EVERY": "0.5"}})
    inv = inventory("h1", "h2", vars={"h1": {"CRASH_AFTER": "-1"}, "h2": {"CRASH_AFTER": "1.5"}})
    t0 = time.monotonic()
    r = inkctl("up", rec, "--hosts", inv)
    assert r.rc == 1, r
    # noticed long before the 60 s health timeout (preflight, the argv proof included, comes first)
    assert time.monotonic() - t0 < 30
    err = r.stderr
    assert "rank 1 on h2 (container inkctl-e2e-crash-r1) exited with code 3" in err, err
    assert "CUDA error: an illegal memory access" in err, err  # its own log lines
    assert "rolled back" in err, err
    for h in ("h1", "h2"):
        assert containers(cluster, h, "e2e-crash") == []
        assert not state_dir(cluster, h, "e2e-crash").exists()


def test_health_timeout_rolls_back(cluster, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-slow", container={"env": {"FAKE_READY_AFTER": "60"}})
    inv = inventory("h1")
    r = inkctl("up", rec, "--hosts", inv, "--timeout", "3")
    assert r.rc == 1, r
    assert f"timed out after 3 s waiting for http://{address(cluster, 'h1')}:{PORT}/health" in r.stderr
    assert "rolled back" in r.stderr
    assert containers(cluster, "h1", "e2e-slow") == []


def test_keep_on_failure_leaves_the_containers_and_down_removes_them(cluster, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-keep", container={"env": {"FAKE_CRASH_AFTER": "0.5", "FAKE_READY_AFTER": "30"}})
    inv = inventory("h1")
    r = inkctl("up", rec, "--hosts", inv, "--keep-on-failure")
    assert r.rc == 1 and "--keep-on-failure" in r.stderr and "h1: inkctl-e2e-keep-r0" in r.stderr, r
    assert containers(cluster, "h1", "e2e-keep") == ["inkctl-e2e-keep-r0 exited"]
    assert inkctl("down", rec, "--hosts", inv).rc == 0
    assert containers(cluster, "h1", "e2e-keep") == []


def test_down_with_a_host_unreachable_cleans_the_others_and_fails(cluster, inkctl, inventory):
    inv = inventory("h1", "h2")
    rec = Path(__file__).parent / "recipes" / "vllm-native-2.yaml"
    assert inkctl("up", rec, "--hosts", inv).rc == 0
    cluster.cut("h2")
    try:
        r = inkctl("down", rec, "--hosts", inv, timeout=90)
    finally:
        cluster.heal("h2")
    print("down with h2 cut:", r.seconds)
    assert r.rc == 1 and "h2:" in r.stderr and "could not clean 1 host" in r.stderr, r
    assert containers(cluster, "h1", "e2e-vllm-native") == []
    assert inkctl("down", rec, "--hosts", inv).rc == 0  # once h2 is back, down finishes the job
    assert containers(cluster, "h2", "e2e-vllm-native") == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_during_boot_rolls_back_everywhere_and_releases_the_lock(cluster, inkctl, inventory, recipe, sig):
    rec = recipe("vllm-native-2", name="e2e-interrupt", container={"env": {"FAKE_READY_AFTER": "60", "FAKE_LOG_EVERY": "1"}})
    inv = inventory("h1", "h2")
    p = inkctl.start("up", rec, "--hosts", inv, env={"PYTHONFAULTHANDLER": "1"})
    try:
        def booting():
            if p.poll() is not None:
                raise AssertionError(f"up ended before the signal: rc={p.returncode}\n{p.stderr.read()}")
            return containers(cluster, "h2", "e2e-interrupt") == ["inkctl-e2e-interrupt-r1 running"]

        wait_for("the boot to begin", booting, timeout=30)
        p.send_signal(sig)
        out, err = finish(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "interrupted" in err and "rolled back" in err
    for h in ("h1", "h2"):
        assert containers(cluster, h, "e2e-interrupt") == []
        locks = Path(cluster.host(h).state_dir) / "locks" / "e2e-interrupt.lock"
        assert not locks.exists()
