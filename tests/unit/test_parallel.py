"""Data and expert parallelism: the GPU arithmetic (located errors from `inkctl validate`) and the
per-host flags planned for vLLM's multi-node data parallelism and SGLang's DP attention."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from inkctl.plan.deploy import build_plan
from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe
from inkctl.recipe.checks.rules import recipe_findings

VLLM_DP = {
    "name": "dsv3",
    "model": {"repo": "deepseek-ai/DeepSeek-V3"},
    "hardware": {"accelerator": "h200", "nodes": 2, "gpus_per_host": 8},
    "engine": {"kind": "vllm", "version": "v0.28.0", "image": {"ref": "vllm/vllm-openai:v0.28.0"},
               "args": {"tensor_parallel": 1, "data_parallel": {"size": 16},
                        "expert": {"all2all_backend": "deepep_low_latency", "eplb": True}}},
    "network": {"rdma": True, "socket_ifname": "eth0"},
    "smoke": {"enabled": False},
}


def _write(tmp: Path, doc: dict) -> Path:
    p = tmp / "r.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def _validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inkctl", "validate", str(path)], capture_output=True, text=True)


def _engine_argv(r: Recipe, hosts: list[Host]) -> dict[str, list[str]]:
    plan = build_plan(r, hosts)
    out = {}
    for st in plan.stages:
        for s in st.steps:
            c = getattr(s, "container", None)
            if c is not None:
                out[s.host] = list(c.command)
    return out


def hosts(n: int) -> list[Host]:
    return [Host(name=f"h{i}", address=f"10.0.0.{10 + i}") for i in range(n)]


def test_vllm_multinode_data_parallel_plans_per_host_flags():
    r = Recipe.model_validate(VLLM_DP)
    assert [p for p in recipe_findings(r) if p.severity == "error"] == []
    argv = _engine_argv(r, hosts(2))
    head, worker = argv["h0"], argv["h1"]
    assert head[head.index("--data-parallel-size"):][:8] == [
        "--data-parallel-size", "16", "--data-parallel-size-local", "8", "--data-parallel-address", "10.0.0.10",
        "--data-parallel-rpc-port", "13345"]
    assert "--headless" not in head and "--data-parallel-start-rank" not in head
    i = worker.index("--data-parallel-start-rank")
    assert worker[i:i + 3] == ["--data-parallel-start-rank", "8", "--headless"]
    for a in (head, worker):
        assert "--nnodes" not in a and "--master-addr" not in a  # DP ranks meet through the DP address
        assert a[a.index("--enable-expert-parallel"):][:4] == [
            "--enable-expert-parallel", "--all2all-backend", "deepep_low_latency", "--enable-eplb"]


def test_sglang_dp_attention_and_deepep():
    doc = {**VLLM_DP, "engine": {"kind": "sglang", "version": "0.5.20", "image": {"ref": "lmsysorg/sglang:v0.5.20"},
                                 "args": {"tensor_parallel": 16, "data_parallel": {"size": 16, "attention": True},
                                          "expert": {"all2all_backend": "deepep", "deepep_mode": "auto",
                                                     "deepep_max_dispatch_tokens_per_rank": 256}}}}
    r = Recipe.model_validate(doc)
    assert [p.message for p in recipe_findings(r) if p.severity == "error"] == []
    plan = build_plan(r, hosts(2))
    run = next(s for st in plan.stages for s in st.steps if getattr(s, "container", None) is not None)
    a = list(run.container.command)
    assert a[a.index("--dp-size"):][:9] == ["--dp-size", "16", "--enable-dp-attention", "--ep-size", "16",
                                            "--moe-a2a-backend", "deepep", "--deepep-mode", "auto"]
    assert ("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "256") in run.container.env


def test_dp_x_tp_arithmetic_error_is_located(tmp_path):
    doc = {**VLLM_DP, "engine": {**VLLM_DP["engine"], "args": {"tensor_parallel": 8, "data_parallel": {"size": 4}}}}
    p = _validate(_write(tmp_path, doc))
    assert p.returncode != 0
    assert (f"{tmp_path / 'r.yaml'}:" in p.stdout + p.stderr)
    text = " ".join((p.stdout + p.stderr).split())
    assert ("engine.args.tensor_parallel: tensor_parallel 8 x pipeline_parallel 1 x data_parallel 4 = 32 GPUs, "
            "but the hosts provide 2 x 8 = 16") in text


def test_dp_must_split_over_hosts_and_ep_must_divide_tp():
    r = Recipe.model_validate({**VLLM_DP, "hardware": {"accelerator": "h200", "nodes": 2, "gpus_per_host": 3},
                               "engine": {**VLLM_DP["engine"], "args": {"tensor_parallel": 2, "data_parallel": {"size": 3}}}})
    errs = {p.path: p.message for p in recipe_findings(r) if p.severity == "error"}
    assert errs["engine.args.data_parallel.size"] == "data_parallel 3 does not split evenly over 2 hosts (vLLM runs data_parallel / nodes ranks on each)"
    doc = {**VLLM_DP, "engine": {"kind": "sglang", "version": "0.5.20", "image": {"ref": "lmsysorg/sglang:v0.5.20"},
                                 "args": {"tensor_parallel": 16, "data_parallel": {"size": 6, "attention": True},
                                          "expert": {"size": 5}}}}
    errs = {p.path: p.message for p in recipe_findings(Recipe.model_validate(doc)) if p.severity == "error"}
    assert errs["engine.args.data_parallel.size"] == "data_parallel 6 does not divide tensor_parallel 16 (DP attention splits the tensor group)"
    assert errs["engine.args.expert.size"] == "expert size 5 does not divide tensor_parallel 16 (SGLang's expert ranks live inside the tensor group)"


def test_deepep_across_hosts_needs_rdma_and_engine_specific_fields_are_refused():
    doc = {**VLLM_DP, "network": {"socket_ifname": "eth0"}}
    errs = {p.path: p.message for p in recipe_findings(Recipe.model_validate(doc)) if p.severity == "error"}
    assert errs["engine.args.expert.all2all_backend"].startswith("DeepEP between hosts runs over RDMA")
    doc = {**VLLM_DP, "engine": {**VLLM_DP["engine"], "args": {"tensor_parallel": 1, "data_parallel": {"size": 16, "attention": True},
                                                               "expert": {"deepep_mode": "auto"}}}}
    errs = {p.path: p.message for p in recipe_findings(Recipe.model_validate(doc)) if p.severity == "error"}
    assert errs["engine.args.data_parallel.attention"] == "DP attention is SGLang's (--enable-dp-attention)"
    assert errs["engine.args.expert.deepep_mode"] == "deepep_mode is SGLang's (--deepep-mode)"
