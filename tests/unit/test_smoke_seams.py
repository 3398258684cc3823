"""smoke as `export k8s` suggests it (a recipe and a port-forward's --url, no hosts), --url alone
against a server that lists one model, a closed port, and the tool check's decode rate."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.unit.openai_fake import ROOT, FakeServer, free_port

PARSERS = ("--reasoning-parser", "deepseek_r1", "--enable-auto-tool-choice", "--tool-call-parser", "hermes")


def inkctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def server():
    with FakeServer(*PARSERS) as s:
        yield s


def test_a_recipe_and_a_url_need_no_hosts(server):
    r = inkctl("smoke", "inkling-small-2x-dgx-spark-vllm", "--url", server.url, "--model", "fake-model", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] and len(doc["checks"]) >= 2  # the recipe's own checks, not the default one


def test_url_without_model_uses_the_one_model_the_server_lists(server):
    r = inkctl("smoke", "--url", server.url, "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model"] == "fake-model"


def test_a_closed_port_says_nothing_answers():
    r = inkctl("smoke", "--url", f"http://127.0.0.1:{free_port()}", "--model", "m")
    assert r.returncode == 1
    assert "nothing answers there" in r.stderr and "answers, but not right" not in r.stderr
    r = inkctl("smoke", "--url", f"http://127.0.0.1:{free_port()}")  # no --model: /v1/models is asked first
    assert r.returncode == 1 and "nothing answers at" in r.stderr and "Traceback" not in r.stderr


def test_the_tool_check_claims_no_decode_rate(server):
    r = inkctl("smoke", "--url", server.url, "--model", "fake-model", "--tools", "-o", "json")
    assert r.returncode == 0, r.stderr
    tool = next(c for c in json.loads(r.stdout)["checks"] if c["kind"] == "tools")
    assert tool["ok"] and tool["tokens_per_s"] is None
