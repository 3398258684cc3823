"""The load generator against the fake engine's OpenAI server on loopback: it measures what the
server was told to do, counts failures instead of crashing on them, and writes results in the
formats others read (vllm bench serve, llama-benchy)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from inkctl.bench.load import Target, random_prompts, run_point
from inkctl.bench.metrics import compute, parse_slos, percentile, summary
from inkctl.errors import InkctlError
from tests.unit.openai_fake import ROOT, FakeServer

TTFT_S, DELAY_S = 0.3, 0.05  # large beside a loaded CI machine's scheduling delays (tens of ms)


def inkctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def point(url, *, concurrency=2, n=8, output_len=10, timeout=30.0, rate=None, warmup=True):
    target = Target(url, "fake-model", timeout_s=timeout)
    return asyncio.run(run_point(target, random_prompts(4, 16, output_len), concurrency=concurrency, rate=rate,
                                 num_prompts=n, duration_s=None, warmup=warmup))


@pytest.fixture(scope="module")
def quick():
    with FakeServer(FAKE_TTFT=0.01, FAKE_TOKEN_DELAY=0.002) as s:
        yield s


@pytest.fixture(scope="module")
def paced():
    with FakeServer(FAKE_TTFT=TTFT_S, FAKE_TOKEN_DELAY=DELAY_S) as s:
        yield s


def test_measured_ttft_and_tpot_match_what_the_server_was_told(paced):
    """Tolerance: median TTFT within -5 %/+25 % of 300 ms, median TPOT and ITL within +-20 % of
    50 ms. The server paces tokens on a clock; a loaded machine can only delay, never hurry,
    hence the asymmetric TTFT bound. (Exact figures are benchmarks/client.py's job, not a test's.)"""
    p = point(paced.url, concurrency=4, n=8, output_len=6)
    m = compute(p.outputs, p.duration)
    assert (m["completed"], m["failed"]) == (8, 0)
    assert m["total_output_tokens"] == 48  # the server's usage numbers, ignore_eos honoured
    assert TTFT_S * 0.95 * 1000 <= m["median_ttft_ms"] <= TTFT_S * 1.25 * 1000, m["median_ttft_ms"]
    assert DELAY_S * 0.8 * 1000 <= m["median_tpot_ms"] <= DELAY_S * 1.2 * 1000, m["median_tpot_ms"]
    assert DELAY_S * 0.8 * 1000 <= m["median_itl_ms"] <= DELAY_S * 1.2 * 1000, m["median_itl_ms"]
    assert m["median_e2el_ms"] >= (TTFT_S + 5 * DELAY_S) * 1000 * 0.95


def test_request_rate_point_completes_every_request(paced):
    p = point(paced.url, concurrency=None, n=4, output_len=2, rate=50.0)
    assert len(p.outputs) == 4 and all(o.ok for o in p.outputs)


@pytest.mark.parametrize("knobs, expect", [
    ({"FAKE_FAIL_EVERY": 3}, "HTTP 500"),
    ({"FAKE_DROP_EVERY": 3}, "cut"),
    ({"FAKE_HANG_EVERY": 3, "FAKE_HANG_S": 30}, "timed out"),
])
def test_failures_are_counted_not_crashed_on(knobs, expect):
    with FakeServer(**knobs) as s:
        p = point(s.url, concurrency=3, n=9, output_len=6, timeout=1.5, warmup=False)
    m = compute(p.outputs, p.duration)
    assert m["completed"] + m["failed"] == 9
    assert m["failed"] == 3, [o.error for o in p.outputs]
    assert all(expect in o.error for o in p.outputs if not o.ok), [o.error for o in p.outputs if not o.ok]
    assert m["total_output_tokens"] == 6 * 6  # failed requests count in nothing else


def test_a_refused_connection_is_a_failed_request_too():
    from tests.unit.openai_fake import free_port

    p = point(f"http://127.0.0.1:{free_port()}", concurrency=1, n=2, warmup=False)
    assert [o.ok for o in p.outputs] == [False, False]
    assert "cannot connect" in p.outputs[0].error


def test_percentiles_and_slos():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    s = summary([0.001, 0.002, 0.003])
    assert (s["mean"], s["median"], round(s["p99"], 2)) == (2.0, 2.0, 2.98)
    assert parse_slos(["ttft:500", "tpot:50"]) == {"ttft": 500.0, "tpot": 50.0}
    with pytest.raises(InkctlError, match="NAME one of ttft, tpot, e2el"):
        parse_slos(["latency:5"])


VLLM_FIELDS = {"date", "backend", "model_id", "num_prompts", "max_concurrency", "request_rate", "duration", "completed",
               "failed", "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
               "output_throughput", "total_token_throughput"}
VLLM_FIELDS |= {f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "std", "p90", "p99")}


def test_cli_sweep_writes_vllm_and_llama_benchy_results_and_compares_runs(quick, tmp_path):
    args = ("bench", "--url", quick.url, "--model", "fake-model", "-c", "1,2", "-n", "4", "--input-len", "8",
            "--output-len", "5", "--results-dir", str(tmp_path), "--goodput", "ttft:1000")
    r = inkctl(*args, "--format", "llama-benchy")
    assert r.returncode == 0, r.stdout + r.stderr
    assert max(len(line) for line in r.stdout.splitlines()[1:-1]) <= 80
    (run,) = [d for d in tmp_path.iterdir()]
    point1 = json.loads((run / "point-c1.json").read_text())
    assert VLLM_FIELDS <= set(point1), VLLM_FIELDS - set(point1)
    assert (point1["max_concurrency"], point1["completed"], point1["request_rate"]) == (1, 4, "inf")
    assert point1["request_goodput"] == pytest.approx(point1["request_throughput"])  # every request met 1 s TTFT
    assert point1["inkctl"]["client_cpu_us_per_token"] > 0
    benchy = json.loads((run / "llama-benchy.json").read_text())
    assert {"version", "timestamp", "latency_mode", "latency_ms", "model", "prefix_caching_enabled", "max_concurrency",
            "benchmarks"} <= set(benchy)
    b = benchy["benchmarks"][1]
    assert (b["concurrency"], b["prompt_size"], b["response_size"]) == (2, 8, 5)
    for k in ("pp_throughput", "tg_throughput", "ttfr", "e2e_ttft"):
        assert set(b[k]) == {"mean", "std", "values"} and len(b[k]["values"]) == 4

    r2 = inkctl(*args, "-o", "json")
    assert r2.returncode == 0, r2.stderr
    second = json.loads(r2.stdout)["run"]
    listing = inkctl("results", "--results-dir", str(tmp_path))
    assert run.name in listing.stdout and second in listing.stdout
    cmp = inkctl("results", run.name, second, "--results-dir", str(tmp_path), "-o", "json")
    rows = json.loads(cmp.stdout)["rows"]
    row = next(x for x in rows if x["point"] == "c=2" and x["metric"] == "median_ttft_ms")
    assert row["delta_pct"] == pytest.approx((row["b"] - row["a"]) / row["a"] * 100)
    text = inkctl("results", run.name, second, "--results-dir", str(tmp_path))
    assert "median_tpot_ms" in text.stdout and "%" in text.stdout


def test_results_against_a_recipes_recorded_numbers(quick, tmp_path):
    r = inkctl("bench", "--url", quick.url, "--model", "fake-model", "-c", "1,4", "-n", "4", "--output-len", "5",
               "--results-dir", str(tmp_path), "-o", "json")
    run = json.loads(r.stdout)["run"]
    c = inkctl("results", run, "--recipe", "recipes/inkling-small-2x-rtxpro6000-sglang.yaml", "--results-dir",
               str(tmp_path), "-o", "json")
    assert c.returncode == 0, c.stderr
    rows = json.loads(c.stdout)["rows"]
    decode = next(x for x in rows if x["metric"] == "decode_tok_s" and x["concurrency"] == 1)
    assert decode["recipe"] == 117.8 and decode["run"] > 0  # 1000 / median TPOT of the c=1 point
    assert decode["delta_pct"] == pytest.approx((decode["run"] - 117.8) / 117.8 * 100)
    aggregate = next(x for x in rows if x["metric"] == "aggregate_tok_s")
    assert aggregate["concurrency"] == 4 and aggregate["run"] > 0
    assert next(x for x in rows if x["metric"] == "kv_cache_tokens")["how"] == "not measured by inkctl bench"


def test_plot_without_matplotlib_says_how_to_get_it(quick, tmp_path):
    blocker = tmp_path / "no-matplotlib" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('blocked by the test')\n")
    env = dict(os.environ, PYTHONPATH=str(blocker.parent))
    runs = tmp_path / "runs"
    r = subprocess.run([sys.executable, "-m", "inkctl", "bench", "--url", quick.url, "--model", "fake-model", "-c", "1",
                        "-n", "2", "--results-dir", str(runs), "--plot"], cwd=ROOT, capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 1
    assert "--plot needs matplotlib, which is not installed" in r.stderr and "-m pip install matplotlib" in r.stderr
    assert not runs.exists()  # refused before measuring anything


def test_plot_draws_throughput_and_latency_against_concurrency(quick, tmp_path):
    pytest.importorskip("matplotlib")
    r = inkctl("bench", "--url", quick.url, "--model", "fake-model", "-c", "1,2", "-n", "2", "--output-len", "3",
               "--results-dir", str(tmp_path), "--plot")
    assert r.returncode == 0, r.stderr
    (run,) = list(tmp_path.iterdir())
    assert (run / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_usage_errors():
    r = inkctl("bench", "--url", "127.0.0.1:8000", "--model", "m")
    assert r.returncode == 2 and "give a base URL such as http://" in r.stderr
    r = inkctl("bench", "--url", "http://127.0.0.1:1", "--model", "m", "-c", "1,x")
    assert r.returncode == 2 and "comma-separated numbers" in r.stderr
