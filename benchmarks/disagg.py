#!/usr/bin/env python3
"""Prefill/decode disaggregation against one replica, side by side, through the real sglang-router.

On one 8-GPU host of the test cluster, the fake SGLang engine (a prefill of FAKE_TTFT seconds
and FAKE_ITL seconds per token, at most FAKE_MAX_RUNNING requests in its batch, a prefill's
forward pass taking a place of it) is brought up three ways by ``inkctl up``, each behind the
router, and measured by ``inkctl bench`` through the router at the same load:

  1. one replica (1 GPU), the router in front (the baseline);
  2. two replicas (2 GPUs): the same GPUs as P/D, plain routing;
  3. P/D: one prefill and one decode replica (2 GPUs), the router in its P/D mode; every request
     is prefilled on one, its KV handed over (the fake's bootstrap room), decoded on the other.

Printed: median and p99 TTFT and ITL, output tokens/s, and each against the baseline. What it
measures is the routing and the KV handshake as inkctl wires them, on a fake engine: the
figures say how the split behaves under this load model, not what a GPU would do.

    python benchmarks/disagg.py [--net-id 6] [--keep-cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TTFT, ITL, BATCH, IN_LEN, OUT_LEN, CONC, N = 0.15, 0.02, 4, 256, 32, 8, 48


def recipe_text(shape: str) -> str:
    fleet = {"one": "  replicas: 1\n", "two": "  replicas: 2\n",
             "pd": "  disagg:\n    transfer: {backend: nixl, bootstrap_port: 18998}\n"
                   "    prefill: {replicas: 1}\n    decode: {replicas: 1}\n"}[shape]
    return f"""name: bench-pd-{shape}
model: {{repo: test/fake-model, served_name: fake}}
hardware: {{accelerator: h200, compute_capability: "9.0", nodes: 1, gpus_per_host: 1}}
engine:
  kind: sglang
  version: fake
  image: {{ref: "inkctl-fake-engine:latest", pull: false}}
  args: {{tensor_parallel: 1, port: 18300}}
container:
  runtime: docker
  gpus: all
  ipc: host
  network: host
  env: {{FAKE_TTFT: "{TTFT}", FAKE_ITL: "{ITL}", FAKE_MAX_RUNNING: "{BATCH}"}}
health: {{timeout_s: 120, interval_s: 0.5}}
smoke: {{enabled: false}}
fleet:
  router: {{kind: sglang, policy: round_robin, port: 30380, prometheus_port: 29300}}
{fleet}"""


class Run:
    def __init__(self, cluster, work: Path):
        import yaml

        self.work = work
        inv = [h for h in yaml.safe_load(Path(cluster.inventory).read_text())["hosts"] if h["name"] == "h1"]
        self.inventory = work / "inventory.yaml"
        self.home = work / "home"
        (self.home / ".ssh").mkdir(parents=True, exist_ok=True)
        (self.home / ".ssh" / "known_hosts").write_text(Path(cluster.known_hosts).read_text())
        self.inv = inv

    def inkctl(self, *args, check=True) -> subprocess.CompletedProcess:
        env = dict(os.environ, HOME=str(self.home), PYTHONPATH=str(ROOT))
        p = subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], env=env, capture_output=True, text=True, cwd=ROOT)
        if check and p.returncode:
            raise RuntimeError(f"inkctl {' '.join(map(str, args))} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return p

    def point(self, shape: str) -> dict:
        import yaml

        self.inv[0]["gpus"] = "0" if shape == "one" else "0,1"
        self.inventory.write_text(yaml.safe_dump({"hosts": self.inv}))
        rec = self.work / f"bench-pd-{shape}.yaml"
        rec.write_text(recipe_text(shape))
        self.inkctl("up", rec, "--hosts", self.inventory)
        try:
            out = self.work / f"res-{shape}"
            self.inkctl("bench", rec, "--hosts", self.inventory, "-c", CONC, "-n", N, "--input-len", IN_LEN,
                        "--output-len", OUT_LEN, "--results-dir", out)
            return next(json.loads(f.read_text()) for f in out.rglob("*.json") if f.name != "run.json")
        finally:
            self.inkctl("down", rec, "--hosts", self.inventory, check=False)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--net-id", type=int, default=int(os.environ.get("INKCTL_TEST_NET_ID", "6")))
    ap.add_argument("--keep-cluster", action="store_true")
    args = ap.parse_args(argv)
    from tests.cluster import Cluster, router_image

    cluster = Cluster.up(1, podman_hosts=(), profiles={"h1": "h200x8"}, net_id=args.net_id)
    router_image.load(cluster, ["h1"])
    try:
        with tempfile.TemporaryDirectory(prefix="inkctl-bench-pd-") as tmp:
            run = Run(cluster, Path(tmp))
            points = {shape: run.point(shape) for shape in ("one", "two", "pd")}
    finally:
        if not args.keep_cluster:
            cluster.down()
    base = points["one"]
    print(f"fake SGLang: prefill {TTFT * 1000:.0f} ms, {ITL * 1000:.0f} ms/token, batch {BATCH}; "
          f"bench -c {CONC} -n {N}, {IN_LEN} in / {OUT_LEN} out, through sglang-router 0.3.2")
    cols = ("median_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms", "output_throughput")
    print(f"{'shape':<22}" + "".join(f"{c:>19}" for c in cols))
    names = {"one": "1 replica (1 GPU)", "two": "2 replicas (2 GPUs)", "pd": "P/D 1+1 (2 GPUs)"}
    for shape, p in points.items():
        print(f"{names[shape]:<22}" + "".join(f"{p[c]:>12.1f} ({p[c] / base[c]:4.2f}x)" for c in cols))
    print("failed requests: " + ", ".join(f"{names[s]} {p.get('failed', 0)}" for s, p in points.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
