"""vLLM native multi-node data parallelism on the test cluster: DP=2 x TP=2 across two hosts of two
GPUs each, each rank started with its own --data-parallel-* flags, the second headless; the head
answers for both."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.cluster import gpu
from tests.e2e.conftest import containers
from tests.e2e.test_up_down import PORT, address, engine_argv, http

pytestmark = pytest.mark.cluster
RECIPE = Path(__file__).parent / "recipes" / "vllm-dp-2.yaml"


def _after(argv: list[str], flag: str) -> str:
    assert flag in argv, (flag, argv)
    return argv[argv.index(flag) + 1]


@pytest.fixture
def two_gpu_hosts(cluster):
    """h1 and h2 (one GB10 each by default) answer nvidia-smi as two RTX PRO 6000 each, for the
    length of the test."""
    for name in ("h1", "h2"):
        gpu.install(cluster.host(name).bin_dir, "rtxpro6000x2")
    yield
    for name in ("h1", "h2"):
        gpu.install(cluster.host(name).bin_dir, cluster.host(name).profile)


def test_dp2_x_tp2_across_two_hosts_comes_up_with_per_rank_flags_and_answers(cluster, inkctl, inventory, two_gpu_hosts):
    inv = inventory("h1", "h2")
    r = inkctl("up", RECIPE, "--hosts", inv, "--output", "json", timeout=240)
    assert r.rc == 0, r
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert events[-1]["event"] == "finished" and events[-1]["ok"] is True
    checks = {(c["host"], c["check"]): c for e in events if e["event"] == "preflight" for c in e["checks"]}
    assert all(checks[(h, "gpus")]["detail"].startswith("2x NVIDIA RTX PRO 6000") for h in ("h1", "h2")), checks
    assert containers(cluster, "h1", "e2e-vllm-dp") == ["inkctl-e2e-vllm-dp-r0 running"]
    assert containers(cluster, "h2", "e2e-vllm-dp") == ["inkctl-e2e-vllm-dp-r1 running"]
    head, worker = engine_argv(cluster, "h1", "inkctl-e2e-vllm-dp-r0"), engine_argv(cluster, "h2", "inkctl-e2e-vllm-dp-r1")
    for argv in (head, worker):  # what every rank's process was started with
        assert _after(argv, "--data-parallel-size") == "2"
        assert _after(argv, "--data-parallel-size-local") == "1"
        assert _after(argv, "--data-parallel-address") == address(cluster, "h1")
        assert _after(argv, "--data-parallel-rpc-port") == "29613"
        assert _after(argv, "--tensor-parallel-size") == "2"
    assert "--headless" not in head and "--data-parallel-start-rank" not in head
    assert "--headless" in worker and _after(worker, "--data-parallel-start-rank") == "1"
    # the worker really joined the head's coordinator (the head waits for it before loading)
    logs = cluster.docker("h1", "logs", "inkctl-e2e-vllm-dp-r0", check=True)
    assert "Node rank 1 joined from " + address(cluster, "h2") in logs.stdout + logs.stderr
    url = f"http://{address(cluster, 'h1')}:{PORT}"
    assert http(url + "/health").status_code == 200
    answer = httpx.post(url + "/v1/chat/completions", json={"model": "fake", "max_tokens": 4,
                        "messages": [{"role": "user", "content": "hi"}]}, timeout=30, trust_env=False)
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"]
    # the headless rank serves no API
    with pytest.raises(httpx.HTTPError):
        http(f"http://{address(cluster, 'h2')}:{PORT}/health")
    assert inkctl("down", RECIPE, "--hosts", inv).rc == 0
    assert containers(cluster, "h1", "e2e-vllm-dp") == [] and containers(cluster, "h2", "e2e-vllm-dp") == []

