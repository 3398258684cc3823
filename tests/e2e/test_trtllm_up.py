"""TensorRT-LLM end to end on the test cluster, the fake engine playing ``trtllm-serve`` with its
real log lines and endpoints: validate, plan (the options file shown with its digest), up (the
file put on the host, mounted, read by the engine), status, logs, smoke, bench, down."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest
import yaml

from tests.e2e.conftest import containers, no_traceback, said

pytestmark = pytest.mark.cluster
PORT = 18200


def test_trtllm_validate_plan_up_status_logs_smoke_bench_down(cluster, inkctl, inventory, recipe, tmp_path):
    inv = inventory("h4")
    rec = recipe("trtllm", container={"env": {"FAKE_READY_AFTER": "1", "FAKE_GRAPHS_S": "1"}})

    v = inkctl("validate", rec)
    assert v.rc == 0 and "ok " in v.stdout, v

    plan = json.loads(inkctl("plan", rec, "--hosts", inv, "--output", "json").stdout)
    steps = [s for st in plan["stages"] for s in st["steps"]]
    run = next(s for s in steps if s["kind"] == "run" and s.get("files"))
    (put,) = [f for f in run["files"] if "/engine/" in f["path"]]
    text = put["content"]
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert put["sha256"] == digest and put["path"].endswith(f"/e2e-trtllm/engine/llm-api-options-{digest[:12]}.yaml")
    assert yaml.safe_load(text) == {"cuda_graph_config": {"enable_padding": True, "max_batch_size": 16},
                                    "moe_config": {"backend": "CUTLASS"},
                                    "speculative_config": {"decoding_type": "MTP", "num_nextn_predict_layers": 2}}
    argv = run["argv"]
    assert argv[argv.index("--entrypoint") + 1] == "trtllm-serve", argv
    j = argv.index("inkctl-fake-engine:latest")
    assert argv[j + 1:j + 8] == ["test/fake-moe", "--backend", "pytorch", "--tp_size", "2", "--ep_size", "2"], argv
    shown = inkctl("plan", rec, "--hosts", inv)
    assert shown.rc == 0 and f"sha256 {digest[:12]}" in said(shown.stdout), shown

    up = inkctl("up", rec, "--hosts", inv, "--results-dir", str(tmp_path / "runs"), timeout=180)
    assert up.rc == 0, up
    assert no_traceback(up.out), up
    url = f"http://{cluster.host('h4').address}:{PORT}"
    assert f"e2e-trtllm is up: {url}" in up.stdout and "smoke: 1/1 checks passed" in up.stdout, up
    assert containers(cluster, "h4", "e2e-trtllm") == ["inkctl-e2e-trtllm-r0 running"]

    # the engine read the file the plan put: the same bytes, at the path its argv names (and its
    # boot lines below show the options it read: speculative draft tokens, draft_len=2)
    dump = json.loads(cluster.docker("h4", "exec", "inkctl-e2e-trtllm-r0", "cat", "/tmp/inkctl-fake-engine.json",
                                     check=True).stdout)
    engine_argv = dump["argv"]
    path = engine_argv[engine_argv.index("--extra_llm_api_options") + 1]
    assert path == f"/inkctl/engine/llm-api-options-{digest[:12]}.yaml"
    inside = cluster.docker("h4", "exec", "inkctl-e2e-trtllm-r0", "cat", path, check=True).stdout
    assert hashlib.sha256(inside.encode()).hexdigest() == digest
    assert engine_argv[engine_argv.index("--tp_size") + 1] == "2" and engine_argv[engine_argv.index("--ep_size") + 1] == "2"

    # its endpoints: /health 200 with no body, Prometheus text where TensorRT-LLM serves it
    assert httpx.get(url + "/health", timeout=5, trust_env=False).status_code == 200
    prom = httpx.get(url + "/prometheus/metrics", timeout=5, trust_env=False).text
    assert 'trtllm_request_success_total{engine_type="trtllm",model_name="test/fake-moe",finished_reason="stop"}' in prom

    s = inkctl("status", rec, "--hosts", inv, "--output", "json")
    assert s.rc == 0, s
    doc = json.loads(s.stdout)
    assert doc["ok"] is True and doc["health"]["state"] == "up" and doc["ranks"][0]["state"] == "running"

    logs = inkctl("logs", rec, "--hosts", inv, "--tail", "400")
    assert logs.rc == 0, logs
    for line in ("[TensorRT-LLM] TensorRT-LLM version:", "[TRT-LLM] [I] Using LLM with PyTorch backend",
                 "has_speculative_draft_tokens=True", "Run generation only CUDA graph warmup for batch size=1, draft_len=2",
                 "Model init total -- ", "INFO:     Uvicorn running on"):
        assert line in logs.stdout, line

    smoke = inkctl("smoke", rec, "--hosts", inv, "-o", "json")
    assert smoke.rc == 0 and all(c["ok"] for c in json.loads(smoke.stdout)["checks"]), smoke

    b = inkctl("bench", rec, "--hosts", inv, "-c", "1,2", "-n", "4", "--input-len", "16", "--output-len", "8",
               "--results-dir", str(tmp_path / "runs"), "-o", "json")
    assert b.rc == 0, b
    points = json.loads(b.stdout)["points"]
    assert [p["completed"] for p in points] == [4, 4] and all(p["failed"] == 0 for p in points)
    boot = points[0]["inkctl"]["boot"]  # up's boot record, read from TensorRT-LLM's own lines
    assert boot["ranks"][0]["seconds"]["weights"] >= 0 and "graphs" in boot["ranks"][0]["seconds"], boot

    d = inkctl("down", rec, "--hosts", inv)
    assert d.rc == 0, d
    assert containers(cluster, "h4", "e2e-trtllm") == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=5, trust_env=False)


def test_trtllm_on_two_hosts_is_refused_before_anything_starts(cluster, inkctl, inventory, recipe):
    inv = inventory("h1", "h2", h1={"gpus": "0,1"}, h2={"gpus": "0,1"})
    rec = recipe("trtllm", name="e2e-trtllm2", hardware={"nodes": 2},
                 engine={"args": {"tensor_parallel": 4, "expert": {"size": 4}}})
    r = inkctl("up", rec, "--hosts", inv)
    assert r.rc != 0 and "TensorRT-LLM across 2 hosts runs under MPI" in said(r.out), r
    assert containers(cluster, "h1", "e2e-trtllm2") == [] and containers(cluster, "h2", "e2e-trtllm2") == []
