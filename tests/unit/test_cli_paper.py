"""The paper commands through the real CLI process: exit codes, messages, JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPARK = "recipes/inkling-small-2x-dgx-spark-vllm.yaml"


def inkctl(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=ROOT, capture_output=True, text=True, env=env)


def test_bundled_recipes_validate():
    r = inkctl("validate", "recipes/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok recipes/") == 3


def test_strict_rejects_unpinned_values():
    r = inkctl("validate", "--strict", "recipes/")
    assert r.returncode == 2
    assert "FAIL recipes/inkling-small-2x-dgx-spark-vllm.yaml" in r.stdout
    assert "engine.image.digest: image vllm/vllm-openai:v0.28.0 is not pinned by digest" in r.stdout


def test_ten_mistakes_are_all_reported_with_their_lines():
    r = inkctl("validate", "--output", "json", "tests/data/ten-mistakes.yaml")
    assert r.returncode == 2
    errors = json.loads(r.stdout)["recipes"][0]["errors"]
    got = [(e["line"], e["path"]) for e in errors]
    assert got == [
        (1, "name"), (4, "model.trust_remote_code"), (8, "hardware.gpus_per_host"), (14, "engine.image.digest"),
        (16, "engine.args.tensor_paralel"), (17, "engine.args.port"), (19, "container.runtime"),
        (20, "container.shm_size"), (22, "container.mounts[0].source"), (25, "health.timeout_s"),
    ]
    assert errors[4]["hint"] == "did you mean 'tensor_parallel'?"
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("text,needle", [
    ("a: [\n", "invalid YAML"),
    ("", "empty"),
    ("- a\n- b\n", "mapping"),
    ("a: 1\na: 2\n", "duplicate key"),
    ("a: !!python/object/apply:os.system ['id']\n", "tag"),
])
def test_malformed_documents_are_clean_errors(tmp_path, text, needle):
    p = tmp_path / "r.yaml"
    p.write_text(text)
    r = inkctl("plan", str(p))
    assert r.returncode == 2
    assert needle in r.stderr
    assert "Traceback" not in r.stderr


def test_plan_without_hosts_uses_placeholders():
    r = inkctl("plan", SPARK)
    assert r.returncode == 0, r.stderr
    # the address the real plan uses for the head: cluster_address (else address)
    assert "--master-addr '<host0.cluster_address>'" in r.stdout
    assert "--headless" in r.stdout
    assert "$ docker run --detach --name inkctl-inkling-small-spark-tp2-r0 \\\n" in r.stdout
    assert r.stdout.rstrip().endswith("next: inkctl up recipes/inkling-small-2x-dgx-spark-vllm.yaml --hosts FILE"
                                      "    (an inventory: inkctl init writes one to edit)")


def test_plan_is_concise_by_default_and_full_on_request():
    short = inkctl("plan", SPARK, "--hosts", "examples/hosts.yaml")
    full = inkctl("plan", SPARK, "--hosts", "examples/hosts.yaml", "--full")
    assert short.returncode == 0 and full.returncode == 0, short.stderr + full.stderr
    wrapper_line = "exec \"$@\""  # the hotfix wrapper's last line
    assert wrapper_line not in short.stdout and full.stdout.count(wrapper_line) == 2  # --full: per host, as today
    assert short.stdout.count("/hotfix/entry.sh\n") == 1  # written on both hosts, listed once
    assert "upload the hotfix wrapper; on every host" in short.stdout
    assert len(short.stdout.splitlines()) < 0.6 * len(full.stdout.splitlines())  # (full lost the prepare stage: files ride on the launch)
    for rank, host in ((0, "spark-4687"), (1, "spark-5bc3")):
        role = "head" if rank == 0 else "worker"
        assert f"rank {rank}  {role}  {host}  " in short.stdout
    assert short.stdout.count("  image  vllm/vllm-openai:v0.28.0\n") == 2
    assert "\n      vllm/vllm-openai:v0.28.0 /inkctl/hotfix/entry.sh" in short.stdout  # the image starts a line
    assert short.stdout.rstrip().endswith("next: inkctl up recipes/inkling-small-2x-dgx-spark-vllm.yaml --hosts examples/hosts.yaml")
    only = inkctl("plan", SPARK, "--hosts", "examples/hosts.yaml", "--host", "spark-5bc3")
    assert only.returncode == 0 and "spark-4687  " not in only.stdout and "rank 1  worker  spark-5bc3" in only.stdout
    bad = inkctl("plan", SPARK, "--hosts", "examples/hosts.yaml", "--host", "nosuch")
    assert bad.returncode == 2 and "--host nosuch: no such host in this plan" in bad.stderr
    assert "spark-4687, spark-5bc3" in bad.stderr and bad.stdout == ""


def _printed(text: str) -> list[list[str]]:
    import shlex

    printed, lines = [], text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("$ "):
            cmd = line.lstrip()[2:]
            while cmd.endswith(" \\"):
                i += 1
                cmd = cmd[:-2] + " " + lines[i].strip()
            printed.append(shlex.split(cmd))
    return printed


@pytest.mark.parametrize("recipe", [SPARK, "examples/vllm-ray-2node.yaml"])
def test_printed_commands_are_copy_pasteable(recipe):
    """Every `$ ...` command in the text plan parses (as a shell would) to the exact argv `up` runs."""
    plan = json.loads(inkctl("plan", recipe, "--hosts", "examples/hosts.yaml", "--output", "json").stdout)
    steps = [s for st in plan["stages"] for s in st["steps"] if "argv" in s]
    full = _printed(inkctl("plan", recipe, "--hosts", "examples/hosts.yaml", "--full").stdout)
    assert full == [s["argv"] for s in steps] and len(full) >= 2
    by_rank = sorted(steps, key=lambda s: (s["rank"] is None, s["rank"] or 0))  # concise: grouped by rank
    assert _printed(inkctl("plan", recipe, "--hosts", "examples/hosts.yaml").stdout) == [s["argv"] for s in by_rank]


def test_plan_with_hosts_fills_addresses_and_per_host_values():
    r = inkctl("plan", SPARK, "--hosts", "examples/hosts.yaml", "--output", "json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    runs = [s for st in plan["stages"] for s in st["steps"] if s["kind"] == "run"]
    head, worker = runs
    assert head["host"] == "spark-4687" and worker["host"] == "spark-5bc3"
    assert "--master-addr" in worker["argv"] and worker["argv"][worker["argv"].index("--master-addr") + 1] == "198.51.100.10"
    assert "VLLM_HOST_IP=198.51.100.11" in worker["argv"]
    assert "NCCL_SOCKET_IFNAME=enp1s0f1np1" in head["argv"]
    assert "NCCL_IB_HCA=rocep1s0f1" in head["argv"]
    assert "/home/ubuntu/.cache/huggingface:/root/.cache/huggingface" in head["argv"]


def test_set_overrides_are_validated_and_applied():
    r = inkctl("plan", SPARK, "--set", "engine.args.port=8123", "--output", "json")
    assert r.returncode == 0
    launch = next(st for st in json.loads(r.stdout)["stages"] if st["name"] == "launch")
    assert "8123" in launch["steps"][0]["argv"]
    bad = inkctl("plan", SPARK, "--set", "engine.args.port=abc")
    assert bad.returncode == 2 and "engine.args.port: expected an integer, got 'abc'" in bad.stderr


def test_secret_values_never_reach_the_plan(tmp_path):
    r = inkctl("plan", "examples/vllm-single-docker.yaml", "--output", "json",
               env={"HF_TOKEN": "hf_SECRET_VALUE_123", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "hf_SECRET_VALUE_123" not in r.stdout + r.stderr
    assert "HF_TOKEN=***" in r.stdout
    assert "--env-file" in r.stdout


def test_wrong_host_count_is_explained():
    r = inkctl("plan", SPARK, "--hosts", "examples/hosts-one.yaml")
    assert r.returncode == 2
    assert "the recipe needs 2 hosts (hardware.nodes) but 1 was given" in r.stderr


def test_schema_recipes_version_help():
    assert json.loads(inkctl("schema").stdout)["title"] == "inkctl recipe"
    rows = json.loads(inkctl("recipes", "--output", "json").stdout)
    assert {r["name"] for r in rows} >= {"inkling-small-spark-tp2", "inkling-h200-tp8", "inkling-small-rtxpro6000-tp2"}
    assert [r["recipe"] for r in rows] == [p.stem for p in sorted((ROOT / "recipes").glob("*.yaml"))] + [
        p.stem for p in sorted((ROOT / "examples").glob("*.yaml")) if not p.name.startswith("hosts")]
    assert inkctl("--version").stdout.startswith("inkctl ")
    for cmd in ("validate", "plan", "schema", "recipes"):
        assert inkctl(cmd, "--help").returncode == 0


def test_usage_errors_are_not_internal_errors():
    r = inkctl("statu")
    assert r.returncode == 2 and "Did you mean 'status'?" in r.stderr and "internal error" not in r.stderr
    r = inkctl("plan")
    assert r.returncode == 2 and "Missing argument" in r.stderr
    r = inkctl("validate", "--output", "xml", "recipes/")
    assert r.returncode == 2 and "--output must be 'text' or 'json', not 'xml'" in r.stderr


def test_help_names_values_with_placeholders_and_summaries_whole():
    alone = subprocess.run(
        [sys.executable, "-m", "inkctl"], cwd=ROOT, capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    assert alone.returncode == 0 and alone.stdout.startswith("Usage: inkctl [OPTIONS] COMMAND"), alone.stderr
    listed = alone.stdout.split("Commands:")[1]
    assert "..." not in listed  # every summary whole
    assert "  plan      What `up` will run: per rank the host, image and exact argv\n" in listed  # one line each
    assert max(len(ln) for ln in alone.stdout.splitlines()) <= 80
    for cmd in ("validate", "plan", "recipes", "up", "down", "status", "logs", "doctor", "build", "lock", "init"):
        h = subprocess.run([sys.executable, "-m", "inkctl", cmd, "--help"], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": "80"})
        assert h.returncode == 0, (cmd, h.stderr)
        assert not re.search(r"\{\w+\}|<[a-z\[\] ]+>", h.stdout), (cmd, h.stdout)  # no {recipe}, <list[str]>, <float range>
    plan = inkctl("plan", "--help").stdout
    assert "Usage: inkctl plan [OPTIONS] RECIPE\n" in plan
    assert "--set KEY=VALUE" in plan and "--hosts FILE" in plan
    assert "--timeout SECONDS" in inkctl("up", "--help").stdout
