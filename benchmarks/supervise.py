#!/usr/bin/env python3
"""Supervision benchmark: how fast inkctl notices a lost host or a crashed rank, and how fast it
exits once it has decided, on the simulated cluster (two hosts, vLLM native, the fake engine).

Measured (median of --runs), each against its target and beside a named baseline from the
same run:

- lost host, under ``inkctl watch``: from ``ip link set ... down`` on the worker to watch's
  ``failure`` event. Target <= 5 s. Baseline, measured beside it in the same run: the loop a
  person writes, ``while ssh -o ConnectTimeout=5 -o ServerAliveInterval=1 h2 true; do sleep 0.5;
  done`` (OpenSSH, the same 0.5 s interval), from the cut to the loop ending. Also shown, as a
  reference and not a baseline: the engine noticing by itself (the head's container exiting on
  its peer timeout, FAKE_PEER_TIMEOUT=15 s; NCCL-like engines take minutes).
- lost host, during ``up``'s health wait (an engine that never notices): from the cut to the
  failed health step (the decision), and from the decision to the process's exit. Targets:
  decision <= 5 s after the cut, exit <= 5 s after the decision.
- crashed rank, under ``inkctl watch``: from ``docker kill`` of the worker's container to the
  failure event. Target <= 2 s. Baseline, measured beside it: ``while ssh h2 docker inspect -f
  '{{.State.Running}}' CONTAINER | grep -q true; do sleep 0.5; done``.

    python benchmarks/supervise.py [--runs 3] [--net-id 7] [--keep-cluster]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"lost host (watch)": 5.0, "lost host (up: decision)": 5.0, "up: decision to exit": 5.0,
           "crashed rank (watch)": 2.0}


class Proc:
    """A started inkctl whose stdout lines are timestamped as they arrive."""

    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  stdin=subprocess.DEVNULL)
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self.p.stderr.read, daemon=True).start()

    def _read(self):
        for line in iter(self.p.stdout.readline, ""):
            self.lines.append((time.monotonic(), line))

    def first(self, needle: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, line in list(self.lines):
                if needle in line:
                    return t
            if self.p.poll() is not None and not any(needle in x for _, x in self.lines):
                time.sleep(0.2)
                if not any(needle in x for _, x in self.lines):
                    raise RuntimeError(f"inkctl ended without {needle!r}:\n" + "".join(x for _, x in self.lines)[-3000:])
            time.sleep(0.02)
        raise RuntimeError(f"no {needle!r} within {timeout} s")

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()


def setup(cluster, work: Path, env_extra: dict) -> tuple[Path, Path, dict]:
    work.mkdir(parents=True, exist_ok=True)
    doc = yaml.safe_load((ROOT / "tests" / "e2e" / "recipes" / "vllm-native-2.yaml").read_text())
    doc["name"] = "bench-supervise"
    doc["smoke"] = {"enabled": False}
    doc["container"]["env"] = {k: str(v) for k, v in env_extra.items()}
    rec = work / "recipe.yaml"
    rec.write_text(yaml.safe_dump(doc))
    inv_doc = yaml.safe_load(Path(cluster.inventory).read_text())
    inv_doc["hosts"] = [h for h in inv_doc["hosts"] if h["name"] in ("h1", "h2")]
    inv = work / "hosts.yaml"
    inv.write_text(yaml.safe_dump(inv_doc))
    home = work / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / ".ssh" / "known_hosts").write_bytes(Path(cluster.known_hosts).read_bytes())
    cfg = []
    for h in cluster.hosts:
        cfg += [f"Host {h.name}", f"  HostName {h.address}", "  User root", f"  IdentityFile {cluster.identity_file}", ""]
    (home / ".ssh" / "config").write_text("\n".join(cfg))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSH_", "INKCTL_"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), NO_COLOR="1")
    return rec, inv, env


def inkctl(env, *args, timeout=180):
    return subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


class Loop:
    """The baseline: a shell loop over ssh from this machine, polling every 0.5 s; ``ended()`` is
    when it stopped (it noticed)."""

    def __init__(self, cluster, host: str, check: str):
        ssh = (f"ssh -F {cluster.ssh_config} -o BatchMode=yes -o ConnectTimeout=5 -o ServerAliveInterval=1 "
               f"-o ServerAliveCountMax=1 {host}")
        self.p = subprocess.Popen(["sh", "-c", f"while {ssh} {check}; do sleep 0.5; done"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.end: float | None = None
        threading.Thread(target=self._wait, daemon=True).start()

    def _wait(self) -> None:
        self.p.wait()
        self.end = time.monotonic()

    def running(self) -> bool:
        return self.p.poll() is None

    def ended(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while self.end is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.end is None:
            self.p.kill()
            return float("inf")
        return self.end

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.kill()


def up(env, rec, inv):
    r = inkctl(env, "up", rec, "--hosts", inv)
    if r.returncode != 0:
        raise RuntimeError(f"up failed:\n{r.stderr[-3000:]}")


def lost_host_watch(cluster, rec, inv, env) -> tuple[float, float, float]:
    """(watch's failure, the ssh loop's end, the head's own exit) after the cut, in seconds."""
    up(env, rec, inv)
    w = Proc([sys.executable, "-m", "inkctl", "watch", str(rec), "--hosts", str(inv), "-o", "json", "--interval", "0.5"], env)
    loop = Loop(cluster, "h2", "true")
    try:
        w.first('"event": "ok"', 60)
        time.sleep(1)
        if not loop.running():
            raise RuntimeError("the ssh loop ended before the cut: is h2 reachable over ssh?")
        cluster.cut("h2")
        cut = time.monotonic()
        found = w.first('"cause": "host-lost"', 60) - cut
        looped = loop.ended(60) - cut
        head_exit = None
        deadline = cut + 60
        while time.monotonic() < deadline:  # the baseline: the engine noticing by itself
            st = cluster.docker("h1", "inspect", "--format", "{{.State.Status}}", "inkctl-bench-supervise-r0").stdout.strip()
            if st != "running":
                head_exit = time.monotonic() - cut
                break
            time.sleep(0.1)
        return found, looped, head_exit if head_exit is not None else float("inf")
    finally:
        w.stop()
        loop.stop()
        cluster.heal("h2")
        inkctl(env, "down", rec, "--hosts", inv)


def lost_host_up(cluster, rec, inv, env) -> tuple[float, float]:
    """(cut -> the failed health step, that decision -> process exit)."""
    u = Proc([sys.executable, "-m", "inkctl", "up", str(rec), "--hosts", str(inv), "-o", "json"], env)
    try:
        u.first('"kind": "health"', 120)
        cluster.cut("h2")
        cut = time.monotonic()
        decided = u.first('"event": "step_failed"', 60)
        u.p.wait(timeout=60)
        ended = time.monotonic()
        return decided - cut, ended - decided
    finally:
        u.stop()
        cluster.heal("h2")
        inkctl(env, "down", rec, "--hosts", inv)


def crashed_rank_watch(cluster, rec, inv, env) -> tuple[float, float]:
    """(watch's failure, the ssh loop's end) after the kill, in seconds."""
    up(env, rec, inv)
    w = Proc([sys.executable, "-m", "inkctl", "watch", str(rec), "--hosts", str(inv), "-o", "json", "--interval", "0.5"], env)
    loop = Loop(cluster, "h2", "docker inspect -f '{{.State.Running}}' inkctl-bench-supervise-r1 | grep -q true")
    try:
        w.first('"event": "ok"', 60)
        time.sleep(1)
        if not loop.running():
            raise RuntimeError("the ssh loop ended before the kill: does it see the container running?")
        t0 = time.monotonic()
        cluster.docker("h2", "kill", "inkctl-bench-supervise-r1", check=True)
        killed = time.monotonic()
        at = (t0 + killed) / 2  # the kill lands somewhere inside its own round trip
        found = w.first('"cause": "rank-exited"', 60)
        return found - at, loop.ended(60) - at
    finally:
        w.stop()
        loop.stop()
        inkctl(env, "down", rec, "--hosts", inv)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--net-id", type=int, default=int(os.environ.get("INKCTL_E2E_NET_ID", "9")))
    ap.add_argument("--keep-cluster", action="store_true")
    a = ap.parse_args()
    from tests.cluster import Cluster

    cluster = Cluster.up(4, net_id=a.net_id)
    results: dict[str, list[float]] = {k: [] for k in TARGETS}
    loop_lost: list[float] = []
    loop_crash: list[float] = []
    engine: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="inkctl-bench-supervise-") as d:
            work = Path(d)
            noticing = setup(cluster, work / "a", {"FAKE_PEER_TIMEOUT": 15})  # the engine notices after 15 s
            deaf = setup(cluster, work / "b", {"FAKE_PEER_TIMEOUT": 600, "FAKE_READY_AFTER": 30})
            for i in range(a.runs):
                found, looped, head = lost_host_watch(cluster, *noticing)
                results["lost host (watch)"].append(found)
                loop_lost.append(looped)
                engine.append(head)
                decided, exited = lost_host_up(cluster, *deaf)
                results["lost host (up: decision)"].append(decided)
                results["up: decision to exit"].append(exited)
                found, looped = crashed_rank_watch(cluster, *noticing)
                results["crashed rank (watch)"].append(found)
                loop_crash.append(looped)
                print(f"run {i + 1}/{a.runs} done", file=sys.stderr)
    finally:
        if not a.keep_cluster:
            cluster.down()
    print(f"{'measure':28} {'median s':>9} {'max s':>7} {'target s':>9}  verdict")
    for k, xs in results.items():
        med = statistics.median(xs)
        print(f"{k:28} {med:9.2f} {max(xs):7.2f} {TARGETS[k]:9.1f}  {'ok' if max(xs) <= TARGETS[k] else 'MISSED'}")
    lost, crash = statistics.median(results["lost host (watch)"]), statistics.median(results["crashed rank (watch)"])
    base_lost, base_crash = statistics.median(loop_lost), statistics.median(loop_crash)
    print("baseline, measured in this run: an ssh polling loop (0.5 s interval, ConnectTimeout=5, ServerAliveInterval=1)")
    print(f"  lost host:    loop {base_lost:.2f} s, watch {lost:.2f} s = {lost / base_lost:.2f}x the loop")
    print(f"  crashed rank: loop {base_crash:.2f} s, watch {crash:.2f} s = {crash / base_crash:.2f}x the loop")
    print(f"reference: the engine noticing the lost host by itself (15 s peer timeout): {statistics.median(engine):.2f} s")


if __name__ == "__main__":
    main()
