"""Readiness, smoke checks and bench against a real deployment on the test cluster: ``up`` ends
with one streamed answer, the recipe's checks (an expected answer, reasoning, a tool call) pass
on the fake engine started with parsers and fail without them, and ``bench`` records what ran."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.cluster

CHECKS = {"prompts": [{"prompt": "What is 17 x 23? Answer with the number.", "contains": "391"}],
          "max_tokens": 16, "timeout_s": 30}


def test_up_is_ready_when_it_answers_then_smoke_and_bench_the_deployment(cluster, inkctl, inventory, recipe, tmp_path):
    inv = inventory("h1")
    rec = recipe("single", name="e2e-smoke", smoke=CHECKS, capabilities={"reasoning": True, "tools": True},
                 engine={"args": {"reasoning_parser": "deepseek_r1", "tool_call_parser": "hermes"}},
                 container={"env": {"FAKE_TTFT": "0.05"}})
    up = inkctl("up", rec, "--hosts", inv, "--results-dir", str(tmp_path / "runs"))
    assert up.rc == 0, up
    assert "smoke: 3/3 checks passed" in up.stdout, up
    ready = next(line for line in up.stdout.splitlines() if line.strip().startswith("ready: answered"))
    assert "after the head container started; first request TTFT" in ready

    s = inkctl("smoke", rec, "--hosts", inv, "-o", "json")
    assert s.rc == 0, s
    checks = {c["kind"]: c for c in json.loads(s.stdout)["checks"]}
    assert checks["answer"]["answer"] == "391"
    assert checks["reasoning"]["ok"] and checks["tools"]["answer"].startswith("get_weather(")
    assert 0.04 <= checks["answer"]["ttft_s"] < 2.0  # the engine was told 50 ms

    b = inkctl("bench", rec, "--hosts", inv, "-c", "1,4", "-n", "8", "--input-len", "16", "--output-len", "8",
               "--results-dir", str(tmp_path / "runs"), "-o", "json")
    assert b.rc == 0, b
    points = json.loads(b.stdout)["points"]
    assert [p["completed"] for p in points] == [8, 8] and all(p["failed"] == 0 for p in points)
    prov = points[0]["inkctl"]
    assert prov["deployment"] == "e2e-smoke" and len(prov["recipe_hash"]) == 12
    assert prov["image"]["digest"].startswith("sha256:")  # read from the running container
    assert prov["engine_args"]["reasoning_parser"] == "deepseek_r1"
    assert prov["hosts"]["h1"]["gpus"] and prov["hosts"]["h1"]["driver"]  # from the host's nvidia-smi
    boot = prov["boot"]  # how the deployment measured booted: up's boot record
    assert boot["id"].startswith("e2e-smoke/") and "weights" in boot["ranks"][0]["seconds"] and boot["inkctl"]["health"] > 0
    assert boot["inkctl"]["first_token"] > boot["inkctl"]["health"]
    (run,) = json.loads(inkctl("results", "--results-dir", str(tmp_path / "runs"), "-o", "json").stdout)
    shown = inkctl("results", run["id"], "--results-dir", str(tmp_path / "runs"))
    assert shown.rc == 0 and f"booted as {boot['id']}:" in shown.stdout, shown
    table = shown.stdout[shown.stdout.index("boot phase (s)"):]
    assert "weights loaded" in table and "first token" in table, table


def test_a_reasoning_recipe_on_an_engine_without_the_parser_fails_smoke_and_rolls_back(cluster, inkctl, inventory, recipe):
    from tests.e2e.conftest import containers

    inv = inventory("h1")
    rec = recipe("single", name="e2e-noreason", smoke=CHECKS, capabilities={"reasoning": True})
    up = inkctl("up", rec, "--hosts", inv)
    assert up.rc == 1, up
    assert "'Is 221 a prime number? Think step by step, then answer yes or no.': no reasoning came back" in up.stderr
    assert containers(cluster, "h1", "e2e-noreason") == []  # no half-up deployment left behind
