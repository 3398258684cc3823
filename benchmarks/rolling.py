#!/usr/bin/env python3
"""A fleet's rolling update under load, against today's replace-everything as the baseline, in
the same run, on simulated hosts behind the REAL vllm-router:

- a fleet of R replicas of the fake engine (GPU subsets of one 8-GPU host; each new version
  "loads" for --boot seconds before it serves, as a real engine loads its weights);
- C clients send chat completions through the router the whole time (each one after the other);
- ``inkctl up`` of a changed recipe: (a) ``fleet.rollout.strategy: rolling`` (the default),
  (b) rolling with ``surge: true`` (one more replica of the new version on a spare GPU pair
  first), (c) ``all_at_once`` (the baseline: every replica replaced together);
- for each: the requests sent and failed while ``up`` ran (and 2 s after), the longest run of
  failures, the time ``up`` took, and per replica the seconds it was out of the router (from
  ``up -o json``'s events).

Target (issue 30): 0 failed requests with 2 or more replicas.

    python benchmarks/rolling.py [--replicas 2] [--boot 5] [--clients 4] [--net-id 11] [--keep-cluster]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PORT, ROUTER_PORT, PROM_PORT = 18400, 30480, 29400
BACK = re.compile(r"replica (\d+) \((\S+)\) runs the new version and is back in the router \(([\d.]+) s out of it\)")


def recipe_text(replicas: int, version: int, boot: float, strategy: str, surge: bool = False) -> str:
    return f"""name: bench-rolling
model: {{repo: test/fake-model, served_name: fake}}
hardware: {{accelerator: h200, compute_capability: "9.0", nodes: 1, gpus_per_host: 2}}
engine:
  kind: vllm
  version: fake
  image: {{ref: "inkctl-fake-engine:latest", pull: false}}
  args: {{tensor_parallel: 2, port: {PORT}, max_model_len: {4096 + version}}}
container:
  runtime: docker
  gpus: all
  ipc: host
  network: host
  env: {{FAKE_ITL: "0.02", FAKE_READY_AFTER: "{boot if version else 0}"}}
health: {{timeout_s: 120, interval_s: 0.5}}
smoke: {{prompts: ["Say hi."], max_tokens: 8, timeout_s: 30}}
fleet:
  replicas: {replicas}
  port_stride: 10
  rollout: {{strategy: {strategy}, surge: {str(surge).lower()}}}
  router: {{kind: vllm, policy: round_robin, port: {ROUTER_PORT}, prometheus_port: {PROM_PORT},
            health_check_interval_s: 2, image: "vllm/vllm-router:latest"}}
"""


class Clients:
    """C clients, each sending one chat completion after the other through the router."""

    def __init__(self, url: str, n: int):
        self.url, self.sent, self.failed, self.fail_times = url, 0, 0, []
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(n)]

    def _one(self, k: int, i: int) -> bool:
        body = json.dumps({"model": "fake", "max_tokens": 16,
                           "messages": [{"role": "user", "content": f"client {k} request {i}"}]}).encode()
        req = urllib.request.Request(self.url + "/v1/chat/completions", body, {"content-type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return "choices" in json.loads(r.read().decode())
        except Exception:  # noqa: BLE001 - a failed request is what is counted
            return False

    def _run(self, k: int) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            ok = self._one(k, i)
            with self._lock:
                self.sent += 1
                if not ok:
                    self.failed += 1
                    self.fail_times.append(time.monotonic())
            if not ok:
                time.sleep(0.05)  # a client that retries at once would only count the same outage faster

    def __enter__(self) -> "Clients":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(120)

    def outage_s(self) -> float:
        """The longest stretch from a failed request to the last failed one before a success gap
        of 1 s: how long clients saw errors in one go."""
        ts = sorted(self.fail_times)
        best, start = 0.0, None
        for a, b in zip([None, *ts], ts):
            if a is None or b - a > 1.0:
                start = b
            best = max(best, b - (start if start is not None else b))
        return best


HOME: Path | None = None  # a home of the run's own: the test cluster's host keys, nothing of the user's


def inkctl(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSH_", "INKCTL_"))}
    if HOME is not None:
        env["HOME"] = str(HOME)
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def measure(work: Path, inv: Path, router: str, args, version: int, strategy: str, surge: bool = False) -> dict:
    rec = work / f"v{version}-{strategy}.yaml"
    rec.write_text(recipe_text(args.replicas, version, args.boot, strategy, surge))
    with Clients(router, args.clients) as clients:
        time.sleep(2.0)
        base_sent, base_failed = clients.sent, clients.failed
        t0 = time.monotonic()
        r = inkctl("up", str(rec), "--hosts", str(inv), "-o", "json")
        up_s = time.monotonic() - t0
        time.sleep(2.0)
    if r.returncode != 0:
        raise SystemExit(f"up ({strategy}) failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    out_of_router = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            m = BACK.search(json.loads(line).get("text", "") or "")
            if m:
                out_of_router[m.group(2)] = float(m.group(3))
    return {"strategy": strategy + (" + surge" if surge else ""), "up_s": round(up_s, 2), "sent": clients.sent - base_sent,
            "failed": clients.failed - base_failed, "longest_outage_s": round(clients.outage_s(), 2),
            "before_failed": base_failed, "out_of_router_s": out_of_router}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--boot", type=float, default=5.0, help="seconds a new version loads before it serves")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--net-id", type=int, default=int(os.environ.get("INKCTL_E2E_NET_ID", "0")) + 140)
    ap.add_argument("--keep-cluster", action="store_true")
    args = ap.parse_args()
    if not 1 <= args.replicas <= 3:
        raise SystemExit("--replicas: 1 to 3 (GPU pairs of one 8-GPU host, one pair kept for the surge)")
    from tests.cluster import Cluster, router_image

    c = Cluster.up(1, podman_hosts=(), profiles={"h1": "h200x8"}, net_id=args.net_id)
    router_image.load(c, ["h1"], kind="vllm")
    work = Path(tempfile.mkdtemp(prefix="bench-rolling-"))
    global HOME
    HOME = work / "home"
    (HOME / ".ssh").mkdir(parents=True, mode=0o700)
    (HOME / ".ssh" / "known_hosts").write_text(Path(c.known_hosts).read_text())
    inv = work / "inv.yaml"
    import yaml

    hosts = yaml.safe_load(Path(c.inventory).read_text())["hosts"]
    hosts[0]["gpus"] = ",".join(str(i) for i in range(2 * args.replicas + 2))  # room for the surge replica
    inv.write_text(yaml.safe_dump({"hosts": hosts[:1]}))
    router = f"http://{c.hosts[0].address}:{ROUTER_PORT}"
    rows = []
    try:
        first = work / "v0.yaml"
        first.write_text(recipe_text(args.replicas, 0, args.boot, "rolling"))
        r = inkctl("up", str(first), "--hosts", str(inv))
        if r.returncode != 0:
            raise SystemExit(f"first up failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        rows.append(measure(work, inv, router, args, 1, "rolling"))
        rows.append(measure(work, inv, router, args, 2, "rolling", surge=True))
        rows.append(measure(work, inv, router, args, 3, "all_at_once"))
    finally:
        inkctl("down", str(work / "v0.yaml"), "--hosts", str(inv))
        if not args.keep_cluster:
            c.down()
    print(f"rolling update: {args.replicas} replicas behind vllm-router 0.1.17, {args.clients} clients, "
          f"new version boots in {args.boot:g} s")
    print(f"{'strategy':<17} {'up s':>6} {'sent':>6} {'failed':>7} {'outage s':>9}  out of the router per replica (s)")
    for x in rows:
        per = ", ".join(f"{k}: {v:.1f}" for k, v in sorted(x["out_of_router_s"].items())) or "-"
        print(f"{x['strategy']:<17} {x['up_s']:>6.1f} {x['sent']:>6} {x['failed']:>7} {x['longest_outage_s']:>9.1f}  {per}")
    base = rows[-1]
    for x in rows[:-1]:
        print(f"{x['strategy']} / all_at_once: up time x{x['up_s'] / base['up_s']:.2f}, failed requests "
              f"{x['failed']} vs {base['failed']}")
    print(json.dumps({"replicas": args.replicas, "boot_s": args.boot, "clients": args.clients, "runs": rows}))


if __name__ == "__main__":
    main()
