#!/usr/bin/env python3
"""A fleet at scale on simulated hosts: 2 and 8 replicas of 8 hosts (16 and 64 hosts) behind the
real sglang-router, ``inkctl up`` against two baselines in the same run, as benchmarks/launch.py does:

- floor: no ssh at all: ``docker -H unix://<host's daemon> run ...`` of every container (every
  rank of every replica, and the router) at once from this machine, then a poll (every 10 ms)
  of every replica head's health URL and the router's;
- ssh loop: one ``ssh HOST docker run ...`` per container, all in parallel (OpenSSH), then the
  same poll;
- inkctl: ``python -m inkctl up RECIPE --hosts INV -o json``, process start to exit (connect,
  probe + deploy lock + preflight per replica, launch, health, one streamed completion per
  replica and one through the router).

The same ``docker run`` argv per container in every method (from inkctl's fleet plan); the fake
engine is ready at once, so what is measured is the orchestration. While inkctl runs, its
process is sampled every 20 ms: peak RSS (VmHWM), threads and open file descriptors; per host
and the marginal cost of a host (16 -> 64). At the largest size: ``status``, ``top``, requests
through the router, and ``down``, timed; nothing may be left.

Target (issue 20): inkctl's time grows at most 3x from 16 to 64 hosts.

Heavy on a shared machine (64 dockerds): run it once.

    python benchmarks/fleet_scale.py [--sizes 16 64] [--runs 2] [--net-id 5] [--keep-cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PORT, ROUTER_PORT, PROM_PORT, NODES = 18300, 30380, 29300, 8


def recipe_text(replicas: int) -> str:
    return f"""name: bench-fleet-scale
model: {{repo: test/fake-model, served_name: fake}}
hardware: {{accelerator: h200, compute_capability: "9.0", nodes: {NODES}, gpus_per_host: 1}}
engine:
  kind: vllm
  version: fake
  image: {{ref: "inkctl-fake-engine:latest", pull: false}}
  multinode: native
  master_port: 29811
  args: {{tensor_parallel: {NODES}, port: {PORT}}}
container: {{runtime: docker, gpus: all, ipc: host, network: host}}
health: {{timeout_s: 300, interval_s: 2}}
smoke: {{enabled: false}}
fleet:
  replicas: {replicas}
  router: {{kind: sglang, policy: round_robin, port: {ROUTER_PORT}, prometheus_port: {PROM_PORT}}}
"""


def wait_all(urls: list[str], timeout: float = 300.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    todo = list(urls)
    with httpx.Client(trust_env=False, timeout=2) as c:
        while todo and time.monotonic() < deadline:
            try:
                if c.get(todo[0]).status_code == 200:
                    todo.pop(0)
                    continue
            except httpx.HTTPError:
                pass
            time.sleep(0.01)
    if todo:
        raise RuntimeError(f"not healthy after {timeout} s: {todo[:3]}")


class Sampler:
    """Peak RSS, threads and fds of a process, read from /proc every 20 ms."""

    def __init__(self, pid: int):
        self.pid, self.rss_kib, self.threads, self.fds = pid, 0, 0, 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.rss_kib = max(self.rss_kib, int(line.split()[1]))
                    elif line.startswith("Threads:"):
                        self.threads = max(self.threads, int(line.split()[1]))
                self.fds = max(self.fds, len(os.listdir(f"/proc/{self.pid}/fd")))
            except (OSError, ValueError):
                pass
            time.sleep(0.02)

    def done(self) -> None:
        self.stop.set()
        self.t.join(1)


class Case:
    def __init__(self, cluster, n: int, work: Path):
        import yaml

        from inkctl.plan.replicas.fleet import build_fleet
        from inkctl.plan.step import Run
        from inkctl.recipe.hosts import Host
        from inkctl.recipe.model import Recipe

        self.cluster, self.n, self.work = cluster, n, work
        self.names = [f"h{i}" for i in range(1, n + 1)]
        inv = yaml.safe_load(Path(cluster.inventory).read_text())["hosts"][:n]
        self.inventory = work / f"inventory-{n}.yaml"
        self.inventory.write_text(yaml.safe_dump({"hosts": inv}))
        self.recipe = work / f"bench-fleet-{n}.yaml"
        self.recipe.write_text(recipe_text(n // NODES))
        fleet = build_fleet(Recipe.model_validate(yaml.safe_load(self.recipe.read_text())), [Host(**h) for h in inv])
        self.starts = [(s.host, s.argv) for p in fleet.plans for s in p.steps() if isinstance(s, Run) and s.container]
        self.urls = [rep.plan.health_url for rep in fleet.replicas] + [fleet.router.health_url]
        self.router_url = fleet.url
        self.home = work / "home"
        (self.home / ".ssh").mkdir(parents=True, exist_ok=True)
        (self.home / ".ssh" / "known_hosts").write_text(Path(cluster.known_hosts).read_text())
        self.samples: list[Sampler] = []

    def env(self) -> dict:
        env = dict(os.environ, HOME=str(self.home), PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(self.work / "pyc"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def run_inkctl(self, *args, timeout=600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], env=self.env(), capture_output=True,
                              text=True, cwd=ROOT, timeout=timeout)

    def inkctl(self) -> float:
        import resource

        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "inkctl", "up", str(self.recipe), "--hosts", str(self.inventory),
                              "-o", "json"], env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        s = Sampler(p.pid)
        out, err = p.communicate(timeout=600)
        dt = time.monotonic() - t0
        s.done()
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode:
            raise RuntimeError(f"inkctl up failed:\n{out[-3000:]}\n{err[-3000:]}")
        s.cpu_s = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
        self.samples.append(s)
        return dt

    def floor(self) -> float:
        t0 = time.monotonic()
        procs = [subprocess.Popen(["docker", "-H", f"unix://{self.cluster.host(h).socket}", *argv[1:]],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for h, argv in self.starts]
        for p in procs:
            if p.wait():
                raise RuntimeError(f"floor failed: {p.stderr.read().decode()}")
        wait_all(self.urls)
        return time.monotonic() - t0

    def ssh_loop(self) -> float:
        t0 = time.monotonic()
        procs = [subprocess.Popen(["ssh", "-F", self.cluster.ssh_config, h, "--", shlex.join(argv)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for h, argv in self.starts]
        for p in procs:
            if p.wait():
                raise RuntimeError(f"ssh loop failed: {p.stderr.read().decode()}")
        wait_all(self.urls)
        return time.monotonic() - t0


def clean(cluster, names: list[str]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(h):
        ids = cluster.docker(h, "ps", "-aq", "--filter", "label=inkctl.deployment").stdout.split()
        if ids:
            cluster.docker(h, "rm", "-f", *ids)
        st = Path(cluster.host(h).state_dir)
        cluster.exec(h, ["sh", "-c", f"rm -rf {shlex.quote(str(st))}/bench-fleet-scale* {shlex.quote(str(st))}/locks/bench-fleet-scale*"])

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(one, names))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--net-id", type=int, default=int(os.environ.get("INKCTL_TEST_NET_ID", "5")))
    ap.add_argument("--keep-cluster", action="store_true")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("benchmarks/fleet_scale.py needs root (it starts the test cluster)")
    from tests.cluster import Cluster, router_image

    n_max = max(args.sizes)
    t0 = time.monotonic()
    cluster = Cluster.up(n_max, podman_hosts=(), profiles={f"h{i}": "h200x8" for i in range(1, n_max + 1)},
                         net_id=args.net_id)
    router_image.load(cluster, ["h1"])
    print(f"cluster of {n_max} hosts up in {time.monotonic() - t0:.0f} s", flush=True)
    methods = ("floor", "ssh_loop", "inkctl")
    res: dict[int, dict[str, list[float]]] = {}
    use: dict[int, tuple[int, int, int]] = {}
    extra: dict[str, float | str] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="inkctl-bench-scale-") as tmp:
            for n in args.sizes:
                case = Case(cluster, n, Path(tmp))
                clean(cluster, case.names)
                case.inkctl()  # warm: .pyc files, page cache
                case.samples.clear()
                res[n] = {m: [] for m in methods}
                for r in range(args.runs):
                    for m in methods:
                        clean(cluster, case.names)
                        res[n][m].append(getattr(case, m)())
                        print(f"  {n:2d} hosts  run {r + 1}  {m:8s} {res[n][m][-1]:6.2f} s", flush=True)
                use[n] = (max(s.rss_kib for s in case.samples), max(s.threads for s in case.samples),
                          max(s.fds for s in case.samples), statistics.median(s.cpu_s for s in case.samples))
                if n == n_max:  # the fleet as a user sees it: up (again), status, top, requests, down
                    clean(cluster, case.names)
                    case.inkctl()
                    t = time.monotonic()
                    st = case.run_inkctl("status", case.recipe, "--hosts", case.inventory, "-o", "json")
                    extra["status_s"] = time.monotonic() - t
                    doc = json.loads(st.stdout)
                    extra["status"] = f"{sum(g['ok'] for g in doc['groups'])}/{len(doc['groups'])} groups up"
                    t = time.monotonic()
                    top = case.run_inkctl("top", case.recipe, "--hosts", case.inventory, "-n", "1", "-o", "json")
                    extra["top_s"] = time.monotonic() - t
                    rows = json.loads(top.stdout.strip().splitlines()[-1])["rows"] if top.returncode == 0 else []
                    extra["top"] = f"{sum(1 for x in rows if not x.get('error'))}/{len(rows)} rows answered"
                    import httpx

                    ok = 0
                    with httpx.Client(trust_env=False, timeout=30) as c:
                        for i in range(32):
                            r = c.post(case.router_url + "/v1/chat/completions",
                                       json={"model": "fake", "max_tokens": 2, "messages": [{"role": "user", "content": f"q{i}"}]})
                            ok += r.status_code == 200
                    extra["through the router"] = f"{ok}/32 requests answered"
                    t = time.monotonic()
                    d = case.run_inkctl("down", case.recipe, "--hosts", case.inventory)
                    extra["down_s"] = time.monotonic() - t
                    left = sum(len(cluster.docker(h, "ps", "-aq").stdout.split()) for h in case.names)
                    extra["down"] = f"rc {d.returncode}, {left} containers left"
                clean(cluster, case.names)
    finally:
        if not args.keep_cluster:
            cluster.down()
    med = {n: {m: statistics.median(v) for m, v in d.items()} for n, d in res.items()}
    print(f"\nmedian of {args.runs} runs, seconds until every replica and the router answer:")
    print(f"{'hosts':>5}  {'replicas':>8}  " + "  ".join(f"{m:>8}" for m in methods) + "  inkctl/floor  inkctl/loop")
    for n in args.sizes:
        m = med[n]
        print(f"{n:>5}  {n // NODES:>8}  " + "  ".join(f"{m[k]:8.2f}" for k in methods)
              + f"  {m['inkctl'] / m['floor']:12.2f}  {m['inkctl'] / m['ssh_loop']:11.2f}")
    lo, hi = min(args.sizes), max(args.sizes)
    print(f"\ngrowth {lo} -> {hi} hosts ({hi / lo:.0f}x): " + ", ".join(f"{m} {med[hi][m] / med[lo][m]:.2f}x" for m in methods))
    print("\ninkctl up's own process (peak over the runs):")
    for n in args.sizes:
        rss, th, fd, cpu = use[n]
        print(f"{n:>5} hosts: RSS {rss / 1024:.0f} MiB ({rss / n:.0f} KiB/host), {th} threads ({th / n:.1f}/host), "
              f"{fd} fds ({fd / n:.1f}/host), CPU {cpu:.1f} s ({cpu / n * 1000:.0f} ms/host)")
    if lo != hi:
        (r0, t0_, f0, c0), (r1, t1, f1, c1) = use[lo], use[hi]
        print(f"  marginal host ({lo} -> {hi}): {(r1 - r0) / (hi - lo):.0f} KiB RSS, {(t1 - t0_) / (hi - lo):.2f} threads, "
              f"{(f1 - f0) / (hi - lo):.2f} fds, {(c1 - c0) / (hi - lo) * 1000:.0f} ms CPU")
    for k, v in extra.items():
        print(f"{hi} hosts: {k}: {v:.2f} s" if isinstance(v, float) else f"{hi} hosts: {k}: {v}")
    ok = med[hi]["inkctl"] / med[lo]["inkctl"] <= 3.0
    print(f"target growth {lo} -> {hi} <= 3x: {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
