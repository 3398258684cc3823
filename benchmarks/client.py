#!/usr/bin/env python3
"""Is the bench client what is measured? Median ITL against the server's fixed per-token delay,
and the client's CPU time per generated token, at concurrency 1, 16, 64 and 256.

The server is the fake engine (tests/cluster/fake_engine) in its own process on loopback,
streaming one token every D seconds on a clock (first token after D). The client is
inkctl's load generator (inkctl/bench/load.py, asyncio + inkctl/client/wire.py) in this
process. Baselines, side by side in the same run, the same requests through httpx's
AsyncClient streaming:
  httpx lines  aiter_lines, one json.loads per event: the obvious way to write it;
  httpx fast   httpx's fast path: aiter_raw (the body's bytes as they arrive, no text decoding,
               no line iterator), events split on b"\n" by hand, and the same event parser as
               inkctl's client (orjson where installed, else json.loads): what is left is
               httpx's transport against inkctl's own HTTP/1.1 reader.

Target (issue 11): median ITL within 5 % of D at every concurrency; CPU per token printed.
When ITL misses at high concurrency, check the server's CPU too: a single Python process
serving 256 streams on a shared 2-core machine is itself near its limit.

    python benchmarks/client.py [--delay-ms 20] [--seconds 4] [--concurrency 1,16,64,256] [--no-baseline]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inkctl.bench.load import Target, random_prompts, run_point  # noqa: E402
from inkctl.bench.metrics import compute  # noqa: E402

TARGET_PCT = 5.0
OUTPUT_LEN = 64


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(delay_s: float) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), FAKE_TOKEN_DELAY=str(delay_s), FAKE_TTFT=str(delay_s))
    proc = subprocess.Popen([sys.executable, "-m", "tests.cluster.fake_engine", "vllm", "serve", "m",
                             "--host", "127.0.0.1", "--port", str(port)], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1, trust_env=False).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proc.kill()
    sys.exit("the fake server did not come up")


def server_cpu(proc: subprocess.Popen) -> float:
    with open(f"/proc/{proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def httpx_point(url: str, concurrency: int, seconds: float, bodies: list[dict],
                      fast: bool = False) -> tuple[list[float], int, float]:
    """A baseline client: httpx AsyncClient, aiter_lines and json per event (``fast``: aiter_raw,
    split by hand, inkctl's event parser). Returns (ITLs, tokens, CPU s)."""
    import httpx

    from inkctl.client.stream import _loads

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    itls: list[float] = []
    tokens = 0
    failed = 0
    async with httpx.AsyncClient(trust_env=False, limits=limits, timeout=60) as client:
        async def one(body):
            try:
                await attempt(body)
            except httpx.HTTPError:
                nonlocal failed
                failed += 1

        async def attempt(body):
            nonlocal tokens
            last = None
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                if fast:
                    buf = b""
                    async for chunk in r.aiter_raw():
                        buf += chunk
                        *events, buf = buf.split(b"\n")
                        for raw in events:
                            if not raw.startswith(b"data:") or raw.startswith(b"data: [DONE]"):
                                continue
                            ch = _loads(raw[5:]).get("choices") or []
                            if ch and ch[0].get("delta", {}).get("content"):
                                now = time.perf_counter()
                                if last is not None:
                                    itls.append(now - last)
                                last = now
                                tokens += 1
                    return
                async for line in r.aiter_lines():
                    if not line.startswith("data:") or line == "data: [DONE]":
                        continue
                    msg = json.loads(line[5:])
                    ch = msg.get("choices") or []
                    if ch and ch[0].get("delta", {}).get("content"):
                        now = time.perf_counter()
                        if last is not None:
                            itls.append(now - last)
                        last = now
                        tokens += 1

        await asyncio.gather(*(one(bodies[i % len(bodies)]) for i in range(concurrency)))  # warm-up
        itls.clear()
        tokens = 0
        cpu0 = time.process_time()
        t0 = time.perf_counter()

        async def worker(k):
            i = k
            while time.perf_counter() - t0 < seconds:
                await one(bodies[i % len(bodies)])
                i += concurrency

        await asyncio.gather(*(worker(k) for k in range(concurrency)))
        return itls, tokens, time.process_time() - cpu0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--delay-ms", type=float, default=20.0, help="the server's per-token delay D")
    ap.add_argument("--seconds", type=float, default=4.0, help="measured seconds per point")
    ap.add_argument("--concurrency", default="1,16,64,256")
    ap.add_argument("--no-baseline", action="store_true", help="skip the httpx baseline")
    args = ap.parse_args()
    delay = args.delay_ms / 1000.0
    levels = [int(x) for x in args.concurrency.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2 * max(levels) + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    proc, url = start_server(delay)
    target = Target(url, "m", timeout_s=120)
    prompts = random_prompts(64, 32, OUTPUT_LEN)
    bodies = [target.body(p) for p in prompts]
    print(f"server: fake engine, D = {args.delay_ms:g} ms per token, {OUTPUT_LEN} tokens per request; "
          f"{os.cpu_count()} CPU(s), load {os.getloadavg()[0]:.1f}")
    print(f"{'conc':>5} | {'inkctl ITL ms':>13} {'vs D':>7} {'us CPU/tok':>10} {'srv CPU':>7} | "
          f"{'httpx lines: ITL ms':>19} {'us/tok':>7} {'ratio':>6} | {'httpx fast: ITL ms':>18} {'us/tok':>7} {'ratio':>6}")
    worst = 0.0
    try:
        for c in levels:
            s0 = server_cpu(proc)
            p = asyncio.run(run_point(target, prompts, concurrency=c, rate=None, num_prompts=None, duration_s=args.seconds))
            m = compute(p.outputs, p.duration)
            srv = (server_cpu(proc) - s0) / max(p.duration, 1e-9)
            ours_us = p.cpu_s / max(m["total_output_tokens"], 1) * 1e6
            off = (m["median_itl_ms"] - args.delay_ms) / args.delay_ms * 100
            worst = max(worst, abs(off))
            line = (f"{c:>5} | {m['median_itl_ms']:>13.2f} {off:>+6.1f}% {ours_us:>10.1f} {srv:>6.2f}c |")
            if not args.no_baseline:
                for fast in (False, True):
                    itls, tokens, cpu = asyncio.run(httpx_point(url, c, args.seconds, bodies, fast=fast))
                    base_itl = statistics.median(itls) * 1000 if itls else float("nan")
                    base_us = cpu / max(tokens, 1) * 1e6
                    line += f" {base_itl:>{18 if fast else 19}.2f} {base_us:>7.1f} {base_us / ours_us:>5.1f}x" + ("" if fast else " |")
            if m["failed"]:
                line += f"  ({m['failed']} failed)"
            print(line, flush=True)
    finally:
        proc.kill()
    verdict = "met" if worst <= TARGET_PCT else "MISSED"
    print(f"target: median ITL within {TARGET_PCT:g}% of D at every concurrency: {verdict} (worst {worst:.1f}%)")
    print("ratio: the baseline's CPU per token over inkctl's (higher: inkctl cheaper); srv CPU: server cores busy")


if __name__ == "__main__":
    main()
