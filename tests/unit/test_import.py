"""`inkctl import` round trips: a sparkrun recipe and a vLLM recipes config (both written for these
tests, in those tools' formats) become inkctl recipes whose planned command carries every flag of the
original; `inkctl recipes --from` lists a git repository (a local bare repo, file://) at a pinned commit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

SPARKRUN = """\
recipe_version: "1"
name: Qwen3 30B on one Spark
description: a sparkrun recipe written for the tests
model: Qwen/Qwen3-30B-A3B-FP8
runtime: vllm
container: vllm-node:latest
min_nodes: 1
max_nodes: 2
mods: [fix-gb10]
defaults:
  port: 8000
  host: 0.0.0.0
  tensor_parallel: 1
  gpu_memory_utilization: 0.75
  max_model_len: 32768
env:
  VLLM_USE_FLASHINFER_SAMPLER: "1"
command: |
  vllm serve Qwen/Qwen3-30B-A3B-FP8 \\
      --served-model-name qwen3 \\
      --reasoning-parser qwen3 \\
      --tool-call-parser hermes --enable-auto-tool-choice \\
      --tensor-parallel-size {tensor_parallel} \\
      --gpu-memory-utilization {gpu_memory_utilization} \\
      --max-model-len {max_model_len} \\
      --kv-cache-dtype fp8 \\
      --enable-prefix-caching \\
      --max-num-batched-tokens 8192 \\
      --host {host} --port {port}
"""

VLLM_CONFIG = """\
no-enable-prefix-caching: true
max-cudagraph-capture-size: 2048
max-num-batched-tokens: 8192
stream-interval: 20
speculative-config: '{"model":"nvidia/gpt-oss-120b-Eagle3-v2","num_speculative_tokens":3,"method":"eagle3","draft_tensor_parallel_size":1}'
"""


def inkctl(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "inkctl", *args], capture_output=True, text=True, cwd=cwd, env=env)


def planned_command(recipe: Path) -> list[str]:
    p = inkctl("plan", str(recipe), "-o", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    image = yaml.safe_load(recipe.read_text())["engine"]["image"]["ref"]
    argv = next(s["argv"] for st in doc["stages"] for s in st["steps"] if s.get("argv") and image in s["argv"])
    entrypoint = argv[argv.index("--entrypoint") + 1]
    return [entrypoint, *argv[argv.index(image) + 1:]]


def test_sparkrun_recipe_round_trip(tmp_path):
    src = tmp_path / "qwen3-30b.yaml"
    src.write_text(SPARKRUN)
    out = tmp_path / "qwen3-30b.inkctl.yaml"
    p = inkctl("import", str(src), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "not mapped: max_nodes: 2 (inkctl deploys a fixed number of hosts: 1)" in p.stderr
    assert "not mapped: mods: [\"fix-gb10\"] (no place in an inkctl recipe)" in p.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["hardware"] == {"accelerator": "dgx-spark-gb10", "nodes": 1, "gpus_per_host": 1}
    assert doc["model"] == {"repo": "Qwen/Qwen3-30B-A3B-FP8", "served_name": "qwen3"}
    assert doc["container"]["env"] == {"VLLM_USE_FLASHINFER_SAMPLER": "1"}
    assert doc["engine"]["image"]["ref"] == "vllm-node:latest"
    a = doc["engine"]["args"]
    assert (a["tensor_parallel"], a["memory_fraction"], a["max_model_len"], a["kv_cache_dtype"]) == (1, 0.75, 32768, "fp8")
    # the planned command carries every option of the original command line, with its value
    argv = planned_command(out)
    text = " ".join(argv)
    for pair in ("--served-model-name qwen3", "--reasoning-parser qwen3", "--tool-call-parser hermes",
                 "--gpu-memory-utilization 0.75", "--max-model-len 32768", "--kv-cache-dtype fp8",
                 "--host 0.0.0.0", "--port 8000", "--tensor-parallel-size 1"):
        assert pair in text, (pair, text)
    assert "--enable-auto-tool-choice" in argv and "--enable-prefix-caching" in argv
    assert argv[argv.index("--max-num-batched-tokens") + 1] == "8192"  # as written, not joined with '='
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen3-30B-A3B-FP8"]


def test_vllm_recipes_config_round_trip(tmp_path):
    src = tmp_path / "GPT-OSS_EAGLE3_Hopper.yaml"
    src.write_text(VLLM_CONFIG)
    p = inkctl("import", str(src))
    assert p.returncode != 0 and "a vLLM recipes config names no model" in p.stderr
    out = tmp_path / "gptoss.yaml"
    p = inkctl("import", str(src), "--model", "openai/gpt-oss-120b", "--accelerator", "H200", "--gpus-per-host", "1",
               "--image", "vllm/vllm-openai:v0.28.0", "--name", "gpt-oss-eagle3", "--out", str(out))
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["speculative"] == {"method": "eagle3", "draft": {"repo": "nvidia/gpt-oss-120b-Eagle3-v2"},
                                  "num_speculative_tokens": 3, "config": {"draft_tensor_parallel_size": 1}}
    assert doc["hardware"]["accelerator"] == "h200"
    argv = planned_command(out)
    text = " ".join(argv)
    assert "--no-enable-prefix-caching" in argv and "--max-cudagraph-capture-size 2048" in text
    assert "--max-num-batched-tokens 8192" in text and "--stream-interval 20" in text
    i = argv.index("--speculative-config")  # every key of the original, draft_tensor_parallel_size included
    assert json.loads(argv[i + 1]) == {"method": "eagle3", "model": "nvidia/gpt-oss-120b-Eagle3-v2",
                                       "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1}


def test_not_importable_is_one_clear_error(tmp_path):
    src = tmp_path / "x.yaml"
    src.write_text("name: x\nengine: {kind: vllm}\n")
    p = inkctl("import", str(src))
    assert p.returncode != 0 and "not a recipe inkctl can import" in p.stderr and "Traceback" not in p.stderr


def _git(*args, cwd):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_recipes_from_a_git_repository_at_a_pinned_commit(tmp_path):
    root = Path(__file__).resolve().parents[2]
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "recipes").mkdir()
    (work / "recipes" / "spark.yaml").write_text((root / "recipes" / "gpt-oss-120b-1x-dgx-spark-vllm.yaml").read_text())
    (work / "recipes" / "qwen3-sparkrun.yaml").write_text(SPARKRUN)
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "first", cwd=work)
    _git("tag", "v1", cwd=work)
    first = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True).stdout.strip()
    (work / "recipes" / "late.yaml").write_text((root / "recipes" / "qwen3-coder-30b-fp8-1x-h100-vllm.yaml").read_text())
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "second", cwd=work)
    bare = tmp_path / "repo.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    env = {**__import__("os").environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    p = inkctl("recipes", "--from", f"file://{bare}", "--ref", "v1", "-o", "json", env=env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["commit"] == first and doc["source"] == f"file://{bare}"
    names = {Path(r["path"]).name: r for r in doc["recipes"]}
    assert set(names) == {"spark.yaml", "qwen3-sparkrun.yaml"}  # the later commit's file is not there
    assert names["spark.yaml"]["name"] == "gpt-oss-120b-spark"
    assert names["qwen3-sparkrun.yaml"]["error"] == "a sparkrun recipe: inkctl import it"
    p = inkctl("recipes", "--from", f"file://{bare}", env=env)
    assert p.returncode == 0, p.stderr
    assert "at commit " in p.stdout and "nothing from it runs" in p.stdout
    assert all(len(line) <= 80 for line in p.stdout.splitlines()), p.stdout
    p = inkctl("recipes", "--from", f"file://{bare}", "-o", "json", env=env)  # no --ref: the remote's HEAD
    assert {Path(r["path"]).name for r in json.loads(p.stdout)["recipes"]} == {"spark.yaml", "qwen3-sparkrun.yaml", "late.yaml"}
