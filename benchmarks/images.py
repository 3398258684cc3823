#!/usr/bin/env python3
"""Images at wire speed: putting an image on N hosts, ``inkctl images push-to-hosts`` (the chain:
host to host, each loading and forwarding at once) against what a person writes, ``docker save
IMAGE | ssh HOST docker load`` from the head to every other host at once (the star), on the same
simulated hosts in the same run; every host's link capped with tc (``--link-mbit``, 200 Mbit/s
each way by default) so that the network, not the shared CPU, is what is measured.

Per N (2, 4, 8; the head h1 has the image, the N-1 others lack it, emptied between runs):
  one copy      the physical limit: the same pipe from h1 to h2 alone (one link)
  inkctl        ``python -m inkctl images push-to-hosts`` (the whole process: connect, look,
                the layers each host has, the chain)
  pipes         N-1 ``docker save | ssh docker load`` from h1 at once
  head bytes    bytes that left h1's link during each run (veth counters), in images
With ``--layered`` also: an image whose base layer (the fake engine, on every host) the
receivers have; inkctl sends the top layer only, the pipes the whole image.

    python benchmarks/images.py [--sizes 2 4 8] [--image-mib 128] [--link-mbit 200] [--layered]
                           [--net-id 5] [--keep-cluster]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.testbed import Testbed  # noqa: E402  (the relay benchmarks' shared set-up)
IMAGE = "bench-images:1"
TOP = "bench-images-top:1"
BASE = "inkctl-fake-engine:latest"


def recipe_text(n: int, image: str) -> str:
    return f"""name: bench-images
model: {{repo: bench/none, served_name: fake}}
hardware: {{accelerator: h200, compute_capability: "9.0", nodes: {n}, gpus_per_host: 1}}
engine:
  kind: vllm
  version: fake
  image: {{ref: "{image}", pull: false}}
  multinode: native
  master_port: 29751
  args: {{tensor_parallel: {n}, port: 18150}}
container: {{runtime: docker}}
smoke: {{enabled: false}}
"""


class Bench(Testbed):
    def round(self, image: str, size: int, n: int) -> dict:
        import json

        names = [f"h{i}" for i in range(1, n + 1)]
        rec, inv = self.setup(f"{image.replace(':', '-')}-{n}", n, recipe_text(n, image))
        self.drop_image(image, names[1:])
        one = self.save_load(image, ["h2"])
        self.drop_image(image, names[1:])
        sent0 = self.head_sent()
        ink, out = self.inkctl("images", "push-to-hosts", rec, "--hosts", inv, "-o", "json")
        ink_head = self.head_sent() - sent0
        rep = json.loads(out.strip().splitlines()[-1])
        self.drop_image(image, names[1:])
        sent0 = self.head_sent()
        par = self.save_load(image, names[1:])
        par_head = self.head_sent() - sent0
        row = dict(n=n, one=one, ink=ink, par=par, ink_head=ink_head / size, par_head=par_head / size,
                   received=max(rep["sent"].values()) / size)
        print(f"{image} N={n}: one copy {one:.1f} s, inkctl {ink:.1f} s, pipes {par:.1f} s\n"
              f"  inkctl {ink / one:.2f}x one copy, {ink / par:.2f}x pipes; head sent "
              f"{row['ink_head']:.2f}x (pipes {row['par_head']:.2f}x)", flush=True)
        return row


def table(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(f"{'N':>2} {'one':>6} {'inkctl':>7} {'pipes':>6} {'ink/one':>8} {'ink/pipes':>9} {'head':>6} "
          f"{'pipes':>6} {'recv':>5}")
    for r in rows:
        print(f"{r['n']:>2} {r['one']:>6.1f} {r['ink']:>7.1f} {r['par']:>6.1f} {r['ink'] / r['one']:>7.2f}x "
              f"{r['ink'] / r['par']:>8.2f}x {r['ink_head']:>5.2f}x {r['par_head']:>5.2f}x {r['received']:>4.2f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--image-mib", type=int, default=128)
    ap.add_argument("--link-mbit", type=float, default=200)
    ap.add_argument("--layered", action="store_true", help="also an image whose base the hosts have")
    ap.add_argument("--net-id", type=int, default=int(os.environ.get("INKCTL_E2E_NET_ID", "9")))
    ap.add_argument("--keep-cluster", action="store_true")
    args = ap.parse_args(argv)
    from tests.cluster import Cluster

    cluster = Cluster.up(max(args.sizes), podman_hosts=(), net_id=args.net_id)
    work = Path(tempfile.mkdtemp(prefix="inkctl-bench-images-"))
    whole: list[dict] = []
    layered: list[dict] = []
    try:
        bench = Bench(cluster, work)
        bench.make_image(IMAGE, args.image_mib)
        size = bench.archive_size(IMAGE)
        top = 0
        if args.layered:
            bench.make_image(TOP, args.image_mib // 8, BASE)
            top = bench.archive_size(TOP)
        cluster.limit_links(args.link_mbit)
        wire = size * 8 / (args.link_mbit * 1e6)
        print(f"image: {size / 2**20:.1f} MiB archive; links {args.link_mbit:g} Mbit/s each way\n"
              f"  (one copy on the wire: {wire:.1f} s); {len(cluster.hosts)} hosts", flush=True)
        for n in args.sizes:
            whole.append(bench.round(IMAGE, size, n))
        for n in args.sizes if args.layered else []:
            layered.append(bench.round(TOP, top, n))
    finally:
        cluster.limit_links(None)
        for h in cluster.hosts:
            cluster.docker(h.name, "rmi", "-f", IMAGE, TOP)
        import shutil

        shutil.rmtree(work, ignore_errors=True)
        if not args.keep_cluster:
            cluster.down()
    table(f"images: {size / 2**20:.0f} MiB, links {args.link_mbit:g} Mbit/s; seconds, ratios\n"
          "in this run; head: bytes h1 sent, recv: bytes a host received (images)", whole)
    if layered:
        table(f"layered: {top / 2**20:.0f} MiB archive, its base ({BASE}) on every host", layered)
    last = whole[-1]
    print(f"targets at N={last['n']}: inkctl/one copy <= 1.5 ({last['ink'] / last['one']:.2f}),\n"
          f"  inkctl/pipes <= 0.3 ({last['ink'] / last['par']:.2f}), head bytes ~1x "
          f"({last['ink_head']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
