#!/usr/bin/env python3
"""What the router buys, measured through the real sglang-router on the test cluster.

1. Throughput at 1 vs 2 replicas: the fake engine decodes at most FAKE_MAX_RUNNING requests at
   once (its batch) at FAKE_ITL seconds per token, so one replica is saturated by the load;
   ``inkctl bench`` through the router at the same concurrency, 1 replica then 2 (two TP=2
   groups on one 8-GPU host). Target ~2x.
2. Cache-aware routing: groups of requests that share a long prefix (a system prompt), each
   group's own; the share of each group's requests that land on the replica that got most of
   that group (from the engines' own /metrics counters), cache_aware against round_robin in the
   same run. 1.0 = every request of a group on one replica; 0.5 = spread evenly.

    python benchmarks/fleet.py [--net-id 5] [--keep-cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ITL, BATCH, OUT_LEN, CONC, N = 0.02, 4, 32, 16, 64


def recipe_text(replicas: int, policy: str) -> str:
    return f"""name: bench-fleet
model: {{repo: test/fake-model, served_name: fake}}
hardware: {{accelerator: h200, compute_capability: "9.0", nodes: 1, gpus_per_host: 2}}
engine:
  kind: vllm
  version: fake
  image: {{ref: "inkctl-fake-engine:latest", pull: false}}
  args: {{tensor_parallel: 2, port: 18200}}
container:
  runtime: docker
  gpus: all
  ipc: host
  network: host
  env: {{FAKE_ITL: "{ITL}", FAKE_MAX_RUNNING: "{BATCH}"}}
health: {{timeout_s: 120, interval_s: 0.5}}
smoke: {{enabled: false}}
fleet:
  replicas: {replicas}
  router: {{kind: sglang, policy: {policy}, port: 30280, prometheus_port: 29200}}
"""


class Run:
    def __init__(self, cluster, work: Path):
        import yaml

        self.cluster, self.work = cluster, work
        inv = [h for h in yaml.safe_load(Path(cluster.inventory).read_text())["hosts"] if h["name"] == "h5"]
        inv[0]["gpus"] = "0,1,2,3"
        self.inventory = work / "inventory.yaml"
        self.inventory.write_text(yaml.safe_dump({"hosts": inv}))
        self.home = work / "home"
        (self.home / ".ssh").mkdir(parents=True, exist_ok=True)
        (self.home / ".ssh" / "known_hosts").write_text(Path(cluster.known_hosts).read_text())
        self.addr = cluster.host("h5").address

    def inkctl(self, *args, check=True) -> subprocess.CompletedProcess:
        env = dict(os.environ, HOME=str(self.home), PYTHONPATH=str(ROOT))
        p = subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], env=env, capture_output=True, text=True, cwd=ROOT)
        if check and p.returncode:
            raise RuntimeError(f"inkctl {' '.join(map(str, args))} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return p

    def recipe(self, replicas: int, policy: str) -> Path:
        p = self.work / f"bench-fleet-{replicas}-{policy}.yaml"
        p.write_text(recipe_text(replicas, policy))
        return p

    def throughput(self, replicas: int) -> dict:
        rec = self.recipe(replicas, "round_robin")
        self.inkctl("up", rec, "--hosts", self.inventory)
        try:
            out = self.work / f"res-{replicas}"
            self.inkctl("bench", rec, "--hosts", self.inventory, "-c", CONC, "-n", N, "--input-len", 64,
                        "--output-len", OUT_LEN, "--results-dir", out)
            point = next(json.loads(f.read_text()) for f in out.rglob("*.json") if f.name != "run.json")
            return point
        finally:
            self.inkctl("down", rec, "--hosts", self.inventory, check=False)

    def served(self, port: int) -> float:
        from inkctl.client.prometheus import parse
        from inkctl.recipe.engine_registry import spec_of

        e2e = spec_of("vllm").metrics.e2e  # the fleet's engines are the fake vLLM (its real metric names)
        with urllib.request.urlopen(f"http://{self.addr}:{port}/metrics", timeout=5) as r:
            h = parse(r.read().decode()).histogram(e2e)
        return h.count if h is not None else 0.0

    def affinity(self, policy: str, groups: int = 6, per: int = 10) -> float:
        """Mean over groups of (requests on the group's busiest replica) / (group's requests)."""
        rec = self.recipe(2, policy)
        self.inkctl("up", rec, "--hosts", self.inventory)
        try:
            shares = []
            for g in range(groups):
                system = f"You are assistant number {g}. " + " ".join(f"rule{g}-{k}" for k in range(120))
                before = [self.served(18200), self.served(18210)]
                for i in range(per):
                    body = json.dumps({"model": "fake", "max_tokens": 2, "messages": [
                        {"role": "system", "content": system}, {"role": "user", "content": f"question {i}"}]}).encode()
                    req = urllib.request.Request(f"http://{self.addr}:30280/v1/chat/completions", body,
                                                 {"content-type": "application/json"})
                    urllib.request.urlopen(req, timeout=30).read()
                after = [self.served(18200), self.served(18210)]
                got = [a - b for a, b in zip(after, before)]
                shares.append(max(got) / sum(got))
            return sum(shares) / len(shares)
        finally:
            self.inkctl("down", rec, "--hosts", self.inventory, check=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--net-id", type=int, default=int(os.environ.get("INKCTL_TEST_NET_ID", "5")))
    ap.add_argument("--keep-cluster", action="store_true")
    args = ap.parse_args(argv)
    from tests.cluster import Cluster, router_image

    cluster = Cluster.up(5, podman_hosts=(), profiles={f"h{i}": "h200x8" for i in range(1, 6)}, net_id=args.net_id)
    router_image.load(cluster, ["h5"])
    try:
        with tempfile.TemporaryDirectory(prefix="inkctl-bench-fleet-") as tmp:
            run = Run(cluster, Path(tmp))
            one, two = run.throughput(1), run.throughput(2)
            aware, rr = run.affinity("cache_aware"), run.affinity("round_robin")
    finally:
        if not args.keep_cluster:
            cluster.down()
    t1, t2 = one["output_throughput"], two["output_throughput"]
    print(f"fake engine: {ITL * 1000:.0f} ms/token, batch {BATCH}; bench -c {CONC} -n {N}, {OUT_LEN} tokens out")
    print(f"{'replicas':>8}  {'out tok/s':>9}  {'req/s':>6}  {'median TTFT ms':>14}  recorded")
    for n, p in ((1, one), (2, two)):
        f = p["inkctl"].get("fleet", {})
        print(f"{n:>8}  {p['output_throughput']:9.1f}  {p['request_throughput']:6.2f}  {p['median_ttft_ms']:14.0f}  "
              f"replicas={f.get('replicas')} policy={f.get('policy')}")
    print(f"throughput 2 vs 1 replica: {t2 / t1:.2f}x (target ~2x)")
    print(f"shared-prefix requests on their group's busiest replica: cache_aware {aware:.2f}, "
          f"round_robin {rr:.2f} (baseline; 1.0 = all on one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
