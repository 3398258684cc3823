"""Smoke checks through the real CLI against the fake engine on loopback: right answers pass;
a wrong answer, unparsable tool-call arguments and a missing reasoning field each fail with a
message that names the prompt and what came back."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from inkctl.client.stream import Output
from inkctl.plan.smoke import SmokeCheck, smoke_checks
from inkctl.recipe.model import Recipe
from inkctl.smoke.verdict import verdict
from tests.unit.openai_fake import ROOT, FakeServer

PARSERS = ("--reasoning-parser", "deepseek_r1", "--enable-auto-tool-choice", "--tool-call-parser", "hermes")


def smoke(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inkctl", "smoke", "--url", url, "--model", "fake-model", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_right_answers_reasoning_and_tool_calls_pass():
    with FakeServer(*PARSERS) as s:
        r = smoke(s.url, "--reasoning", "--tools", "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    checks = {c["kind"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["answer"]["answer"] == "391" and checks["answer"]["ttft_s"] > 0
    assert checks["reasoning"]["answer"].startswith("reasoning_content: ")
    assert checks["tools"]["answer"].startswith('get_weather({"city": ')


def test_the_newer_reasoning_field_is_accepted_too():
    with FakeServer(*PARSERS, FAKE_REASONING_FIELD="reasoning") as s:
        r = smoke(s.url, "--reasoning")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "reasoning: Let me" in r.stdout


def test_a_wrong_answer_fails_naming_prompt_and_answer():
    with FakeServer(FAKE_WRONG_ANSWER=1) as s:
        r = smoke(s.url)
    assert r.returncode == 1
    assert "'What is 17 x 23? Answer with the number.': expected the answer to contain '391', got '392'" in r.stderr
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    assert r.stdout.splitlines()[1].startswith("FAIL answer")


def test_unparsable_tool_call_arguments_fail():
    with FakeServer(*PARSERS, FAKE_TOOL_MALFORMED=1) as s:
        r = smoke(s.url, "--tools")
    assert r.returncode == 1
    assert "'What is the weather in Paris right now? Use the tool.': the tool call's arguments do not parse as JSON" in r.stderr
    assert "'city" in r.stderr  # what came back, quoted


def test_missing_reasoning_fails_and_says_what_came_back():
    with FakeServer() as s:  # no --reasoning-parser: the reasoning stays in the content, as with real engines
        r = smoke(s.url, "--reasoning")
    assert r.returncode == 1
    assert "'Is 221 a prime number? Think step by step, then answer yes or no.': no reasoning came back in its own field" in r.stderr
    assert "the answer was 'This is a fake completion" in r.stderr


def test_a_server_error_is_reported_per_prompt():
    with FakeServer(FAKE_FAIL_EVERY=1) as s:
        r = smoke(s.url, "--prompt", "hello there")
    assert r.returncode == 1
    assert "'hello there': HTTP 500: " in r.stderr


def out(**kw) -> Output:
    o = Output(ok=True, chunks=1)
    for k, v in kw.items():
        setattr(o, k, v)
    return o


@pytest.mark.parametrize("check, got, why", [
    (SmokeCheck("p", regex=r"\b391\b"), out(text="it is 3910"), "expected the answer to match /\\b391\\b/, got 'it is 3910'"),
    (SmokeCheck("p", one_of=("yes", "no")), out(text="Yes."), ""),
    (SmokeCheck("p", one_of=("yes", "no")), out(text="maybe"), "expected one of 'yes', 'no', got 'maybe'"),
    (SmokeCheck("p"), out(text="", reasoning="hmm"), "empty answer: only reasoning came back ('hmm')"),
    (SmokeCheck("p", kind="tools", tool=json.dumps({"function": {"name": "f", "parameters": {"required": ["city"]}}})),
     out(tool_calls=[{"function": {"name": "f", "arguments": '{"town": "x"}'}}]),
     "the tool call's arguments lack required field(s) city"),
])
def test_verdicts(check, got, why):
    assert verdict(check, got).startswith(why) and (why or not verdict(check, got))


def _recipe(**smoke) -> Recipe:
    import yaml

    data = yaml.safe_load((ROOT / "examples/vllm-single-docker.yaml").read_text())
    data.pop("hosts", None)
    data.update(capabilities={"reasoning": True, "tools": True}, smoke=smoke)
    return Recipe.model_validate(data)


def test_plain_string_prompts_stay_valid_and_capabilities_add_checks():
    checks = smoke_checks(_recipe(prompts=["hello", {"prompt": "2 x 2?", "one_of": ["4"]}]))
    assert [(c.kind, c.expectation) for c in checks] == [
        ("answer", "a non-empty answer"), ("answer", "one of '4'"), ("reasoning", "reasoning in its own field"),
        ("tools", "a tool call with JSON arguments")]
    assert [c.kind for c in smoke_checks(_recipe(capabilities=False))] == ["answer"]


def test_two_expectations_on_one_prompt_are_refused(tmp_path):
    src = (ROOT / "examples/vllm-single-docker.yaml").read_text()
    bad = tmp_path / "r.yaml"
    bad.write_text(src + "smoke:\n  prompts:\n    - prompt: What is 2 x 3?\n      contains: '6'\n      regex: '('\n")
    r = subprocess.run([sys.executable, "-m", "inkctl", "validate", str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    assert "give one expectation per prompt, not contains and regex" in r.stdout + r.stderr
