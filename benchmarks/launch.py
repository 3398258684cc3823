#!/usr/bin/env python3
"""Launch benchmark: whole-process ``inkctl up`` until healthy, against three baselines, on the
same simulated hosts in the same run (sshd skips the shell's rc files, as on real hosts).

- floor: no ssh at all: ``docker -H unix://<host's daemon> run ...`` for every host at once
  from this machine, then a poll (every 10 ms) of the head's health URL until it answers 200.
- ssh loop: what a person writes by hand: one ``ssh HOST docker run ...`` per host, all in
  parallel (OpenSSH, C), then the same poll.
- Ansible: ``ansible all -i INV -m shell -a '{"cmd": "{{ cmd }}"}' -f 16`` (ansible-core in
  benchmarks/.venv, pipelining on), then the same poll. Skipped, with a message, if it cannot be installed.
- inkctl: ``python -m inkctl up RECIPE --hosts INV -o json`` (connect, probe + deploy lock +
  preflight, launch, every-rank health watching), process start to exit.

Every method runs the very same ``docker run`` argv per host (taken from inkctl's plan); the
engine (the fake engine image) is ready at once, so what is measured is the orchestration.
The recipe is one node per host: vLLM native with tensor_parallel = hosts, gpus_per_host 1,
smoke off, health.interval_s 2 (the default). Containers are removed between runs (not timed).
Where inkctl's time goes comes from its JSON event timestamps; ``--profile`` adds a cProfile
of one more run at the largest size. A second part times the health wait alone: a local
server that starts answering after a delay, and how long after that ``up``'s poller sees it.

Targets (issue 13, issue 27 part 6): at 16 hosts inkctl <= 1.0x the ssh loop and <= 1.3x the
floor; at 2 hosts <= 1.5x the loop; growth from the smallest to the largest size sub-linear and
no worse than the loop's; readiness seen within 100 ms of the server answering. On a shared
2-core machine the figures move with the other work on it (note the load average beside them):
compare ratios from one run, where every method ran interleaved.

Measured 2026-12-07 (2 cores, shared; interleaved with the code before issue 27 part 6's
changes, 16 hosts, median of 4-5 runs, load average 10-20): ssh loop 4.16-4.25 s, inkctl
4.90-4.94 s (1.15-1.19x; the earlier code 1.15-1.16x in the same runs), floor 2.88 s. What is
left is before the launch: start-up 0.30 s (no longer growing with the hosts) and connect +
probe 1.0 s, where 16 probes of ~85 ms of CPU each (docker ps, docker image inspect, two
nvidia-smi: the preflight's own checks) share the 2 cores that real hosts would not share;
launch + health (3.7 s) is shorter than the loop's docker runs and boot (connections reused).

    python benchmarks/launch.py [--sizes 2 8 16] [--runs 3] [--net-id 9] [--keep-cluster] [--profile]
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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VENV = ROOT / "benchmarks" / ".venv"
PORT = 18100


def recipe_text(n: int, interval: float) -> str:
    return f"""name: bench-launch
model: {{repo: test/fake-model, served_name: fake}}
hardware: {{accelerator: h200, compute_capability: "9.0", nodes: {n}, gpus_per_host: 1}}
engine:
  kind: vllm
  version: fake
  image: {{ref: "inkctl-fake-engine:latest", pull: false}}
  multinode: native
  master_port: 29711
  args: {{tensor_parallel: {n}, port: {PORT}}}
container: {{runtime: docker, gpus: all, ipc: host, network: host}}
health: {{timeout_s: 120, interval_s: {interval}}}
smoke: {{enabled: false}}
"""


def ensure_ansible() -> bool:
    """ansible-core in benchmarks/.venv (pip); False, with a message, when it cannot be installed."""
    exe = VENV / "bin" / "ansible"
    if not exe.exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
            subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "ansible-core"], check=True)
        except (subprocess.CalledProcessError, OSError) as e:
            print(f"Ansible skipped: cannot install ansible-core into {VENV}: {e}", file=sys.stderr)
            return False
    return exe.exists()


def wait_healthy(url: str, timeout: float = 120.0) -> None:
    """The baselines' health wait: a poll every 10 ms (their best case)."""
    import httpx

    deadline = time.monotonic() + timeout
    with httpx.Client(trust_env=False, timeout=2) as c:
        while time.monotonic() < deadline:
            try:
                if c.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.01)
    raise RuntimeError(f"{url} not healthy after {timeout} s")


def clean(cluster, names: list[str]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(h):
        ids = cluster.docker(h, "ps", "-aq", "--filter", "label=inkctl.deployment=bench-launch").stdout.split()
        if ids:
            cluster.docker(h, "rm", "-f", *ids)
        lock = Path(cluster.host(h).state_dir) / "locks" / "bench-launch.lock"
        if lock.exists():  # up must release its lock; say so loudly, then go on measuring
            print(f"  WARNING: {h}: a deploy lock was left behind: {sorted(p.name for p in lock.iterdir())}", flush=True)
        cluster.exec(h, ["rm", "-rf", str(Path(cluster.host(h).state_dir) / "bench-launch"), str(lock)])

    with ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(one, names))


def phases(events: list[dict], start: float, end: float) -> dict[str, float]:
    """Where inkctl's time went, from its JSON event timestamps: start-up (interpreter, imports,
    recipe, plan) until the first connection starts; connect + probe (each host probed, deploy
    lock taken, as soon as it is connected) until the preflight verdict; then each stage of the
    plan; exit = from the last event to the end of the process."""
    conns = [e for e in events if e["event"] == "host_connected"]
    first = min(e["ts"] - e["seconds"] for e in conns)
    verdict = next(e for e in events if e["event"] == "preflight")
    stages = [e for e in events if e["event"] == "stage_started"]
    done = next(e for e in events if e["event"] == "finished")
    out = {"start-up": first - start, "connect": max(e["seconds"] for e in conns),
           "connect+probe": verdict["ts"] - first, "verdict->launch": stages[0]["ts"] - verdict["ts"]}
    for a, b in zip(stages, stages[1:] + [done]):
        out[a["name"]] = b["ts"] - a["ts"]
    out["exit"] = end - done["ts"]
    return out


class Case:
    def __init__(self, cluster, n: int, work: Path, interval: float):
        import yaml

        from inkctl.plan.deploy import build_plan
        from inkctl.plan.step import Run
        from inkctl.recipe.hosts import Host
        from inkctl.recipe.model import Recipe

        self.cluster, self.n, self.work = cluster, n, work
        self.phases: list[dict[str, float]] = []
        self.names = [f"h{i}" for i in range(1, n + 1)]
        inv = yaml.safe_load(Path(cluster.inventory).read_text())["hosts"][:n]
        self.inventory = work / f"inventory-{n}.yaml"
        self.inventory.write_text(yaml.safe_dump({"hosts": inv}))
        self.recipe = work / f"bench-{n}.yaml"
        self.recipe.write_text(recipe_text(n, interval))
        plan = build_plan(Recipe.model_validate(yaml.safe_load(self.recipe.read_text())), [Host(**h) for h in inv])
        self.argv = {s.host: s.argv for s in plan.steps() if isinstance(s, Run)}
        self.url = f"http://{cluster.host('h1').address}:{PORT}/health"
        self.sockets = {h: cluster.host(h).socket for h in self.names}
        self.cpu: list[float] = []  # inkctl's own CPU seconds (user + system) per run
        self.home = work / "home"
        (self.home / ".ssh").mkdir(parents=True, exist_ok=True)
        (self.home / ".ssh" / "known_hosts").write_text(Path(cluster.known_hosts).read_text())
        ansible_inv = {"all": {"hosts": {h["name"]: {
            "ansible_host": h["address"], "ansible_user": "root",
            "ansible_ssh_private_key_file": cluster.identity_file,
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={cluster.known_hosts} -o StrictHostKeyChecking=yes",
            "ansible_python_interpreter": "/usr/bin/python3",
            "cmd": shlex.join(self.argv[h["name"]])} for h in inv}}}
        self.ansible_inv = work / f"ansible-{n}.yaml"
        self.ansible_inv.write_text(yaml.safe_dump(ansible_inv))

    def env(self) -> dict:
        # an installed inkctl has its .pyc files; a worktree run without them would compile every module each time
        env = dict(os.environ, HOME=str(self.home), PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(self.work / "pyc"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def up_argv(self) -> list[str]:
        return ["-m", "inkctl", "up", str(self.recipe), "--hosts", str(self.inventory), "--output", "json"]

    def inkctl(self) -> float:
        import resource

        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall0, t0 = time.time(), time.monotonic()
        p = subprocess.run([sys.executable, *self.up_argv()], env=self.env(), capture_output=True, text=True, cwd=ROOT)
        dt = time.monotonic() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode:
            raise RuntimeError(f"inkctl up failed:\n{p.stdout}\n{p.stderr}")
        self.cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        self.phases.append(phases([json.loads(line) for line in p.stdout.splitlines()], wall0, wall0 + dt))
        return dt

    def profile(self, out: Path) -> None:
        """One more ``up`` under cProfile; prints where its CPU went. ``main`` is profiled in
        process (``python -m inkctl`` ends in os._exit, before cProfile could write its file)."""
        import pstats

        code = ("import cProfile, sys; sys.argv = ['inkctl', *sys.argv[1:]]; from inkctl.cli.app import main; "
                f"cProfile.run('main()', {str(out)!r})")
        subprocess.run([sys.executable, "-c", code, *self.up_argv()[2:]], env=self.env(),
                       capture_output=True, text=True, cwd=ROOT, check=True)
        print(f"\nprofile of one inkctl up at {self.n} hosts (cumulative, main thread; the hosts' threads show as waits):")
        pstats.Stats(str(out)).sort_stats("cumulative").print_stats(18)

    def floor(self) -> float:
        t0 = time.monotonic()
        procs = [subprocess.Popen(["docker", "-H", f"unix://{self.sockets[h]}", *self.argv[h][1:]],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for h in self.names]
        for p in procs:
            if p.wait():
                raise RuntimeError(f"floor failed: {p.stderr.read().decode()}")
        wait_healthy(self.url)
        return time.monotonic() - t0

    def ssh_loop(self) -> float:
        t0 = time.monotonic()
        procs = [subprocess.Popen(["ssh", "-F", self.cluster.ssh_config, h, "--", shlex.join(self.argv[h])],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for h in self.names]
        for p in procs:
            if p.wait():
                raise RuntimeError(f"ssh loop failed: {p.stderr.read().decode()}")
        wait_healthy(self.url)
        return time.monotonic() - t0

    def ansible(self) -> float:
        env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_PIPELINING="True",
                   ANSIBLE_LOCAL_TEMP=str(self.work / "ansible-tmp"), ANSIBLE_NOCOLOR="1")
        t0 = time.monotonic()
        p = subprocess.run([str(VENV / "bin" / "ansible"), "all", "-i", str(self.ansible_inv), "-m", "shell",
                            "-a", '{"cmd": "{{ cmd }}"}', "-f", str(max(16, self.n))], env=env, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"ansible failed:\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}")
        wait_healthy(self.url)
        return time.monotonic() - t0


def health_lag(delays: list[float], runs: int, interval: float = 2.0) -> dict[float, list[float]]:
    """The health wait alone: a local server that starts answering 200 ``delay`` seconds in;
    seconds from its first possible answer to HealthWait returning (recipe interval_s 2)."""
    import http.server
    import socket
    import threading

    from inkctl.execute.supervise.health import HealthWait
    from inkctl.plan.step import WaitHealth

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    from inkctl.execute.supervise.health import warm

    warm()  # before the clock starts, as up does while it connects

    out: dict[float, list[float]] = {d: [] for d in delays}
    for delay in delays:
        for _ in range(runs):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()  # refused until the server binds it
            ready = []

            def serve(port=port, delay=delay, ready=ready):
                time.sleep(delay)
                srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Ok)
                ready.append(time.monotonic())
                threading.Thread(target=srv.serve_forever, daemon=True).start()

            threading.Thread(target=serve, daemon=True).start()
            step = WaitHealth(host="h", purpose="bench", url=f"http://127.0.0.1:{port}/health", timeout_s=60,
                              interval_s=interval)
            HealthWait(step, {}, "docker", lambda e: None, threading.Event()).run()
            out[delay].append(time.monotonic() - ready[0])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 8, 16])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--net-id", type=int, default=9, help="test cluster network id (a cluster of its own)")
    ap.add_argument("--interval", type=float, default=2.0, help="health.interval_s of the bench recipe")
    ap.add_argument("--keep-cluster", action="store_true", help="leave the cluster up afterwards")
    ap.add_argument("--profile", action="store_true", help="profile one more inkctl up at the largest size")
    ap.add_argument("--no-ansible", action="store_true", help="leave Ansible out")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("benchmarks/launch.py needs root (it starts the test cluster)")
    lags = health_lag([0.3, 1.0, 4.0, 12.0], args.runs)
    print("health wait alone (interval_s 2): seconds from the server's first possible answer to up seeing it")
    for d, v in lags.items():
        print(f"  server answering after {d:4.1f} s: median {statistics.median(v) * 1000:5.0f} ms, worst {max(v) * 1000:5.0f} ms")
    ansible = not args.no_ansible and ensure_ansible()
    from tests.cluster import Cluster

    n_max = max(args.sizes)
    cluster = Cluster.up(n_max, podman_hosts=(), profiles={f"h{i}": "h200x8" for i in range(1, n_max + 1)},
                         net_id=args.net_id)
    methods = ("floor", "ssh_loop", *(("ansible",) if ansible else ()), "inkctl")
    results: dict[int, dict[str, list[float]]] = {}
    breakdown: dict[int, dict[str, float]] = {}
    cpu: dict[int, float] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="inkctl-bench-") as tmp:
            for n in args.sizes:
                case = Case(cluster, n, Path(tmp), args.interval)
                clean(cluster, case.names)
                case.inkctl()  # warm: .pyc files, page cache, the image's layers on every daemon
                case.phases.clear()
                case.cpu.clear()
                results[n] = {m: [] for m in methods}
                for r in range(args.runs):
                    for m in methods:  # interleaved: drift hits every method alike
                        clean(cluster, case.names)
                        results[n][m].append(getattr(case, m)())
                        print(f"  {n:2d} hosts  run {r + 1}  {m:8s} {results[n][m][-1]:6.2f} s", flush=True)
                clean(cluster, case.names)
                breakdown[n] = {k: statistics.median(p.get(k, 0.0) for p in case.phases) for k in case.phases[0]}
                cpu[n] = statistics.median(case.cpu)
                if args.profile and n == n_max:
                    case.profile(Path(tmp) / "up.prof")
                    clean(cluster, case.names)
    finally:
        if not args.keep_cluster:
            cluster.down()
    med = {n: {m: statistics.median(v) for m, v in d.items()} for n, d in results.items()}
    print(f"\nmedian of {args.runs} runs, seconds from process start to the head answering /health"
          f" (load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
    print(f"{'hosts':>5}  " + "  ".join(f"{m:>8}" for m in methods) + f"  {'inkctl/floor':>12}  {'inkctl/loop':>11}"
          + (f"  {'inkctl/ansible':>14}" if ansible else ""))
    for n in args.sizes:
        m = med[n]
        print(f"{n:>5}  " + "  ".join(f"{m[k]:8.2f}" for k in methods) + f"  {m['inkctl'] / m['floor']:12.2f}"
              f"  {m['inkctl'] / m['ssh_loop']:11.2f}" + (f"  {m['inkctl'] / m['ansible']:14.2f}" if ansible else ""))
    print("\nwhere inkctl's time goes (median s, from its -o json timestamps; connect is the slowest host's handshake,"
          " inside connect+probe), and its CPU time against the wall:")
    for n in args.sizes:
        print(f"{n:>5}  " + "  ".join(f"{k} {v:.2f}" for k, v in breakdown[n].items())
              + f"  | cpu {cpu[n]:.2f} s = {cpu[n] / med[n]['inkctl']:.0%} of the wall")
    lo, hi = min(args.sizes), max(args.sizes)
    if lo != hi:
        print(f"\ngrowth {lo} -> {hi} hosts ({hi / lo:.0f}x the hosts): " + ", ".join(
            f"{m} {med[hi][m] / med[lo][m]:.2f}x" for m in methods))
    top, low = med[hi], med[lo]
    checks = [(f"{hi} hosts: inkctl <= 1.0x the ssh loop", top["inkctl"] <= top["ssh_loop"]),
              (f"{hi} hosts: inkctl <= 1.3x the floor", top["inkctl"] <= 1.3 * top["floor"]),
              (f"{lo} hosts: inkctl <= 1.5x the ssh loop", low["inkctl"] <= 1.5 * low["ssh_loop"])]
    if lo != hi:
        checks.append((f"growth {lo} -> {hi} sub-linear", top["inkctl"] / low["inkctl"] < hi / lo))
        checks.append((f"growth {lo} -> {hi} no worse than the ssh loop's",
                       top["inkctl"] / low["inkctl"] <= top["ssh_loop"] / low["ssh_loop"]))
    checks.append(("readiness seen within 100 ms (server answering within the fast phase)",
                   all(max(v) <= 0.1 for d, v in lags.items() if d < 10.0)))
    for what, ok in checks:
        print(f"target {what}: {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
