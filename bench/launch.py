#!/usr/bin/env python3
"""Launch benchmark: whole-process ``inkctl up`` until healthy, against two baselines, on the
same simulated hosts in the same run.

- inkctl: ``python -m inkctl up RECIPE --hosts INV`` (connect, preflight, launch head then
  workers, health), process start to exit.
- ssh loop: what a person writes by hand: one ``ssh HOST docker run ...`` per host, all in
  parallel (OpenSSH, C), then a poll of the head's health URL until it answers 200.
- Ansible: ``ansible all -i INV -m shell -a '{"cmd": "{{ cmd }}"}' -f 16`` (ansible-core in bench/.venv),
  then the same poll.

Every method runs the very same ``docker run`` argv per host (taken from inkctl's plan); the
engine (the fake engine image) is ready at once, so what is measured is the orchestration.
The recipe is one node per host: vLLM native with tensor_parallel = hosts, gpus_per_host 1,
smoke off. Containers are removed between runs (not timed).

Targets at 16 hosts: inkctl <= 0.3x Ansible and <= 1.0x the ssh loop; sub-linear growth
from 2 to 16 hosts.

    python bench/launch.py [--sizes 2 8 16] [--runs 3] [--net-id 9] [--keep-cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VENV = ROOT / "bench" / ".venv"
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


def ensure_ansible() -> Path:
    exe = VENV / "bin" / "ansible"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "ansible-core"], check=True)
    return exe


def wait_healthy(url: str, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    with httpx.Client(trust_env=False, timeout=2) as c:
        while time.monotonic() < deadline:
            try:
                if c.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
    raise RuntimeError(f"{url} not healthy after {timeout} s")


def clean(cluster, names: list[str]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(h):
        ids = cluster.docker(h, "ps", "-aq", "--filter", "label=inkctl.deployment=bench-launch").stdout.split()
        if ids:
            cluster.docker(h, "rm", "-f", *ids)
        cluster.exec(h, ["rm", "-rf", str(Path(cluster.host(h).state_dir) / "bench-launch")])

    with ThreadPoolExecutor(len(names)) as pool:
        list(pool.map(one, names))


def phases(events: list[dict], start: float, end: float) -> dict[str, float]:
    """Where inkctl's time went, from its JSON events: start-up (interpreter, imports, recipe,
    plan), connect, preflight (with the deploy lock and the deployment probe beside it), and
    each stage of the plan (the last one ends when the process does)."""
    conn = next(e for e in events if e["event"] == "info" and e["text"].startswith("connected to"))
    secs = float(re.search(r"in ([0-9.]+) s", conn["text"]).group(1))
    stages = [e for e in events if e["event"] == "stage_started"]
    out = {"start-up": conn["ts"] - secs - start, "connect": secs, "preflight": stages[0]["ts"] - conn["ts"]}
    for a, b in zip(stages, stages[1:] + [{"ts": end}]):
        out[a["name"]] = b["ts"] - a["ts"]
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

    def inkctl(self) -> float:
        env = dict(os.environ, HOME=str(self.home), PYTHONPATH=str(ROOT))
        wall0, t0 = time.time(), time.monotonic()
        p = subprocess.run([sys.executable, "-m", "inkctl", "up", str(self.recipe), "--hosts", str(self.inventory),
                            "--output", "json"], env=env, capture_output=True, text=True, cwd=ROOT)
        dt = time.monotonic() - t0
        if p.returncode:
            raise RuntimeError(f"inkctl up failed:\n{p.stdout}\n{p.stderr}")
        self.phases.append(phases([json.loads(line) for line in p.stdout.splitlines()], wall0, wall0 + dt))
        return dt

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
                            "-a", '{"cmd": "{{ cmd }}"}', "-f", "16"], env=env, capture_output=True, text=True)
        if p.returncode:
            raise RuntimeError(f"ansible failed:\n{p.stdout[-3000:]}\n{p.stderr[-2000:]}")
        wait_healthy(self.url)
        return time.monotonic() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 8, 16])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--net-id", type=int, default=9, help="test cluster network id (a cluster of its own)")
    ap.add_argument("--interval", type=float, default=0.1, help="health.interval_s of the bench recipe")
    ap.add_argument("--keep-cluster", action="store_true", help="leave the cluster up afterwards")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench/launch.py needs root (it starts the test cluster)")
    ensure_ansible()
    from tests.cluster import Cluster

    n_max = max(args.sizes)
    cluster = Cluster.up(n_max, podman_hosts=(), profiles={f"h{i}": "h200x8" for i in range(1, n_max + 1)},
                         net_id=args.net_id)
    methods = ("inkctl", "ssh_loop", "ansible")
    results: dict[int, dict[str, list[float]]] = {}
    breakdown: dict[int, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="inkctl-bench-") as tmp:
            for n in args.sizes:
                case = Case(cluster, n, Path(tmp), args.interval)
                results[n] = {m: [] for m in methods}
                for r in range(args.runs):
                    for m in methods:  # interleaved: drift hits every method alike
                        clean(cluster, case.names)
                        results[n][m].append(getattr(case, m)())
                        print(f"  {n:2d} hosts  run {r + 1}  {m:8s} {results[n][m][-1]:6.2f} s", flush=True)
                clean(cluster, case.names)
                breakdown[n] = {k: statistics.median(p.get(k, 0.0) for p in case.phases) for k in case.phases[0]}
    finally:
        if not args.keep_cluster:
            cluster.down()
    med = {n: {m: statistics.median(v) for m, v in d.items()} for n, d in results.items()}
    print(f"\nmedian of {args.runs} runs, seconds from process start to the head answering /health:")
    print(f"{'hosts':>5}  {'inkctl':>7}  {'ssh loop':>8}  {'ansible':>8}  {'inkctl/ansible':>14}  {'inkctl/ssh-loop':>15}")
    for n in args.sizes:
        m = med[n]
        print(f"{n:>5}  {m['inkctl']:7.2f}  {m['ssh_loop']:8.2f}  {m['ansible']:8.2f}  "
              f"{m['inkctl'] / m['ansible']:14.2f}  {m['inkctl'] / m['ssh_loop']:15.2f}")
    print("\nwhere inkctl's time goes (median s): start-up = interpreter, imports, recipe and plan; "
          "connect = until connected; the next span = preflight + deploy lock + deployment probe")
    for n in args.sizes:
        print(f"{n:>5}  " + "  ".join(f"{k} {v:.2f}" for k, v in breakdown[n].items()))
    lo, hi = min(args.sizes), max(args.sizes)
    if lo != hi:
        print(f"\ngrowth {lo} -> {hi} hosts ({hi / lo:.0f}x the hosts): " + ", ".join(
            f"{m} {med[hi][m] / med[lo][m]:.2f}x" for m in methods))
        top = med[hi]
        ok = top["inkctl"] <= 0.3 * top["ansible"] and top["inkctl"] <= 1.0 * top["ssh_loop"]
        print(f"targets at {hi} hosts (<= 0.3x ansible, <= 1.0x ssh loop): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
