"""A recipe's api_key: the engines get it without a command line, inkctl's own requests send it,
and a request without it gets 401 (issue 29, "Guarded endpoints")."""

from __future__ import annotations

from inkctl.recipe.checks.rules import recipe_findings

import json
import os
import subprocess
import sys

import pytest

from inkctl.errors import InkctlError
from inkctl.plan.apikey import prologue
from inkctl.plan.deploy import build_plan
from inkctl.plan.step import EnvFile, Put, Run, Smoke, WaitHealth
from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe
from inkctl.secret import resolve_secrets
from tests.unit.openai_fake import ROOT, FakeServer, free_port

KEY = "sk-inkctl-test-0123456789abcdef"


def recipe(kind: str = "vllm", **over) -> Recipe:
    doc = {
        "name": "guarded", "model": {"repo": "org/m"},
        "hardware": {"accelerator": "h200", "compute_capability": "9.0", "nodes": 1, "gpus_per_host": 1},
        "engine": {"kind": kind, "version": "v1", "image": {"ref": "img:1"}, "args": {"port": 8000}},
        "secrets": {"API_KEY": {"env": "MY_ENDPOINT_KEY"}}, "api_key": "API_KEY",
    }
    doc.update(over)
    return Recipe.model_validate(doc)


HOSTS = [Host(name="a", address="10.0.0.1")]


def _steps(plan):
    for st in plan.stages:
        for s in st.steps:
            yield s
            yield from getattr(s, "files", ())


def _env_file(plan) -> EnvFile:
    (env,) = [s.content for s in _steps(plan) if isinstance(s, Put) and isinstance(s.content, EnvFile)]
    return env


def test_vllm_reads_the_key_from_its_env_file_never_from_argv():
    plan = build_plan(recipe(), HOSTS)
    env = _env_file(plan)
    assert ("VLLM_API_KEY", "***") in [(k, str(v)) for k, v in env.entries]
    assert "VLLM_API_KEY" not in env.secret_names and "API_KEY" in env.secret_names
    argvs = [" ".join(s.argv) for s in _steps(plan) if isinstance(s, Run)]
    assert not any("--api-key" in a for a in argvs)
    health = [s for s in _steps(plan) if isinstance(s, (WaitHealth, Smoke))]
    assert health and all(s.api_key == "API_KEY" for s in health)


def test_a_recipe_without_api_key_plans_as_before():
    r = recipe()
    plain = Recipe.model_validate({**r.model_dump(mode="json", exclude_none=True), "api_key": None, "secrets": {}})
    plan = build_plan(plain, HOSTS)
    assert not [s for s in _steps(plan) if isinstance(s, Put) and isinstance(s.content, EnvFile)]
    assert all(getattr(s, "api_key", None) is None for s in _steps(plan))


def test_sglang_gets_a_config_file_written_in_its_container():
    plan = build_plan(recipe("sglang"), HOSTS)
    env = _env_file(plan)
    assert [k for k, _ in env.entries] == ["API_KEY", "INKCTL_API_KEY"]
    (start,) = [s for s in _steps(plan) if isinstance(s, Run) and s.container is not None]
    argv = list(start.argv)
    assert start.container.entrypoint == "/bin/sh"
    i = argv.index("-c")
    assert argv[i + 1] == prologue() and "sglang.launch_server" in argv[i + 3:]
    assert "--api-key" not in argv


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_the_fake_engines_take_the_key_as_the_real_ones_do_and_the_value_is_never_in_argv(tmp_path, engine):
    """The prologue run for real by /bin/sh in front of the fake SGLang (a config file it reads like
    SGLang's --config), and VLLM_API_KEY in the fake vLLM's environment: 401 without the key, 200
    with it, and the process's own command line never holds the value."""
    import httpx

    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), FAKE_TOKEN_DELAY="0.002", FAKE_TTFT="0.01")
    if engine == "vllm":
        env["VLLM_API_KEY"] = KEY
        argv = [sys.executable, "-m", "tests.cluster.fake_engine", "vllm", "serve", "m", "--port", str(port)]
    else:
        env["INKCTL_API_KEY"] = KEY
        argv = ["/bin/sh", "-c", prologue(str(tmp_path / "key.yaml")), "x", sys.executable, "-m",
                "tests.cluster.fake_engine", "sglang", "--model-path", "m", "--port", str(port)]
    proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(400):
            try:
                if httpx.get(url + "/health", timeout=1, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            import time
            time.sleep(0.05)
        cmdline = open(f"/proc/{proc.pid}/cmdline", "rb").read()
        assert KEY.encode() not in cmdline
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert httpx.post(url + "/v1/chat/completions", json=body, trust_env=False).status_code == 401
        ok = httpx.post(url + "/v1/chat/completions", json=body, trust_env=False,
                        headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200
        if engine == "sglang":
            assert oct((tmp_path / "key.yaml").stat().st_mode & 0o777) == "0o600"
    finally:
        proc.kill()
        proc.wait()


def test_the_guard_check_passes_on_a_guarded_server_and_fails_on_an_open_one():
    from inkctl.execute.deploy.smoke import Unguarded, check_guarded
    from inkctl.smoke.ready import first_answer

    with FakeServer(VLLM_API_KEY=KEY) as s:
        assert "401" in check_guarded(s.url + "/v1/chat/completions", "fake-model")
        assert first_answer(s.url + "/v1/chat/completions", "fake-model", 10, KEY).tries == 1
    with FakeServer() as s:
        with pytest.raises(Unguarded, match="not 401"):
            check_guarded(s.url + "/v1/chat/completions", "fake-model")


def test_rules_name_an_undefined_secret_and_a_key_on_the_command_line():
    r = recipe(api_key="NOPE", engine={"kind": "vllm", "version": "v1", "image": {"ref": "img:1"},
                                       "args": {"port": 8000, "extra": ["--api-key", "abc"]}})
    found = {p.path: p.message for p in recipe_findings(r) if p.severity == "error"}
    assert "NOPE" in found["api_key"] and "API_KEY" in found["api_key"]
    assert "ps" in found["engine.args.extra[0]"]


def test_the_key_must_be_a_bearer_token(monkeypatch):
    r = recipe()
    monkeypatch.setenv("MY_ENDPOINT_KEY", "has space in it")
    with pytest.raises(InkctlError, match="not a bearer token") as e:
        resolve_secrets(r.secrets, ["API_KEY"], bearer="API_KEY")
    assert "has space" not in str(e.value)
    monkeypatch.setenv("MY_ENDPOINT_KEY", KEY)
    assert resolve_secrets(r.secrets, ["API_KEY"], bearer="API_KEY")["API_KEY"].reveal() == KEY


def test_plan_json_names_the_secret_never_its_value(monkeypatch):
    from inkctl.cli.show.plan_json import plan_json

    monkeypatch.setenv("MY_ENDPOINT_KEY", KEY)
    text = json.dumps(plan_json(build_plan(recipe("sglang"), HOSTS)))
    assert KEY not in text and '"api_key": "API_KEY"' in text


@pytest.mark.parametrize("name", ["vllm-single-docker", "qwen3-coder-30b-fp8-1x-h100-vllm"])
def test_init_makes_a_key_the_recipe_names_and_never_prints_it(tmp_path, name):
    """With a secrets block (vllm-single-docker has HF_TOKEN) and without one."""
    r = subprocess.run([sys.executable, "-m", "inkctl", "init", "--api-key", name], cwd=tmp_path,
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    key = (tmp_path / "api-key").read_text().strip()
    assert (tmp_path / "api-key").stat().st_mode & 0o777 == 0o600 and len(key) > 40
    assert key not in r.stdout + r.stderr
    from inkctl.recipe.reading.source import load_recipe
    from inkctl.secret import resolve_secrets

    rec = load_recipe(tmp_path / f"{name}.yaml").recipe
    assert rec.api_key == "API_KEY"
    assert resolve_secrets(rec.secrets, ["API_KEY"], bearer="API_KEY")["API_KEY"].reveal() == key
    assert not [p for p in recipe_findings(rec) if p.severity == "error"]
