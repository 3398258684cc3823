"""Benchmark `inkctl build`: bytes sent per host and wall time of a patched build of a ~200 MB base
on 2 and 8 hosts, built on each host (context over SSH) vs built once locally and delivered
(docker save | ssh docker load); plus the cache-hit rebuild.

    sudo python3 benchmarks/build.py [--sizes 2,8] [--net-id 7] [--keep] [--json FILE]

It brings up its own test cluster beside any other (tests.cluster with net id K: netns
ink<K>h<i>, 10.231.K.0/24), all docker hosts, and takes it down at the end unless --keep.
Bytes are counted twice: what inkctl says it sent (its own count of the context it streams) and
what really crossed each host's network interface (the host's eth0 receive counter in
/proc/net/dev, read in its network namespace before and after: SSH handshake, commands, the
context, framing, everything), for both ways of building.
Targets: on-host builds send at most 1.1x the context per host; a cache-hit `build` of 8 hosts
takes at most 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BASE = "inkctl-bench-base:latest"
BALLAST_MB = 100  # the fake engine image is ~108 MB; this brings the base to ~210 MB
TARGET = "/usr/lib/python3/dist-packages/fake_engine/openai_server.py"
CONTROL = "unix:///var/run/docker.sock"

RECIPE = """name: bench-build
model: {{repo: test/fake-model, served_name: fake}}
hardware: {{accelerator: h200, compute_capability: "9.0", nodes: {n}, gpus_per_host: 1}}
engine:
  kind: vllm
  version: fake
  image: {{ref: "inkctl-bench:patched", pull: false}}
  args: {{tensor_parallel: {n}, port: 8000}}
container: {{runtime: docker, gpus: all, ipc: host, network: host}}
network: {{socket_ifname: eth0}}
patches:
  mode: build
  base: {base}
  files:
    - {{kind: replace, source: openai_server.py, path: {target}}}
smoke: {{enabled: false}}
"""


def sh(*argv, **kw):
    return subprocess.run([str(a) for a in argv], check=True, capture_output=True, text=True, **kw)


def make_base() -> None:
    """FROM the fake engine + a layer of random bytes, on the control daemon (once)."""
    if subprocess.run(["docker", "-H", CONTROL, "image", "inspect", BASE], capture_output=True).returncode == 0:
        return
    with tempfile.TemporaryDirectory() as d:
        Path(d, "Dockerfile").write_text(
            f"FROM inkctl-fake-engine:latest\nRUN head -c {BALLAST_MB * 1000 * 1000} /dev/urandom > /opt/ballast.bin\n")
        sh("docker", "-H", CONTROL, "build", "-q", "-t", BASE, d, env=dict(os.environ, DOCKER_BUILDKIT="0"))


def distribute_base(cluster) -> None:
    """docker save | docker load into every host that lacks the base (setup, not measured)."""
    want = sh("docker", "-H", CONTROL, "image", "inspect", "--format", "{{.Id}}", BASE).stdout.strip()

    def one(h):
        have = subprocess.run(["docker", "-H", f"unix://{h.socket}", "image", "inspect", "--format", "{{.Id}}", BASE],
                              capture_output=True, text=True).stdout.strip()
        if have == want:
            return
        save = subprocess.Popen(["docker", "-H", CONTROL, "save", BASE], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", f"unix://{h.socket}", "load", "-q"], stdin=save.stdout, check=True,
                       capture_output=True)
        save.wait()

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, cluster.hosts))


def workspace(tmp: Path, cluster, n: int) -> tuple[Path, Path]:
    (tmp / "recipes").mkdir(parents=True, exist_ok=True)
    (tmp / "patches").mkdir(exist_ok=True)
    original = sh("docker", "-H", CONTROL, "run", "--rm", "--network", "none", "--entrypoint", "cat", BASE, TARGET).stdout
    (tmp / "patches" / "openai_server.py").write_text(original + "\n# patched by benchmarks/build.py (one file, as in the RTX PRO 6000 registry record)\n")
    recipe = tmp / "recipes" / f"bench-{n}.yaml"
    recipe.write_text(RECIPE.format(n=n, base=BASE, target=TARGET))
    import yaml

    inv = yaml.safe_load(Path(cluster.inventory).read_text())
    hosts = tmp / f"hosts-{n}.yaml"
    hosts.write_text(yaml.safe_dump({"hosts": inv["hosts"][:n]}))
    return recipe, hosts


def remove_tag(cluster, names, tag, local=False):
    for h in cluster.hosts:
        if h.name in names:
            subprocess.run(["docker", "-H", f"unix://{h.socket}", "image", "rm", "--force", tag], capture_output=True)
    if local:
        subprocess.run(["docker", "-H", CONTROL, "image", "rm", "--force", tag], capture_output=True)


def wire_rx(cluster, names) -> dict[str, int]:
    """Bytes each host's eth0 has received so far (its network namespace's /proc/net/dev)."""
    out = {}
    for h in cluster.hosts:
        if h.name in names:
            dev = sh("nsenter", f"--net={h.netns_path}", "--", "cat", "/proc/net/dev").stdout
            line = next(x for x in dev.splitlines() if x.strip().startswith("eth0:"))
            out[h.name] = int(line.split(":", 1)[1].split()[0])
    return out


def measure(loaded, plan, local: bool, cluster):
    """(report, wall s, connect s, bytes received on the wire per host)."""
    from inkctl.execute.image.build import ensure_image
    from inkctl.execute.hosts.connect import close_all, connect_all

    names = [h.name for h in loaded.hosts]
    before = wire_rx(cluster, names)
    t0 = time.monotonic()
    transports = connect_all(list(loaded.hosts))
    t_conn = time.monotonic() - t0
    try:
        report = ensure_image(loaded, plan, transports, None, local=local)
    finally:
        close_all(transports)
    wall = time.monotonic() - t0
    after = wire_rx(cluster, names)
    return report, wall, t_conn, [after[n] - before[n] for n in names]


def cli_cache_hit(recipe: Path, hosts: Path, env: dict) -> float:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "inkctl", "build", str(recipe), "--hosts", str(hosts), "-o", "json"],
                       capture_output=True, text=True, env=env)
    wall = time.monotonic() - t0
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and all(h["action"] == "cache-hit" and h["bytes_sent"] == 0 for h in doc["hosts"]), p.stderr
    return wall


def run_size(cluster, tmp: Path, n: int, env: dict) -> dict:
    from inkctl.execute.hosts.connect import close_all, connect_all
    from inkctl.execute.state.images import HostImages
    from inkctl.execute.image.pinning import observe
    from inkctl.plan.image.build import build_context
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs
    from inkctl.recipe.lockfile import write_lock
    from inkctl.recipe.reading.source import load_recipe

    recipe, hosts = workspace(tmp, cluster, n)
    loaded = load_recipe(recipe, (), hosts)
    tr = connect_all(list(loaded.hosts))
    try:
        pins, per_host = observe(loaded, {h.name: HostImages(tr[h.name], "docker") for h in loaded.hosts})
    finally:
        close_all(tr)
    write_lock(loaded, pins, per_host)
    loaded = load_recipe(recipe, (), hosts)
    plan = build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded))
    ctx = build_context(loaded)
    names = [h.name for h in loaded.hosts]
    out = {"hosts": n, "context_bytes": ctx.size, "context_tar_bytes": len(ctx.tar())}

    remove_tag(cluster, names, ctx.tag)
    rep, wall, conn, wire = measure(loaded, plan, local=False, cluster=cluster)
    assert all(h.action == "built" for h in rep.hosts), rep
    out["on_host"] = {"wall_s": round(wall, 2), "connect_s": round(conn, 2), "context_sent_bytes": rep.context_sent_bytes,
                      "bytes_per_host": [h.bytes_sent for h in rep.hosts], "wire_rx_per_host": wire,
                      "sent_over_context_tar": round(max(h.bytes_sent for h in rep.hosts) / out["context_tar_bytes"], 3)}
    rep, wall, conn, wire = measure(loaded, plan, local=False, cluster=cluster)
    assert all(h.action == "cache-hit" and h.bytes_sent == 0 for h in rep.hosts), rep
    out["cache_hit"] = {"in_process_s": round(wall, 3), "connect_s": round(conn, 3), "wire_rx_per_host": wire,
                        "cli_s": round(min(cli_cache_hit(recipe, hosts, env) for _ in range(3)), 3)}

    remove_tag(cluster, names, ctx.tag, local=True)
    rep, wall, conn, wire = measure(loaded, plan, local=True, cluster=cluster)
    assert all(h.action == "delivered" for h in rep.hosts), rep
    out["local_save_load"] = {"wall_s": round(wall, 2), "local_build_s": rep.local.seconds,
                              "bytes_per_host": [h.bytes_sent for h in rep.hosts], "wire_rx_per_host": wire}
    remove_tag(cluster, names, ctx.tag, local=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="2,8")
    p.add_argument("--net-id", type=int, default=7)
    p.add_argument("--keep", action="store_true", help="leave the bench cluster up")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    from tests.cluster import Cluster

    t0 = time.monotonic()
    cluster = Cluster.up(max(sizes), podman_hosts=(), net_id=args.net_id)
    make_base()
    distribute_base(cluster)
    print(f"cluster of {max(sizes)} docker hosts and base {BASE} ready in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix="inkctl-bench-build-"))
    home = tmp / "home" / ".ssh"
    home.mkdir(parents=True)
    shutil.copy(cluster.known_hosts, home / "known_hosts")
    os.environ["HOME"] = str(tmp / "home")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    results = []
    try:
        for n in sizes:
            results.append(run_size(cluster, tmp / f"n{n}", n, env))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not args.keep:
            cluster.down()
            subprocess.run(["docker", "-H", CONTROL, "image", "rm", "--force", BASE], capture_output=True)
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def report(results: list[dict]) -> str:
    lines = [f"base {BASE} (~{108 + BALLAST_MB} MB), one file replaced ({TARGET})", ""]
    for r in results:
        on, loc, hit = r["on_host"], r["local_save_load"], r["cache_hit"]
        per_on, per_loc = max(on["bytes_per_host"]), max(loc["bytes_per_host"])
        wire_on, wire_loc, wire_hit = max(on["wire_rx_per_host"]), max(loc["wire_rx_per_host"]), max(hit["wire_rx_per_host"])
        lines += [
            f"{r['hosts']} hosts: context {r['context_bytes']} B in files, {r['context_tar_bytes']} B as tar, "
            f"{on['context_sent_bytes']} B gzipped",
            f"  build on host : {on['wall_s']:7.2f} s wall, {per_on:>11,} B sent per host by inkctl's count "
            f"({on['sent_over_context_tar']:.2f}x the context tar; target <= 1.1x)",
            f"                  {wire_on:>11,} B received on the wire per host (eth0; SSH, probe and commands too): "
            f"{wire_on / r['context_tar_bytes']:.2f}x the context tar",
            f"  local + load  : {loc['wall_s']:7.2f} s wall, {per_loc:>11,} B sent per host by inkctl's count "
            f"(local build {loc['local_build_s']:.2f} s), {wire_loc:,} B on the wire",
            f"  ratio         : local/on-host bytes per host on the wire {wire_loc / wire_on:,.0f}x "
            f"(inkctl's count {per_loc / per_on:,.0f}x), wall {loc['wall_s'] / on['wall_s']:.2f}x",
            f"  cache hit     : {wire_hit:,} B on the wire per host (connect and ask)",
            f"  cache hit     : {hit['in_process_s']:.3f} s in process ({hit['connect_s']:.3f} s of it connecting), "
            f"{hit['cli_s']:.3f} s as `inkctl build` (target <= 1 s)",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
