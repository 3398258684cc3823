#!/usr/bin/env python3
"""Weights benchmark: putting a model on N hosts, inkctl against hand-written rsync, on the same
simulated hosts in the same run.

- Hub bytes and time, fresh hosts: ``inkctl weights`` on N fresh hosts fetches the model from
  the Hub stand-in once (then host to host); the baseline, measured in the same run, is the
  per-node download: every host at once pulls every file itself with curl (the Hub's resolve
  URLs, one file after another, as a ``huggingface-cli download`` per node does). Both count the
  bytes the Hub really sent (its own counter) and the wall time.
- Time: the model is on the head; it must reach the N-1 others.
    inkctl          ``python -m inkctl weights RECIPE --hosts INV`` (whole process: connect, scan
                    every host in the engine image, sender on the head, receivers in parallel,
                    every byte hashed on arrival)
    rsync serial    what a person writes: on the head, ``for h in ...; rsync -a -e ssh`` one host
                    after another (OpenSSH + rsync, C; no hash check beyond rsync's own)
    rsync parallel  the same rsyncs, all at once
  Other hosts' caches are emptied between runs (not timed).
- Memory: inkctl's own peak RSS (the control machine) for a model 1x and 4x as large: it
  streams nothing itself, so it must stay flat.

Targets at N = 8: inkctl <= 0.5x the serial rsync loop and <= 1.0x parallel rsync; Hub bytes 1x.

    python bench/weights.py [--sizes 2 4 8] [--shards 4] [--shard-mib 16] [--runs 1] [--net-id 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REPO = "bench/weights-model"
BIG = "bench/weights-model-4x"


def recipe_text(n: int, repo: str) -> str:
    return f"""name: bench-weights
model: {{repo: {repo}, served_name: fake}}
hardware: {{accelerator: h200, compute_capability: "9.0", nodes: {n}, gpus_per_host: 1}}
engine:
  kind: vllm
  version: fake
  image: {{ref: "inkctl-fake-engine:latest", pull: false}}
  multinode: native
  master_port: 29751
  args: {{tensor_parallel: {n}, port: 18150}}
container:
  runtime: docker
  mounts: [{{source: "${{HF_HOME}}", target: /root/.cache/huggingface}}]
smoke: {{enabled: false}}
"""


class Bench:
    def __init__(self, cluster, hub, work: Path):
        self.cluster, self.hub, self.work = cluster, hub, work
        self.home = work / "home"
        (self.home / ".ssh").mkdir(parents=True, exist_ok=True)
        (self.home / ".ssh" / "known_hosts").write_text(Path(cluster.known_hosts).read_text())
        import yaml

        self.hosts = yaml.safe_load(Path(cluster.inventory).read_text())["hosts"]

    def setup(self, n: int, repo: str) -> tuple[Path, Path]:
        import yaml

        d = self.work / f"{repo.replace('/', '-')}-{n}"
        d.mkdir(exist_ok=True)
        rec, inv = d / "recipe.yaml", d / "hosts.yaml"
        rec.write_text(recipe_text(n, repo))
        inv.write_text(yaml.safe_dump({"hosts": self.hosts[:n]}, sort_keys=False))
        if not rec.with_name("recipe.lock.json").exists():
            self.inkctl("lock", rec, "--hosts", inv)
        return rec, inv

    def env(self) -> dict:
        return dict(os.environ, HOME=str(self.home), PYTHONPATH=str(ROOT), HF_ENDPOINT=self.hub.url)

    def inkctl(self, *args) -> float:
        """Seconds of one whole inkctl process."""
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], cwd=ROOT, env=self.env(),
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600)
        seconds = time.monotonic() - t0
        if p.returncode != 0:
            raise SystemExit(f"inkctl {' '.join(map(str, args))} failed:\n{p.stdout}\n{p.stderr}")
        return seconds

    def hub_dir(self, host: str, repo: str) -> Path:
        return Path(self.cluster.host(host).hf_dir) / "hub" / ("models--" + repo.replace("/", "--"))

    def empty(self, names: list[str]) -> None:
        for n in names:
            shutil.rmtree(Path(self.cluster.host(n).hf_dir) / "hub", ignore_errors=True)

    def per_node(self, names: list[str], repo: str) -> tuple[float, int]:
        """Every host downloads the model from the Hub itself, all at once: (seconds, Hub bytes)."""
        files = [f.path for f in self.hub.repos[repo].files.values() if _needed(f.path)]
        procs, dests = [], []
        before = self.hub.stats["bytes"]
        t0 = time.monotonic()
        for n in names:
            h = self.cluster.host(n)
            dest = Path(h.hf_dir) / "per-node"
            dests.append(dest)
            script = "set -e; " + "; ".join(
                f"curl -sSfL --create-dirs -o {dest}/{path} {self.hub.url}/{repo}/resolve/main/{path}" for path in files)
            procs.append(subprocess.Popen(["nsenter", f"--net={h.netns_path}", "--", "sh", "-c", script]))
        codes = [p.wait() for p in procs]
        seconds = time.monotonic() - t0
        sent = self.hub.stats["bytes"] - before
        for d in dests:
            shutil.rmtree(d, ignore_errors=True)
        if any(codes):
            raise SystemExit(f"per-node download failed: {codes}")
        return seconds, sent

    def rsync_argv(self, src: str, dst_host: str, repo: str) -> list[str]:
        dst = self.hub_dir(dst_host, repo)
        return ["rsync", "-a", "--mkpath", "-e", f"ssh -F {self.cluster.ssh_config}", f"{src}/", f"{dst_host}:{dst}/"]

    def rsync(self, names: list[str], repo: str, parallel: bool) -> float:
        head = self.cluster.host("h1")
        src = str(self.hub_dir("h1", repo))
        ns = ["nsenter", f"--net={head.netns_path}", "--"]
        t0 = time.monotonic()
        if parallel:
            procs = [subprocess.Popen(ns + self.rsync_argv(src, n, repo)) for n in names[1:]]
            codes = [p.wait() for p in procs]
        else:
            codes = [subprocess.run(ns + self.rsync_argv(src, n, repo)).returncode for n in names[1:]]
        seconds = time.monotonic() - t0
        if any(codes):
            raise SystemExit(f"rsync failed: {codes}")
        return seconds


def _needed(path: str) -> bool:
    """The files an engine reads (what inkctl pins): top level, no .bin/.gguf twins."""
    return "/" not in path and not path.endswith((".bin", ".gguf"))


def measure_rss(bench: Bench, rec: Path, inv: Path) -> int:
    """Peak RSS (KiB) of one inkctl weights process, in a child of its own (RUSAGE_CHILDREN is a max)."""
    code = ("import resource,subprocess,sys;"
            "p=subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,stderr=subprocess.PIPE);"
            "sys.exit(p.stderr.decode()[-2000:]) if p.returncode else "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    p = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "inkctl", "weights", str(rec), "--hosts", str(inv)],
                       cwd=ROOT, env=bench.env(), capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise SystemExit(f"inkctl weights failed: {p.stderr}")
    return int(p.stdout.strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--shard-mib", type=int, default=16)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--net-id", type=int, default=int(os.environ.get("INKCTL_E2E_NET_ID", "9")))
    ap.add_argument("--keep-cluster", action="store_true")
    args = ap.parse_args(argv)
    from tests.cluster import Cluster, net
    from tests.cluster.hub import Hub, make_model

    n_max = max(args.sizes)
    cluster = Cluster.up(n_max, podman_hosts=(), net_id=args.net_id)
    work = Path(tempfile.mkdtemp(prefix="inkctl-bench-weights-"))
    hub = Hub(net.gateway(args.net_id))
    hub.add(make_model(str(work / "hub"), REPO, args.shards, args.shard_mib))
    hub.add(make_model(str(work / "hub"), BIG, args.shards * 4, args.shard_mib, seed=1))
    model = sum(f.size for f in hub.repos[REPO].files.values() if _needed(f.path))
    rows = []
    try:
        hub.start()
        bench = Bench(cluster, hub, work)
        print(f"model: {model / 2**20:.1f} MiB in {args.shards} shards; hosts: {cluster.net_id and f'cluster {cluster.net_id}'}"
              f" {', '.join(h.name for h in cluster.hosts)}", flush=True)
        for n in args.sizes:
            names = [f"h{i}" for i in range(1, n + 1)]
            rec, inv = bench.setup(n, REPO)
            bench.empty(names)
            before = hub.stats["bytes"]
            fresh = bench.inkctl("weights", rec, "--hosts", inv)
            hub_bytes = hub.stats["bytes"] - before
            bench.empty(names)
            node_s, node_bytes = bench.per_node(names, REPO)
            times = {"inkctl": [], "rsync serial": [], "rsync parallel": []}
            for _ in range(args.runs):
                bench.empty(names[1:])
                times["inkctl"].append(bench.inkctl("weights", rec, "--hosts", inv))
                bench.empty(names[1:])
                times["rsync serial"].append(bench.rsync(names, REPO, parallel=False))
                bench.empty(names[1:])
                times["rsync parallel"].append(bench.rsync(names, REPO, parallel=True))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append((n, hub_bytes, fresh, med, node_bytes, node_s))
            print(f"N={n}: Hub bytes {hub_bytes / model:.2f}x the model (per-node download, measured: "
                  f"{node_bytes / model:.2f}x); fresh hosts: inkctl {fresh:.1f} s, per-node download {node_s:.1f} s; "
                  f"head -> {n - 1} hosts: inkctl {med['inkctl']:.1f} s, "
                  f"rsync serial {med['rsync serial']:.1f} s, rsync parallel {med['rsync parallel']:.1f} s", flush=True)
        # memory: the same hosts, a model 4x as large
        n = min(args.sizes)
        names = [f"h{i}" for i in range(1, n + 1)]
        rss = {}
        for repo in (REPO, BIG):
            rec, inv = bench.setup(n, repo)
            bench.empty(names)
            rss[repo] = measure_rss(bench, rec, inv)
        bench.empty([h.name for h in cluster.hosts])
    finally:
        hub.stop()
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep_cluster:
            cluster.down()
    print()
    print("fresh hosts: Hub bytes (x the model) and seconds, inkctl vs every node downloading itself")
    print(f"{'N':>3} {'inkctl':>8} {'per-node':>9} {'inkctl s':>9} {'per-node s':>11} {'time ratio':>11}")
    for n, hub_bytes, fresh, _, node_bytes, node_s in rows:
        print(f"{n:>3} {hub_bytes / model:>7.2f}x {node_bytes / model:>8.2f}x {fresh:>9.2f} {node_s:>11.2f} {fresh / node_s:>10.2f}x")
    print("head -> N-1 hosts: seconds, inkctl vs rsync")
    print(f"{'N':>3} {'inkctl s':>9} {'rsync serial s':>15} {'rsync par s':>12} {'vs serial':>10} {'vs parallel':>12}")
    for n, _, _, med, _, _ in rows:
        print(f"{n:>3} {med['inkctl']:>9.2f} {med['rsync serial']:>15.2f} "
              f"{med['rsync parallel']:>12.2f} {med['inkctl'] / med['rsync serial']:>9.2f}x "
              f"{med['inkctl'] / med['rsync parallel']:>11.2f}x")
    print(f"\ninkctl peak RSS: {rss[REPO] / 1024:.1f} MiB for {model / 2**20:.0f} MiB, "
          f"{rss[BIG] / 1024:.1f} MiB for a model 4x as large ({rss[BIG] / rss[REPO]:.2f}x)")
    last = rows[-1]
    print(f"targets at N={last[0]}: <= 0.5x serial rsync ({last[3]['inkctl'] / last[3]['rsync serial']:.2f}x), "
          f"<= 1.0x parallel rsync ({last[3]['inkctl'] / last[3]['rsync parallel']:.2f}x), "
          f"Hub bytes 1x ({last[1] / model:.2f}x; per-node download {last[4] / model:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
