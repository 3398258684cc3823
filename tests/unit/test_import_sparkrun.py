"""`inkctl import` defects found on real sparkrun and vLLM recipes (issue 29 section 1), one test each,
through the command line as a user runs it: each failed before its fix.

The recipes are small, in the forms the public recipes use (sparkrun's documented minimal recipe,
spark-vllm-docker's v1 recipes, the vLLM recipes repository's model files)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml


def inkctl(*args):
    return subprocess.run([sys.executable, "-m", "inkctl", *args], capture_output=True, text=True)


def run_import(tmp_path: Path, text: str, *args, name: str = "recipe.yaml"):
    src = tmp_path / name
    src.write_text(text)
    out = tmp_path / "out.yaml"
    p = inkctl("import", str(src), "--out", str(out), *args)
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    return p, src, out


def engine_argv(recipe: Path) -> list[str]:
    p = inkctl("plan", str(recipe), "-o", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    image = yaml.safe_load(recipe.read_text())["engine"]["image"]["ref"]
    for st in doc["stages"]:
        for s in st["steps"]:
            argv = s.get("argv") or []
            if image in argv and "--entrypoint" in argv:
                return [argv[argv.index("--entrypoint") + 1], *argv[argv.index(image) + 1:]]
    raise AssertionError("no engine command")


MINIMAL = """\
model: Qwen/Qwen3-1.7B
runtime: vllm
container: vllm/vllm-openai:v0.19.1
defaults:
  port: 8000
  host: 0.0.0.0
command: |
  vllm serve {model} --host {host} --port {port}
"""


LITERAL = MINIMAL.replace("{model}", "Qwen/Qwen3-1.7B")  # each later test pins its own defect, not {model}'s


def test_model_placeholder_is_filled_from_model(tmp_path):
    p, _, out = run_import(tmp_path, MINIMAL)
    assert p.returncode == 0, p.stderr
    assert engine_argv(out)[:3] == ["vllm", "serve", "Qwen/Qwen3-1.7B"]


def test_the_release_comes_from_the_image_tag_or_is_marked_unknown_and_warned(tmp_path):
    p, _, out = run_import(tmp_path, MINIMAL)
    assert yaml.safe_load(out.read_text())["engine"]["version"] == "v0.19.1"
    p, _, out = run_import(tmp_path, MINIMAL.replace("vllm/vllm-openai:v0.19.1", "vllm-node:latest"))
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(out.read_text())["engine"]["version"].startswith("unknown")
    v = inkctl("validate", str(out))
    assert "names no release: flags are not checked" in " ".join((v.stdout + v.stderr).split())


SPEC = LITERAL.replace("--port {port}", """--port {port} \\
    --speculative-config '{{"method":"mtp","num_speculative_tokens":2}}' \\
    --compilation-config '{{"cudagraph_mode": "FULL"}}'""")


def test_doubled_braces_in_json_values_are_the_json_meant(tmp_path):
    p, _, out = run_import(tmp_path, SPEC)
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(out.read_text())["speculative"] == {"method": "mtp", "num_speculative_tokens": 2}
    argv = engine_argv(out)
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {"method": "mtp", "num_speculative_tokens": 2}
    assert json.loads(argv[argv.index("--compilation-config") + 1]) == {"cudagraph_mode": "FULL"}


def test_vllm_ray_and_vllm_distributed_runtimes(tmp_path):
    two = LITERAL.replace("runtime: vllm", "runtime: vllm-ray\nmin_nodes: 2").replace(
        "--port {port}", "--port {port} -tp 2 --distributed-executor-backend ray")
    p, _, out = run_import(tmp_path, two)
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["engine"]["multinode"] == "ray" and doc["hardware"]["nodes"] == 2
    assert "--distributed-executor-backend (planned by engine.multinode: ray)" in p.stderr
    p, _, out = run_import(tmp_path, two.replace("vllm-ray", "vllm-distributed").replace(" --distributed-executor-backend ray", ""))
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(out.read_text())["engine"].get("multinode", "native") == "native"


V1 = """\
recipe_version: "1"
name: Qwen3 on two Sparks
model: Qwen/Qwen3-30B-A3B-FP8
container: vllm-node:latest
defaults:
  tensor_parallel: 2
command: |
  vllm serve Qwen/Qwen3-30B-A3B-FP8 --tensor-parallel-size {tensor_parallel} --port 8000
"""


def test_v1_recipe_without_min_nodes_gets_one_spark_per_rank(tmp_path):
    p, _, out = run_import(tmp_path, V1)
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(out.read_text())["hardware"]["nodes"] == 2


def test_problems_of_the_imported_recipe_point_at_the_input_file(tmp_path):
    p, src, out = run_import(tmp_path, V1, "--nodes", "1")  # one host cannot hold TP 2 on Sparks
    assert p.returncode == 2 and "INK201" in p.stderr
    squeezed = "".join(p.stderr.split())  # the printer folds long lines, paths included
    assert f"{src}:8:engine.args.tensor_parallel" in squeezed, p.stderr  # the line that sets it
    assert "/tmp/tmp" not in p.stderr
    p = inkctl("import", str(src), "--nodes", "1")  # to stdout: the same place
    assert p.returncode == 2 and f"{src}:8:engine.args.tensor_parallel" in "".join(p.stderr.split())


TASKSET = """\
model: Qwen/Qwen3-1.7B
runtime: sglang
container: lmsysorg/sglang:v0.5.9-cu129
command: |
  taskset -c 5-9 sglang serve --model-path Qwen/Qwen3-1.7B \\
    --tp 1 \\
    --port 30000 \\
"""


def test_shell_wrappers_and_a_trailing_backslash(tmp_path):
    p, _, out = run_import(tmp_path, TASKSET)
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["engine"]["launcher"] == ["sglang", "serve"]
    assert "-c" not in doc["engine"]["args"].get("extra", [])
    assert "not mapped: taskset -c 5-9" in p.stderr and "trailing '\\'" in p.stderr
    argv = engine_argv(out)
    assert argv[:4] == ["sglang", "serve", "--model-path", "Qwen/Qwen3-1.7B"]


def test_shell_expansions_are_not_placeholders(tmp_path):
    text = LITERAL.replace("vllm serve", "CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} vllm serve")
    p, src, _ = run_import(tmp_path, text)
    assert p.returncode == 2
    assert f"{src}:8:" in p.stderr  # the command's line that has it and "${CUDA_HOME:-/usr/local/cuda} is expanded by the container's shell" in p.stderr
    assert "defaults" not in p.stderr.split("hint")[0]


def test_a_local_model_path_with_a_volume_stays_local(tmp_path):
    text = TASKSET.replace("taskset -c 5-9 ", "").replace("Qwen/Qwen3-1.7B \\", "/cache/qwen3-1.7b \\").replace(
        "command:", "volumes:\n  - /data/models:/cache\ncommand:")
    p, _, out = run_import(tmp_path, text)
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["model"]["repo"] == "/cache/qwen3-1.7b"
    assert {"source": "/data/models", "target": "/cache"} in doc["container"]["mounts"]
    assert "the command serves the local path /cache/qwen3-1.7b" in p.stderr


def test_several_served_names_and_max_model_len_auto(tmp_path):
    text = LITERAL.replace("--port {port}", "--port {port} --served-model-name qwen3 qwen3-small --max-model-len auto")
    p, _, out = run_import(tmp_path, text)
    assert p.returncode == 0, p.stderr
    argv = engine_argv(out)
    i = argv.index("--served-model-name")
    assert argv[i:i + 3] == ["--served-model-name", "qwen3", "qwen3-small"]
    assert argv[argv.index("--max-model-len") + 1] == "auto"


def test_fastokens_is_not_a_secret_but_a_token_is(tmp_path):
    text = LITERAL + "env:\n  VLLM_USE_FASTOKENS: '1'\n  HF_TOKEN: hf_abc\n"
    p, _, out = run_import(tmp_path, text)
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["container"]["env"] == {"VLLM_USE_FASTOKENS": "1"}
    assert doc["secrets"] == {"HF_TOKEN": {"env": "HF_TOKEN"}} and "hf_abc" not in out.read_text()


MODEL_FILE = """\
meta:
  title: "Tiny"
  date_added: 2026-03-28
model:
  model_id: "Qwen/Qwen3-1.7B"
  min_vllm_version: "0.19.1"
  base_args: ["--max-model-len", "32768"]
  base_env: {}
features:
  reasoning:
    description: "thinking"
    args: ["--reasoning-parser", "qwen3"]
  spec_decoding:
    description: "MTP"
    args: ["--speculative-config", '{"method":"mtp","num_speculative_tokens":1}']
opt_in_features: [spec_decoding]
variants:
  default: {precision: bf16, vram_minimum_gb: 4}
compatible_strategies: [single_node_tp]
guide: |
  ## Overview
  Serve it.
"""


def test_vllm_recipes_model_file_with_dates_guide_and_features(tmp_path):
    p, _, out = run_import(tmp_path, MODEL_FILE, "--accelerator", "h100", "--gpus-per-host", "1",
                            "--model", "Qwen/Qwen3-1.7B", name="Tiny.yaml")
    assert p.returncode == 0, p.stderr
    doc = yaml.safe_load(out.read_text())
    assert doc["engine"]["version"] == "v0.19.1" and doc["engine"]["image"]["ref"] == "vllm/vllm-openai:v0.19.1"
    argv = engine_argv(out)
    assert argv[argv.index("--reasoning-parser") + 1] == "qwen3" and argv[argv.index("--max-model-len") + 1] == "32768"
    assert "--speculative-config" not in argv  # opt-in: off, as on the recipes site
    assert not any(a.startswith(("--guide", "--features", "--meta")) for a in argv)
