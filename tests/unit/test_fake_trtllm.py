"""The fake engine's TensorRT-LLM (tests/cluster/fake_engine/trtllm.py), run as a process here: the
habits the e2e tests rely on are TensorRT-LLM's (its click command, its options file, its boot
lines, its endpoints), and they are checked against the table dumped from the real serve.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.cluster.fake_engine import trtllm as fake  # noqa: E402


def _run(*args, env=None, timeout=10):
    return subprocess.run([sys.executable, "-m", "tests.cluster.fake_engine", "trtllm-serve", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_its_options_are_the_real_serve_commands():
    """Every option the fake takes, and no other, is in the table click built from serve.py."""
    from inkctl.recipe.checks.engine_versions import tables

    (table,) = tables("trtllm")
    assert set(fake.OPTIONS) == set(table.names)
    assert {o for o, takes in fake.OPTIONS.items() if not takes} == {
        f for f, info in table.flags.items() if not info["takes_value"]}


def test_an_unknown_option_is_refused_the_way_click_refuses_it():
    p = _run("nvidia/M", "--tensor-parallel-size", "8")
    assert p.returncode == 2
    assert p.stderr.endswith("Error: No such option: --tensor-parallel-size\n"), p.stderr
    assert p.stderr.startswith("Usage: trtllm-serve [OPTIONS] MODEL"), p.stderr
    p = _run("--tp_size", "8")
    assert p.returncode == 2 and "Error: Missing argument 'MODEL'." in p.stderr
    p = _run("nvidia/M", "--backend", "vllm")
    assert p.returncode == 2 and "Invalid value for '--backend'" in p.stderr


def test_a_missing_options_file_is_a_traceback_before_loading(tmp_path):
    p = _run("nvidia/M", "--extra_llm_api_options", str(tmp_path / "none.yaml"))
    assert p.returncode == 1
    assert "FileNotFoundError: [Errno 2] No such file or directory" in p.stderr
    assert "Loading safetensors" not in p.stdout


def test_the_options_file_subset_of_yaml():
    doc = fake.load_yaml("# c\nenable_attention_dp: true\nkv_cache_config:\n  dtype: fp8\n  free_gpu_memory_fraction: 0.8\n"
                         "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 3\n"
                         "cuda_graph_config:\n  batch_sizes: [1, 2, 4]\nlist:\n  - a\n  - 'b'\n")
    assert doc == {"enable_attention_dp": True, "kv_cache_config": {"dtype": "fp8", "free_gpu_memory_fraction": 0.8},
                   "speculative_config": {"decoding_type": "MTP", "num_nextn_predict_layers": 3},
                   "cuda_graph_config": {"batch_sizes": [1, 2, 4]}, "list": ["a", "b"]}
    with pytest.raises(ValueError):
        fake.load_yaml("a: 1\n  b: 2\n")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_boot_lines_endpoints_and_the_port_opening_only_once_loaded(tmp_path):
    opts = tmp_path / "extra.yaml"
    opts.write_text("speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 3\n")
    port = _free_port()
    import os

    env = {**os.environ, "FAKE_READY_AFTER": "1.5"}
    proc = subprocess.Popen([sys.executable, "-m", "tests.cluster.fake_engine", "trtllm-serve", "serve", "nvidia/M",
                             "--backend", "pytorch", "--tp_size", "8", "--ep_size", "8", "--config", str(opts),
                             "--host", "127.0.0.1", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.5)
        with pytest.raises(OSError):  # loading: nothing listens yet (uvicorn starts after the LLM is built)
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    assert r.status == 200 and r.read() == b""
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
            assert isinstance(json.loads(r.read()), list)  # iteration stats, not Prometheus text
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/prometheus/metrics") as r:
            text = r.read().decode()
        assert 'trtllm_num_requests_running{engine_type="trtllm",model_name="nvidia/M"} 0.0' in text
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/version") as r:
            assert json.loads(r.read()) == {"version": fake.VERSION}
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0]
    assert f"[TensorRT-LLM] TensorRT-LLM version: {fake.VERSION}" in out
    assert "[TRT-LLM] [I] Using LLM with PyTorch backend" in out
    assert "has_speculative_draft_tokens=True" in out
    assert "Run generation only CUDA graph warmup for batch size=1, draft_len=3" in out
    assert out.index("Model init total -- ") < out.index("[Autotuner] Autotuning process starts") < out.index(
        "Creating CUDA graph instances") < out.index("INFO:     Application startup complete.")
    assert f"INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)" in out


def test_more_ranks_than_gpus_and_ep_not_dividing_tp_are_refused():
    import os

    p = _run("nvidia/M", "--tp_size", "8", env={**os.environ, "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert p.returncode == 1 and "world_size (8) is larger than the number of GPUs on this node (4)" in p.stderr
    p = _run("nvidia/M", "--tp_size", "8", "--ep_size", "3")
    assert p.returncode == 1 and "must be divisible by moe_ep_size 3" in p.stderr
