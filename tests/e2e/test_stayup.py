"""Stays up, or says so (issue 9): a host lost during the health wait with an engine that does
not notice, after boot under ``watch``, a rank dying after boot, ``watch --restart``, NCCL
falling back to sockets, secrets an engine echoes, and the GPU selection the engine process
really sees. Every assertion is about what happened on the hosts and what inkctl said.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from inkctl.execute.hosts.ssh import LOST_AFTER_S
from tests.cluster.proc import wait_for
from tests.e2e.conftest import containers, no_traceback, said
from tests.e2e.test_guard import Follow, follow, lock_dir, stand_in, state_dir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.cluster

# an engine that, like NCCL with its default timeout, does not notice a lost peer for minutes
DEAF = {"FAKE_PEER_TIMEOUT": "600"}


def events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(autouse=True)
def _no_locks_left(cluster):
    yield
    import shutil

    for h in cluster.hosts:
        for d in (Path(h.state_dir) / "locks").glob("e2e-*.lock"):
            shutil.rmtree(d, ignore_errors=True)


def test_a_host_cut_during_the_health_wait_fails_up_even_when_the_engine_does_not_notice(
        cluster, inkctl, follow, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-lost", smoke={"enabled": False},
                 container={"env": {**DEAF, "FAKE_READY_AFTER": "8"}})
    inv = inventory("h1", "h2")
    f = follow("up", rec, "--hosts", inv, "-o", "json")
    wait_for("the health wait", lambda: f.saw('"kind": "health"'), timeout=90)
    time.sleep(1)  # the fault: 1 s into the health wait (the head answers 200 some seconds later)
    cluster.cut("h2")
    cut_at = time.monotonic()
    try:
        rc = f.end(timeout=60)
        took = time.monotonic() - cut_at
    finally:
        cluster.heal("h2")
    ev = events("".join(f.out))
    done = [e for e in ev if e["event"] == "finished"]
    assert rc == 1 and done and done[-1]["ok"] is False, f.text  # never a success with a rank unverified
    msg = done[-1]["message"]
    assert re.search(r"h2: host lost[^\n]*\(rank 1\)", msg), msg
    assert "rank 0 (h1, inkctl-e2e-lost-r0): running" in msg, msg  # what the other rank did
    assert "rolled back: removed the deployment's containers and files on h1" in msg, msg
    assert "could NOT remove:\n  h2: inkctl-e2e-lost-r1" in msg and "and the deploy lock" in msg, msg
    assert f"inkctl down {rec} --hosts {inv}" in done[-1]["hint"], done[-1]
    # the loss is declared after LOST_AFTER_S; then h1's rollback (one SSH command) and the exit
    assert took < LOST_AFTER_S + 6, f"{took:.1f} s from the cut to the exit"
    assert no_traceback(f.text)
    assert containers(cluster, "h1", "e2e-lost") == [] and not lock_dir(cluster, "h1", "e2e-lost").exists()
    assert lock_dir(cluster, "h2", "e2e-lost").exists()  # as the message says
    # the host is back: the one command from the message finishes the clean-up (the lock's holder is gone)
    d = inkctl("down", rec, "--hosts", inv)
    assert d.rc == 0, d
    assert "took over a stale deploy lock" in d.out and f"(pid {f.p.pid})" in d.out, d
    assert containers(cluster, "h2", "e2e-lost") == [] and not state_dir(cluster, "h2", "e2e-lost").exists()
    assert not lock_dir(cluster, "h2", "e2e-lost").exists()


# ------------------------------------------------------------------------ NCCL transport truth

NO_IB_DEVICE = """#!/usr/bin/python3
# stand-in: this machine has no /dev/infiniband to hand to a container and forbids raising
# RLIMIT_MEMLOCK; everything else is real docker
import os, sys
a, out, i = sys.argv[1:], [], 0
while i < len(a):
    if i + 1 < len(a) and (a[i], a[i + 1]) in (("--device", "/dev/infiniband"), ("--ulimit", "memlock=-1:-1")):
        i += 2
        continue
    out.append(a[i])
    i += 1
os.execv({real!r}, [{real!r}] + out)
"""


def test_nccl_falling_back_to_sockets_where_rdma_was_asked_fails_up_naming_host_rank_and_interface(
        cluster, inkctl, inventory, recipe, stand_in):
    for h in ("h1", "h2"):
        stand_in(h, "docker", NO_IB_DEVICE.format(real=stand_in.real("docker")))
    rec = recipe("vllm-native-2", name="e2e-nccl", smoke={"enabled": False}, network={"rdma": True},
                 container={"env": {"FAKE_READY_AFTER": "3"}})
    inv = inventory("h1", "h2")
    r = inkctl("up", rec, "--hosts", inv, timeout=120)
    assert r.rc == 1, r
    assert re.search(r"rank [01] on h[12]: NCCL fell back to TCP sockets \(NET/Socket over eth0 \(10\.231\.\d+\.1[12]<0>\)\) "
                     r"where network\.rdma asked for RDMA \(NET/IB\); NCCL said: NET/IB : No device found\.", r.stderr), r
    assert "rolled back" in r.stderr and no_traceback(r.out), r
    assert containers(cluster, "h1", "e2e-nccl") == [] and containers(cluster, "h2", "e2e-nccl") == []
    # the engine really ran with NCCL_DEBUG=INFO (the plan sets it with rdma) and said it itself
    ok = inkctl("up", rec, "--hosts", inv, "--allow-socket-fallback", timeout=120)
    assert ok.rc == 0, ok
    assert "NCCL fell back to TCP sockets" in said(ok.out) and "allowed by --allow-socket-fallback" in said(ok.out), ok
    env = cluster.docker("h2", "exec", "inkctl-e2e-nccl-r1", "cat", "/proc/1/environ").stdout.split("\0")
    assert "NCCL_DEBUG=INFO" in env
    assert inkctl("down", rec, "--hosts", inv).rc == 0


# ------------------------------------------------------------------------ GPU selection

def _engine_env(cluster, host: str, container: str) -> dict:
    """The engine process's own environment (PID 1 in the container), not what inspect says."""
    raw = cluster.docker(host, "exec", container, "cat", "/proc/1/environ").stdout  # docker or podman, the host's
    return dict(kv.split("=", 1) for kv in raw.split("\0") if "=" in kv)


def test_the_inventorys_gpu_indices_reach_the_engine_process(cluster, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-gpusel", smoke={"enabled": False})
    inv = inventory("h1", h1={"gpus": "0"})
    r = inkctl("up", rec, "--hosts", inv, timeout=120)
    assert r.rc == 0, r
    assert _engine_env(cluster, "h1", "inkctl-e2e-gpusel-r0")["NVIDIA_VISIBLE_DEVICES"] == "0"
    assert inkctl("down", rec, "--hosts", inv).rc == 0
    pod = recipe("podman", name="e2e-gpusel-pod", smoke={"enabled": False})
    inv = inventory("h3", h3={"gpus": "5"})
    r = inkctl("up", pod, "--hosts", inv, timeout=120)
    assert r.rc == 0, r
    assert _engine_env(cluster, "h3", "inkctl-e2e-gpusel-pod-r0")["NVIDIA_VISIBLE_DEVICES"] == "5"
    assert inkctl("down", pod, "--hosts", inv).rc == 0


def test_nvidia_visible_devices_beside_gpus_is_refused_before_any_host_is_touched(inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-gpuenv", container={"env": {"NVIDIA_VISIBLE_DEVICES": "0,1"}})
    r = inkctl("up", rec, "--hosts", inventory("h1"))
    assert r.rc == 2 and "container.env.NVIDIA_VISIBLE_DEVICES" in r.stderr and "--gpus" in r.stderr, r
    assert "inventory" in r.stderr  # the hint says where GPU indices go


# ------------------------------------------------------------------------ secrets the engine echoes

SECRET = "hf_stayup_0123456789abcdef"


def test_a_secret_echoed_by_the_engine_never_shows_in_logs(cluster, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-echo", smoke={"enabled": False}, secrets={"HF_TOKEN": {"env": "HF_TOKEN"}},
                 container={"env": {"FAKE_LOG_ENV": "1"}})
    inv = inventory("h1")
    env = {"HF_TOKEN": SECRET}
    assert inkctl("up", rec, "--hosts", inv, env=env, timeout=120).rc == 0
    raw = cluster.docker("h1", "logs", "inkctl-e2e-echo-r0").stdout
    assert f"HF_TOKEN={SECRET}" in raw  # the engine really echoes it
    j = inkctl("logs", rec, "--hosts", inv, "-o", "json", env=env)
    assert j.rc == 0 and SECRET not in j.out, j
    assert any(json.loads(x)["line"].endswith("environment: HF_TOKEN=***") for x in j.stdout.splitlines()), j
    t = inkctl("logs", rec, "--hosts", inv, env=env)
    assert t.rc == 0 and SECRET not in t.out and "HF_TOKEN=***" in t.stdout, t
    p = inkctl.start("logs", "-f", rec, "--hosts", inv, env=env)
    f = Follow(p)
    wait_for("the echoed token", lambda: f.saw("HF_TOKEN=***"), timeout=30)
    p.send_signal(signal.SIGINT)
    f.end(timeout=30)
    assert SECRET not in f.text
    s = inkctl("status", rec, "--hosts", inv, "-o", "json", env=env)
    assert SECRET not in s.out
    assert inkctl("down", rec, "--hosts", inv).rc == 0


# ------------------------------------------------------------------------ after boot: watch

def _watch_events(f) -> list[dict]:
    return [json.loads(x) for x in "".join(f.out).splitlines() if x.startswith("{")]


def test_a_rank_that_dies_after_boot_is_reported_by_watch_with_the_hook_run(cluster, inkctl, follow, inventory, recipe,
                                                                          tmp_path):
    rec = recipe("vllm-native-2", name="e2e-wdie", smoke={"enabled": False})
    inv = inventory("h1", "h2")
    assert inkctl("up", rec, "--hosts", inv, timeout=120).rc == 0
    got = tmp_path / "event.json"
    f = follow("watch", rec, "--hosts", inv, "-o", "json", "--interval", "0.5",
               "--hook", f"sh -c 'printf %s \"$INKCTL_EVENT\" > {got}'")
    wait_for("watch to see every rank", lambda: f.saw('"event": "ok"'), timeout=60)
    killed = time.monotonic()
    cluster.docker("h2", "kill", "inkctl-e2e-wdie-r1", check=True)
    assert f.end(timeout=60) == 1, f.text
    took = time.monotonic() - killed
    fail = [e for e in _watch_events(f) if e["event"] == "failure"]
    assert fail and fail[0]["cause"] == "rank-exited" and fail[0]["host"] == "h2" and fail[0]["rank"] == 1, f.text
    assert "rank 1 on h2 (inkctl-e2e-wdie-r1) exited with code 137" in fail[0]["message"], fail
    assert re.search(r"rank 0 \(h1, inkctl-e2e-wdie-r0\): (running|exited with code 1)", fail[0]["message"]), fail
    assert json.loads(got.read_text())["cause"] == "rank-exited"  # the hook ran with the event
    assert took < 0.5 + 3.5, f"{took:.1f} s"  # the next 0.5 s poll, the hook, the exit (loaded machine)
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_a_host_cut_after_boot_is_declared_lost_by_watch(cluster, inkctl, follow, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-wcut", smoke={"enabled": False}, container={"env": DEAF})
    inv = inventory("h1", "h2")
    assert inkctl("up", rec, "--hosts", inv, timeout=120).rc == 0
    f = follow("watch", rec, "--hosts", inv, "-o", "json", "--interval", "0.5")
    wait_for("watch to see every rank", lambda: f.saw('"event": "ok"'), timeout=60)
    cluster.cut("h2")
    try:
        rc = f.end(timeout=60)
    finally:
        cluster.heal("h2")
    fail = [e for e in _watch_events(f) if e["event"] == "failure"]
    assert rc == 1 and fail and fail[0]["cause"] == "host-lost" and fail[0]["host"] == "h2", f.text
    assert "h2 lost (rank 1)" in fail[0]["message"] and "rank 0 (h1, inkctl-e2e-wcut-r0): running" in fail[0]["message"]
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_watch_restart_brings_the_deployment_back(cluster, inkctl, follow, inventory, recipe):
    rec = recipe("single", name="e2e-wrestart", smoke={"enabled": False})
    inv = inventory("h1")
    assert inkctl("up", rec, "--hosts", inv, timeout=120).rc == 0
    before = cluster.docker("h1", "inspect", "--format", "{{.Id}}", "inkctl-e2e-wrestart-r0").stdout.strip()
    f = follow("watch", rec, "--hosts", inv, "-o", "json", "--interval", "0.5", "--restart", "--backoff", "0")
    wait_for("watch to see every rank", lambda: f.saw('"event": "ok"'), timeout=60)
    cluster.docker("h1", "kill", "inkctl-e2e-wrestart-r0", check=True)
    wait_for("the restart", lambda: f.saw('"event": "restarted"'), timeout=120)
    wait_for("watching again", lambda: [e["event"] for e in _watch_events(f)].count("ok") >= 2, timeout=60)
    assert containers(cluster, "h1", "e2e-wrestart") == ["inkctl-e2e-wrestart-r0 running"]
    after = cluster.docker("h1", "inspect", "--format", "{{.Id}}", "inkctl-e2e-wrestart-r0").stdout.strip()
    assert after != before  # a new container: down, then up
    f.p.send_signal(signal.SIGINT)
    assert f.end(timeout=30) == 130, f.text
    assert containers(cluster, "h1", "e2e-wrestart") == ["inkctl-e2e-wrestart-r0 running"]  # left as it is
    assert inkctl("down", rec, "--hosts", inv).rc == 0


# ------------------------------------------------------------------------ up --watch

def test_up_watch_supervises_after_boot_and_reports_a_killed_rank(cluster, inkctl, follow, inventory, recipe, tmp_path):
    rec = recipe("single", name="e2e-upwatch", smoke={"enabled": False})
    inv = inventory("h1")
    got = tmp_path / "event.json"
    f = follow("up", rec, "--hosts", inv, "-o", "json", "--watch",
               "--hook", f"sh -c 'printf %s \"$INKCTL_EVENT\" > {got}'")
    wait_for("up, then watch", lambda: f.saw('"event": "ok"'), timeout=120)
    assert [e for e in _watch_events(f) if e.get("ok") is True], f.text  # up finished healthy first
    cluster.docker("h1", "kill", "inkctl-e2e-upwatch-r0", check=True)
    assert f.end(timeout=60) == 1, f.text
    fail = [e for e in _watch_events(f) if e.get("event") == "failure"]
    assert fail and fail[0]["cause"] == "rank-exited" and fail[0]["host"] == "h1" and fail[0]["rank"] == 0, f.text
    assert json.loads(got.read_text())["cause"] == "rank-exited"  # the hook ran with the event
    assert no_traceback(f.text), f.text
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_up_watch_restart_brings_it_back_and_ctrl_c_leaves_it_running(cluster, inkctl, follow, inventory, recipe):
    rec = recipe("single", name="e2e-upwrestart", smoke={"enabled": False})
    inv = inventory("h1")
    f = follow("up", rec, "--hosts", inv, "-o", "json", "--watch", "--restart")
    wait_for("up, then watch", lambda: f.saw('"event": "ok"'), timeout=120)
    before = cluster.docker("h1", "inspect", "--format", "{{.Id}}", "inkctl-e2e-upwrestart-r0").stdout.strip()
    cluster.docker("h1", "kill", "inkctl-e2e-upwrestart-r0", check=True)
    wait_for("the restart", lambda: f.saw('"event": "restarted"'), timeout=120)
    wait_for("watching again", lambda: [e.get("event") for e in _watch_events(f)].count("ok") >= 2, timeout=60)
    after = cluster.docker("h1", "inspect", "--format", "{{.Id}}", "inkctl-e2e-upwrestart-r0").stdout.strip()
    assert after and after != before  # a new container: down, then up
    f.p.send_signal(signal.SIGINT)
    assert f.end(timeout=30) == 130, f.text
    assert containers(cluster, "h1", "e2e-upwrestart") == ["inkctl-e2e-upwrestart-r0 running"]  # left running
    assert inkctl("down", rec, "--hosts", inv).rc == 0
