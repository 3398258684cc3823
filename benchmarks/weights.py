#!/usr/bin/env python3
"""Weights and images at wire speed: putting a model (and an image) on N hosts, inkctl's relay
against the physical limit and against the hand-made star, on the same simulated hosts in the
same run, every host's link capped with tc (``--link-mbit``, 200 Mbit/s each way by default)
so that the network, not the shared CPU, is what is measured.

Per N (2, 4, 8), model on the head, the other N-1 hosts empty (emptied between runs, not timed):
  one copy        the physical limit: rsync of the model from h1 to h2 alone (one link)
  inkctl          ``python -m inkctl weights`` (whole process: connect, scan, the chain of
                  relays, every byte hashed on arrival); its timeline per host at the
                  largest N, from the run's ``weights_phase`` events
  inkctl fresh    the same with every host empty, the head too: the Hub download and the relay
                  overlap (the Hub stand-in sits behind the head's capped link, as a WAN would)
  rsync parallel  what a person writes: N-1 rsyncs from the head at once (the star)
  per-node        the other baseline, measured: every host (the head too) downloads the model
                  from the Hub itself, all at once, with curl (the Hub's resolve URLs, one file
                  after another, as a ``huggingface-cli download`` per node does); the Hub's own
                  byte counter gives its bytes (N models), the wall time its seconds
  head bytes      bytes that left the head's link during the inkctl and the rsync runs (veth
                  counters), in models
Images (``--image-mib``): ``inkctl images push-to-hosts`` against ``docker save | ssh HOST docker
load`` from the head to every other host at once; one copy: the same pipe to one host.
Memory: inkctl's peak RSS for the model and for one 4x as large (links not capped: CPU-bound).

Targets at N = 8: inkctl / one copy <= 1.5, inkctl / rsync parallel <= 0.3, head bytes ~1x.

    python benchmarks/weights.py [--sizes 2 4 8] [--model-mib 256] [--shards 8] [--link-mbit 200]
                            [--image-mib 128] [--net-id 7] [--keep-cluster]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.testbed import Testbed  # noqa: E402  (the relay benchmarks' shared set-up)
REPO = "bench/weights-model"
BIG = "bench/weights-model-4x"
IMAGE = "bench-relay-image:1"


def recipe_text(n: int, repo: str, image: str = "inkctl-fake-engine:latest") -> str:
    return f"""name: bench-weights
model: {{repo: {repo}, served_name: fake}}
hardware: {{accelerator: h200, compute_capability: "9.0", nodes: {n}, gpus_per_host: 1}}
engine:
  kind: vllm
  version: fake
  image: {{ref: "{image}", pull: false}}
  multinode: native
  master_port: 29751
  args: {{tensor_parallel: {n}, port: 18150}}
container:
  runtime: docker
  mounts: [{{source: "${{HF_HOME}}", target: /root/.cache/huggingface}}]
smoke: {{enabled: false}}
"""


class Bench(Testbed):
    def __init__(self, cluster, hub, work: Path):
        super().__init__(cluster, work, env={"HF_ENDPOINT": hub.url})
        self.hub = hub

    def setup_model(self, n: int, repo: str, image: str = "inkctl-fake-engine:latest") -> tuple[Path, Path]:
        rec, inv = self.setup(f"{repo.replace('/', '-')}-{image.replace(':', '-')}-{n}", n, recipe_text(n, repo, image))
        if not rec.with_name("recipe.lock.json").exists() and image == "inkctl-fake-engine:latest":
            self.inkctl("lock", rec, "--hosts", inv)
        return rec, inv

    def inkctl_timed(self, *args) -> tuple[float, dict[str, dict[str, float]]]:
        """Seconds of one whole inkctl process and, with ``-o json``, its timeline: host -> phase
        -> seconds since the process started (the events' wall-clock ``ts``)."""
        wall0 = time.time()
        seconds, out = self.inkctl(*args)
        return seconds, timeline(out, wall0)

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
        return self.in_head(["rsync", "-a", "--mkpath", "-e", f"ssh -F {self.cluster.ssh_config}", f"{src}/",
                             f"{dst_host}:{dst}/"])

    def rsync(self, names: list[str], repo: str) -> float:
        """rsync from the head to ``names``, all at once."""
        src = str(self.hub_dir("h1", repo))
        t0 = time.monotonic()
        procs = [subprocess.Popen(self.rsync_argv(src, n, repo)) for n in names]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"rsync failed: {codes}")
        return time.monotonic() - t0


PHASES = ("connected", "scanned", "relay_started", "listening", "pointed", "first_byte", "fetched", "removed")


def timeline(json_lines: str, wall0: float) -> dict[str, dict[str, float]]:
    """host -> phase -> seconds since ``wall0``, from ``weights_phase`` events (first of each)."""
    import json

    out: dict[str, dict[str, float]] = {}
    for line in json_lines.splitlines():
        if not line.startswith("{"):
            continue
        ev = json.loads(line)
        if ev.get("event") == "weights_phase":
            out.setdefault(ev["host"], {}).setdefault(ev["phase"], round(ev["ts"] - wall0, 2))
    return out


def print_timeline(tl: dict[str, dict[str, float]], total: float) -> None:
    cols = [p for p in PHASES if any(p in v for v in tl.values())]
    short = {"connected": "conn", "scanned": "scan", "relay_started": "start", "listening": "listen",
             "pointed": "point", "first_byte": "1st B", "fetched": "done", "removed": "rm"}
    print(f"timeline (s since the process started; the process ended at {total:.1f} s)")
    print(f"{'host':>5} " + " ".join(f"{short[c]:>6}" for c in cols))
    for host, v in tl.items():
        print(f"{host:>5} " + " ".join(f"{v[c]:>6.2f}" if c in v else f"{'-':>6}" for c in cols))


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
                       cwd=ROOT, env=bench.env(), capture_output=True, text=True, timeout=900)
    if p.returncode:
        raise SystemExit(f"inkctl weights failed: {p.stderr}")
    return int(p.stdout.strip())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--model-mib", type=int, default=256)
    ap.add_argument("--link-mbit", type=float, default=200)
    ap.add_argument("--image-mib", type=int, default=128, help="0: no image runs")
    ap.add_argument("--rss", action=argparse.BooleanOptionalAction, default=True, help="the memory runs")
    ap.add_argument("--net-id", type=int, default=int(os.environ.get("INKCTL_E2E_NET_ID", "9")))
    ap.add_argument("--keep-cluster", action="store_true")
    args = ap.parse_args(argv)
    from tests.cluster import Cluster, net
    from tests.cluster.hub import Hub, make_model

    n_max = max(args.sizes)
    cluster = Cluster.up(n_max, podman_hosts=(), net_id=args.net_id)
    work = Path(tempfile.mkdtemp(prefix="inkctl-bench-weights-"))
    hub = Hub(net.gateway(args.net_id))
    shard_mib = max(1, args.model_mib // args.shards)
    hub.add(make_model(str(work / "hub"), REPO, args.shards, shard_mib))
    if args.rss:
        hub.add(make_model(str(work / "hub"), BIG, args.shards * 4, shard_mib, seed=1))
    model = sum(f.size for f in hub.repos[REPO].files.values() if _needed(f.path))
    wire = model * 8 / (args.link_mbit * 1e6)
    rows, images, rss = [], [], {}
    timelines: dict[int, tuple[dict, float]] = {}
    try:
        hub.start()
        bench = Bench(cluster, hub, work)
        cluster.limit_links(args.link_mbit)
        print(f"model: {model / 2**20:.1f} MiB in {args.shards} shards; links {args.link_mbit:g} Mbit/s each way "
              f"(one copy on the wire: {wire:.1f} s); hosts {', '.join(h.name for h in cluster.hosts)}", flush=True)
        for n in args.sizes:
            names = [f"h{i}" for i in range(1, n + 1)]
            rec, inv = bench.setup_model(n, REPO)
            node, node_bytes = bench.per_node(names, REPO)  # writes beside the caches, removes what it wrote
            bench.empty(names)
            before, sent0 = hub.stats["bytes"], bench.head_sent()
            fresh, _ = bench.inkctl("weights", rec, "--hosts", inv)
            hub_bytes = hub.stats["bytes"] - before
            fresh_head = bench.head_sent() - sent0
            bench.empty(["h2"])
            one = bench.rsync(["h2"], REPO)
            bench.empty(names[1:])
            sent0 = bench.head_sent()
            ink, tl = bench.inkctl_timed("weights", rec, "--hosts", inv, "-o", "json")
            timelines[n] = (tl, ink)
            ink_head = bench.head_sent() - sent0
            bench.empty(names[1:])
            sent0 = bench.head_sent()
            par = bench.rsync(names[1:], REPO)
            par_head = bench.head_sent() - sent0
            rows.append(dict(n=n, one=one, ink=ink, fresh=fresh, par=par, hub=hub_bytes / model, node=node,
                             node_hub=node_bytes / model,
                             ink_head=ink_head / model, fresh_head=fresh_head / model, par_head=par_head / model))
            print(f"N={n}: one copy {one:.1f} s; inkctl {ink:.1f} s ({ink / one:.2f}x one copy, "
                  f"{ink / par:.2f}x rsync); fresh from the Hub {fresh:.1f} s ({fresh / one:.2f}x); "
                  f"rsync parallel {par:.1f} s; head sent {ink_head / model:.2f}x (rsync {par_head / model:.2f}x); "
                  f"Hub bytes {hub_bytes / model:.2f}x, per-node download {node_bytes / model:.2f}x in {node:.1f} s "
                  f"(fresh/per-node {fresh / node:.2f}x)",
                  flush=True)
        if args.image_mib:
            bench.make_image(IMAGE, args.image_mib)
            for n in args.sizes:
                names = [f"h{i}" for i in range(1, n + 1)]
                rec, inv = bench.setup_model(n, REPO, IMAGE)
                bench.drop_image(IMAGE, names[1:])
                one = bench.save_load(IMAGE, ["h2"])
                bench.drop_image(IMAGE, names[1:])
                sent0 = bench.head_sent()
                ink, _ = bench.inkctl("images", "push-to-hosts", rec, "--hosts", inv)
                ink_head = bench.head_sent() - sent0
                bench.drop_image(IMAGE, names[1:])
                sent0 = bench.head_sent()
                par = bench.save_load(IMAGE, names[1:])
                par_head = bench.head_sent() - sent0
                images.append(dict(n=n, one=one, ink=ink, par=par, ink_head=ink_head / (args.image_mib << 20),
                                   par_head=par_head / (args.image_mib << 20)))
                print(f"image N={n}: one copy {one:.1f} s; inkctl {ink:.1f} s ({ink / one:.2f}x one copy, "
                      f"{ink / par:.2f}x save|ssh|load); save|ssh|load parallel {par:.1f} s", flush=True)
            bench.drop_image(IMAGE, [h.name for h in cluster.hosts])
        if args.rss:
            cluster.limit_links(None)
            n = min(args.sizes)
            names = [f"h{i}" for i in range(1, n + 1)]
            for repo in (REPO, BIG):
                rec, inv = bench.setup_model(n, repo)
                bench.empty(names)
                rss[repo] = measure_rss(bench, rec, inv)
        bench.empty([h.name for h in cluster.hosts])
    finally:
        hub.stop()
        cluster.limit_links(None)
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep_cluster:
            cluster.down()
    print()
    print(f"weights: {model / 2**20:.0f} MiB, links {args.link_mbit:g} Mbit/s; times in s; ratios in this run")
    print(f"{'N':>2} {'one':>6} {'inkctl':>7} {'fresh':>6} {'rsync':>6} {'ink/one':>8} {'ink/rsync':>9} "
          f"{'fresh/one':>9} {'head':>5} {'rsync':>6} {'hub':>5}")
    for r in rows:
        print(f"{r['n']:>2} {r['one']:>6.1f} {r['ink']:>7.1f} {r['fresh']:>6.1f} {r['par']:>6.1f} "
              f"{r['ink'] / r['one']:>7.2f}x {r['ink'] / r['par']:>8.2f}x {r['fresh'] / r['one']:>8.2f}x "
              f"{r['ink_head']:>4.2f}x {r['par_head']:>5.2f}x {r['hub']:>4.2f}x")
    print("fresh hosts vs every node downloading itself (measured): Hub bytes in models, seconds")
    print(f"{'N':>2} {'inkctl':>7} {'per-node':>9} {'fresh s':>8} {'per-node s':>11} {'fresh/per-node':>15}")
    for r in rows:
        print(f"{r['n']:>2} {r['hub']:>6.2f}x {r['node_hub']:>8.2f}x {r['fresh']:>8.1f} {r['node']:>11.1f} "
              f"{r['fresh'] / r['node']:>14.2f}x")
    if images:
        print(f"\nimages: {args.image_mib} MiB; inkctl images push-to-hosts vs docker save | ssh | docker load")
        print(f"{'N':>2} {'one':>6} {'inkctl':>7} {'pipes':>6} {'ink/one':>8} {'ink/pipes':>9} {'head':>5} {'pipes':>6}")
        for r in images:
            print(f"{r['n']:>2} {r['one']:>6.1f} {r['ink']:>7.1f} {r['par']:>6.1f} {r['ink'] / r['one']:>7.2f}x "
                  f"{r['ink'] / r['par']:>8.2f}x {r['ink_head']:>4.2f}x {r['par_head']:>5.2f}x")
    if rss:
        print(f"\ninkctl peak RSS: {rss[REPO] / 1024:.1f} MiB for {model / 2**20:.0f} MiB, "
              f"{rss[BIG] / 1024:.1f} MiB for a model 4x as large ({rss[BIG] / rss[REPO]:.2f}x)")
    if timelines:
        n = max(timelines)
        print(f"\nN={n}, inkctl weights, one host per line:")
        print_timeline(*timelines[n])
    last = rows[-1]
    print(f"targets at N={last['n']}: inkctl/one copy <= 1.5 ({last['ink'] / last['one']:.2f}), "
          f"inkctl/rsync parallel <= 0.3 ({last['ink'] / last['par']:.2f}), head bytes ~1x ({last['ink_head']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
