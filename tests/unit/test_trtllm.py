"""TensorRT-LLM through the engine seam (inkctl/engines/trtllm.py): its spec fills every slot, the
bundled recipe plans the argv trtllm-serve's own click command takes, the options file is a Put
the plan shows with its sha256, multi-host is refused, the boot lines and metric names are read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inkctl.plan.deploy import build_plan
from inkctl.plan.step import Put, Run
from inkctl.recipe.engine_registry import kinds, spec_of
from inkctl.recipe.checks.engine_versions import table_for, tables, targeted_release
from inkctl.recipe.reading.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "deepseek-r1-nvfp4-8x-b200-tp-ep-trtllm.yaml"


def _plan(path: Path = RECIPE):
    loaded = load_recipe(path)
    return loaded.recipe, build_plan(loaded.recipe, loaded.hosts)


def test_trtllm_is_registered_and_fills_every_slot():
    from tests.unit.test_engine_spec import _filled

    assert "trtllm" in kinds()
    spec = spec_of("trtllm")
    assert spec.name == "TensorRT-LLM" and _filled(spec) == []
    assert spec.metrics.path == "/prometheus/metrics"  # its /metrics is JSON iteration stats


def test_the_planned_argv_is_what_trtllm_serves_click_command_takes():
    """Every option of the planned command is one the table click built from serve.py has, a
    value after each that takes one, none after a flag; MODEL first."""
    r, plan = _plan()
    run = next(s for s in plan.steps() if isinstance(s, Run) and s.container is not None)
    assert run.container.entrypoint == "trtllm-serve"
    argv = list(run.container.command)
    assert argv[0] == "nvidia/DeepSeek-R1-0528-FP4-v2"
    table, exact = table_for("trtllm", targeted_release(r) or "")
    assert table is not None and table.version == "git-00209af1" and not exact  # the image's release has no table
    i = 1
    while i < len(argv):
        flag = argv[i]
        assert flag in table.flags, flag
        info = table.flags[flag]
        if info["takes_value"]:
            assert i + 1 < len(argv) and not argv[i + 1].startswith("--"), flag
            if info["choices"]:
                assert argv[i + 1] in info["choices"], (flag, argv[i + 1])
            i += 2
        else:
            i += 1
    assert argv[argv.index("--backend") + 1] == "pytorch"
    assert argv[argv.index("--tp_size") + 1] == "8" and argv[argv.index("--ep_size") + 1] == "8"
    assert argv[-4:] == ["--host", "0.0.0.0", "--port", "8000"]


def test_the_options_file_is_a_put_with_its_sha256_and_its_name_carries_it():
    import hashlib

    r, plan = _plan()
    puts = [p for p in plan.puts() if "/engine/" in p.path]
    assert len(puts) == 1
    (put,) = puts
    assert isinstance(put, Put) and isinstance(put.content, str)
    digest = hashlib.sha256(put.content.encode()).hexdigest()
    assert put.sha256 == digest and put.path.endswith(f"/engine/llm-api-options-{digest[:12]}.yaml")
    run = next(s for s in plan.steps() if isinstance(s, Run) and s.container is not None)
    argv = list(run.container.command)
    assert argv[argv.index("--extra_llm_api_options") + 1] == f"/inkctl/engine/llm-api-options-{digest[:12]}.yaml"
    assert any(m.target == "/inkctl/engine" and m.read_only for m in run.container.mounts)
    doc = yaml.safe_load(put.content)
    assert doc == {"enable_attention_dp": True, "cuda_graph_config": {"enable_padding": True, "max_batch_size": 512},
                   "kv_cache_config": {"dtype": "fp8"}, "stream_interval": 10, "moe_config": {"backend": "CUTLASS"},
                   "speculative_config": {"decoding_type": "MTP", "num_nextn_predict_layers": 1}}


def test_plan_shows_the_options_file_with_its_digest():
    p = subprocess.run([sys.executable, "-m", "inkctl", "plan", str(RECIPE), "--full"], capture_output=True, text=True,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr
    from inkctl.engines.trtllm import options_file
    import hashlib

    name, text = options_file(load_recipe(RECIPE).recipe) or ("", "")
    out = "".join(p.stdout.split())  # folded at any width: compare without whitespace
    assert f"/engine/{name}(mode644,sha256{hashlib.sha256(text.encode()).hexdigest()}):" in out, p.stdout
    assert "|speculative_config:" in out and "|decoding_type:MTP" in out


def _validate(tmp_path, **changes) -> tuple[int, str]:
    doc = yaml.safe_load(RECIPE.read_text())
    for dotted, value in changes.items():
        node = doc
        *path, last = dotted.split("__")
        for k in path:
            node = node.setdefault(k, {})
        node[last] = value
    f = tmp_path / "r.yaml"
    f.write_text(yaml.safe_dump(doc))
    p = subprocess.run([sys.executable, "-m", "inkctl", "validate", str(f)], capture_output=True, text=True, cwd=ROOT)
    return p.returncode, " ".join((p.stdout + p.stderr).split())


def test_multi_host_is_refused_clearly(tmp_path):
    rc, out = _validate(tmp_path, hardware__nodes=2, engine__args__tensor_parallel=16, engine__args__expert={"size": 16})
    assert rc != 0, out
    assert "hardware.nodes: TensorRT-LLM across 2 hosts runs under MPI" in out, out
    assert "hint: use one host (hardware.nodes: 1)" in out, out


def test_an_option_set_twice_and_a_served_name_are_refused(tmp_path):
    rc, out = _validate(tmp_path, engine__args__kv_cache_dtype="fp8")
    assert rc != 0 and "engine.llm_api_options.kv_cache_config: kv_cache_config is set by engine.args.kv_cache_dtype too" in out, out
    rc, out = _validate(tmp_path, model__served_name="r1")
    assert rc != 0 and "model.served_name: trtllm-serve serves the model under MODEL" in out, out
    rc, out = _validate(tmp_path, engine__args__expert={"size": 3})
    assert rc != 0 and "expert size 3 does not divide tensor_parallel 8" in out, out


def test_an_extra_flag_of_another_engine_or_one_inkctl_sets_is_refused(tmp_path):
    rc, out = _validate(tmp_path, engine__args__extra=["--ep_size", "4"])
    assert rc != 0 and "--ep_size is already in the planned argv" in out, out
    rc, out = _validate(tmp_path, engine__args__extra=["--mem-fraction-static", "0.8"])
    assert rc != 0 and "TensorRT-LLM refuses it at start" in out, out
    rc, out = _validate(tmp_path, engine__args__extra=["--max_num_tokens", "8192", "--foo_bar"])
    assert rc == 0 and "not checked: --foo_bar: inkctl's TensorRT-LLM table is of a commit (git-00209af1)" in out, out


def test_speculative_methods_map_to_its_decoding_types(tmp_path):
    from inkctl.engines.trtllm import speculative_config

    r = load_recipe(RECIPE).recipe
    assert speculative_config(r) == {"decoding_type": "MTP", "num_nextn_predict_layers": 1}
    rc, out = _validate(tmp_path, speculative={"method": "eagle3", "num_speculative_tokens": 3})
    assert rc != 0 and "speculative.draft: eagle3 needs a draft model" in out, out
    rc, out = _validate(tmp_path, speculative={"method": "medusa"})
    assert rc != 0 and "TensorRT-LLM has no speculative decoding 'medusa'" in out, out
    doc = yaml.safe_load(RECIPE.read_text())
    doc["speculative"] = {"method": "eagle3", "num_speculative_tokens": 3, "draft": {"repo": "nvidia/r1-eagle3"}}
    f = tmp_path / "e.yaml"
    f.write_text(yaml.safe_dump(doc))
    r = load_recipe(f).recipe
    assert speculative_config(r) == {"decoding_type": "Eagle", "max_draft_len": 3, "speculative_model_dir": "nvidia/r1-eagle3",
                                     "eagle3_one_model": True}


def test_the_boot_lines_of_the_fake_are_read_as_phases():
    """The fake prints TensorRT-LLM's real lines (tests/cluster/fake_engine/trtllm.py)."""
    from inkctl.execute.supervise.bootphases import read_log

    lines = [
        "[TensorRT-LLM] TensorRT-LLM version: 1.2.0",
        "[12/07/2026-18:00:00] [TRT-LLM] [I] Use 63.32 GB for model weights.",
        "Loading safetensors weights in parallel: 100%|██████████| 4/4 [00:00<00:00, 81.92it/s]",
        "Model init total -- 49.14s",
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 5.95 GiB for max tokens in paged KV cache (86720).",
        "[12/07/2026-18:00:50] [TRT-LLM] [I] Creating CUDA graph instances for 3 batch sizes.",
        "[12/07/2026-18:00:51] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=4, draft_len=1",
        "[12/07/2026-18:01:03] [TRT-LLM] [I] Run generation only CUDA graph warmup for batch size=1, draft_len=1",
    ]
    p = read_log(lines, "trtllm")
    assert p.seconds == {"weights": 49.14, "graphs": 13.0}
    assert p.kv_cache_gib == 5.95


def test_prometheus_export_and_top_read_its_metrics_path():
    from inkctl.export.prometheus import scrape_config

    cfg = scrape_config("d", [("r0", "trtllm", "http://10.0.0.1:8000"), ("r1", "vllm", "http://10.0.0.2:8000")], None, [])
    labels = [c["labels"] for c in cfg["scrape_configs"][0]["static_configs"]]
    assert labels[0]["__metrics_path__"] == "/prometheus/metrics" and "__metrics_path__" not in labels[1]


def test_k8s_export_puts_the_options_file_in_a_configmap(tmp_path):
    out = tmp_path / "k8s"
    p = subprocess.run([sys.executable, "-m", "inkctl", "export", "k8s", str(RECIPE), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    cm = yaml.safe_load((out / "configmap-engine.yaml").read_text())
    (name, text), = cm["data"].items()
    assert name.startswith("llm-api-options-") and yaml.safe_load(text)["enable_attention_dp"] is True
    lws = yaml.safe_load((out / "leaderworkerset.yaml").read_text())
    pod = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert {"name": "engine-files", "configMap": {"name": cm["metadata"]["name"]}} in pod["volumes"]


def test_the_commit_table_is_the_click_commands_dump():
    (t,) = tables("trtllm")
    doc = json.loads((ROOT / "inkctl" / "recipe" / "engine_releases" / t.file).read_text())
    assert doc["commit"] == "00209af149e7774406881a37283dce303571eb11" and len(doc["source_sha256"]) == 64
    flags = doc["flags"]
    assert flags["--tp_size"]["dest"] == flags["--tensor_parallel_size"]["dest"] == "tensor_parallel_size"
    assert flags["--config"]["dest"] == flags["--extra_llm_api_options"]["dest"] == "extra_llm_api_options"
    assert flags["--backend"]["choices"] == ["_autodeploy", "pytorch", "tensorrt", "trt"]
    assert flags["--trust_remote_code"]["takes_value"] is False and flags["--port"]["default"] == 8000
    assert flags["--reasoning_parser"]["unread"]  # its choices come from a registry the dump stubs


@pytest.mark.parametrize("field,value", [("all2all_backend", "deepep"), ("deepep_mode", "normal")])
def test_sglang_and_vllm_expert_fields_are_refused(tmp_path, field, value):
    rc, out = _validate(tmp_path, engine__args__expert={"size": 8, field: value})
    assert rc != 0 and f"{field} is not a TensorRT-LLM option" in out, out
