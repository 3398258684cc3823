"""Seams between commands, through the real CLI process: validation a user can act on, -h,
the command list, lock's order of checks, a bare name after init."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASE = """name: t
model: {repo: a/b}
hardware: {accelerator: h200, compute_capability: "9.0", nodes: 1, gpus_per_host: 1}
engine:
  kind: KIND
  version: v1
  image: {ref: "img:1"}
  args:
ARGS
"""


def inkctl(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**(env or os.environ), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


def recipe(tmp_path: Path, kind: str, args: str) -> Path:
    p = tmp_path / "r.yaml"
    p.write_text(BASE.replace("KIND", kind).replace("ARGS", args))
    return p


def errors(r: subprocess.CompletedProcess) -> list[dict]:
    return json.loads(r.stdout)["recipes"][0]["errors"]


def test_an_sglang_flag_in_a_vllm_recipe_is_refused_with_the_vllm_field(tmp_path):
    r = inkctl("validate", str(recipe(tmp_path, "vllm", '    extra: [--mem-fraction-static, "0.8"]')), "-o", "json")
    assert r.returncode == 2, r.stdout
    (e,) = [e for e in errors(r) if e["severity"] == "error"]
    assert (e["code"], e["path"]) == ("INK209", "engine.args.extra[0]")
    assert "SGLang flag" in e["message"] and "engine.args.memory_fraction" in e["hint"]
    r = inkctl("validate", str(recipe(tmp_path, "sglang", "    extra: [--gpu-memory-utilization=0.8]")), "-o", "json")
    assert r.returncode == 2 and "vLLM flag" in errors(r)[0]["message"]


def test_a_flag_a_typed_field_passes_is_not_passed_twice(tmp_path):
    r = inkctl("validate", str(recipe(tmp_path, "vllm", "    tool_call_parser: hermes\n"
                                                           "    extra: [--enable-auto-tool-choice]")), "-o", "json")
    assert r.returncode == 2
    (e,) = [e for e in errors(r) if e["severity"] == "error"]
    assert "already passed by engine.args.tool_call_parser" in e["message"]


def test_text_validate_shows_the_problem_codes(tmp_path):
    r = inkctl("validate", str(recipe(tmp_path, "vllm", "    extra: [--mem-fraction-static]")))
    assert r.returncode == 2
    assert "error INK209 " in r.stdout and "warning INK208 " in r.stdout


def test_bare_numbers_in_extra_and_gpus_mean_what_yaml_obviously_means(tmp_path):
    p = recipe(tmp_path, "vllm", "    extra: [--max-num-batched-tokens, 8192, --swap-space, 4.5]")
    inv = tmp_path / "hosts.yaml"
    inv.write_text("hosts:\n  - {name: a, address: 192.0.2.1, gpus: 0}\n")
    r = inkctl("plan", str(p), "--hosts", str(inv), "-o", "json")
    assert r.returncode == 0, r.stderr
    assert '"--max-num-batched-tokens", "8192", "--swap-space", "4.5"' in json.dumps(json.loads(r.stdout))
    assert 'device=0' in r.stdout
    bad = recipe(tmp_path, "vllm", "    extra: [--flag, true]")
    r = inkctl("validate", str(bad), "-o", "json")
    assert r.returncode == 2 and "expected a string" in errors(r)[0]["message"]
    schema = (ROOT / "docs" / "recipe-reference.md").read_text()
    assert "a number may be written bare" in schema and "one index may be a bare number" in schema


def test_dash_h_is_help():
    for args in (["-h"], ["plan", "-h"], ["export", "k8s", "-h"]):
        r = inkctl(*args)
        assert r.returncode == 0 and "Usage: inkctl" in r.stdout, (args, r.stderr)


def test_bare_inkctl_lists_commands_in_workflow_order_one_line_each():
    r = inkctl()
    lines = r.stdout.splitlines()
    assert all(len(ln) <= 80 for ln in lines)
    listed = [ln for ln in lines[lines.index("Commands:") + 1:] if ln.strip()]
    assert all(not ln.startswith("   ") for ln in listed), r.stdout  # one line each: no continuation
    cmds = [ln.split()[0] for ln in listed]
    assert cmds[:4] == ["init", "recipes", "validate", "plan"] and cmds.index("up") < cmds.index("smoke")


def test_lock_checks_its_arguments_before_the_hub(tmp_path):
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0"}
    r = inkctl("lock", "examples/vllm-single-docker.yaml", env=env)
    assert r.returncode == 2, r.stderr
    assert "lock needs hosts" in r.stderr and "127.0.0.1" not in r.stderr


def test_a_bare_name_after_init_is_the_copy_here(tmp_path):
    assert inkctl("init", "vllm-single-docker", cwd=tmp_path).returncode == 0
    copy = tmp_path / "vllm-single-docker.yaml"
    copy.write_text(copy.read_text().replace("name: qwen-small-single", "name: my-edited-one"))
    r = inkctl("plan", "vllm-single-docker", cwd=tmp_path)
    assert r.returncode == 0 and "my-edited-one" in r.stdout, r.stderr


def test_set_hosts_changes_the_inventory_given_with_hosts(tmp_path):
    assert inkctl("init", "inkling-small-2x-dgx-spark-vllm", cwd=tmp_path).returncode == 0
    base = ("plan", "inkling-small-2x-dgx-spark-vllm.yaml", "--hosts", "hosts.yaml", "-o", "json")
    for override, field, want in (("hosts[1].name=spark-b", "name", "spark-b"),
                                  ("hosts.1.address=10.0.0.9", "address", "10.0.0.9")):
        r = inkctl(*base, "--set", override, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["hosts"][1][field] == want
    # hosts in the recipe as well: --hosts wins, and the --set lands on what is used, not silently nowhere
    recipe = tmp_path / "inkling-small-2x-dgx-spark-vllm.yaml"
    recipe.write_text(recipe.read_text() + (tmp_path / "hosts.yaml").read_text().split("hosts:", 1)[0] + "hosts:"
                      + (tmp_path / "hosts.yaml").read_text().split("hosts:", 1)[1].replace("gpu-", "embedded-"))
    r = inkctl(*base, "--set", "hosts[0].name=first", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [h["name"] for h in json.loads(r.stdout)["hosts"]] == ["first", "gpu-1"]


def test_product_text_speaks_the_users_words():
    ref = (ROOT / "docs" / "recipe-reference.md").read_text().lower()
    assert "field report" not in ref and "registry record:" not in ref
    r = inkctl("plan", "inkling-small-2x-rtxpro6000-sglang")
    assert r.returncode == 0, r.stderr
    assert "the source gives only" not in r.stderr and "provenance gives only" in r.stderr


def test_only_paths_under_the_cwd_are_shown_relative(tmp_path, monkeypatch):
    """A path under the cwd is shown as the user typed it; one beside it stays absolute
    ('../x' would be shorter, but says less, and differs with where a command was run)."""
    from inkctl.cli.show.terminal import relative

    work = tmp_path / "work" / "proj"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert relative(f"error: {work}/r.yaml:3:1: bad") == "error: r.yaml:3:1: bad"
    beside = tmp_path / "work" / "other.yaml"
    assert relative(f"error: {beside}: bad") == f"error: {beside}: bad"


def test_the_recipe_hash_shown_does_not_change_with_hosts():
    """plan's header names the recipe by a hash of the recipe alone; with --hosts the
    deployment's hash (the containers' label, which covers the inventory) is shown beside it."""
    import re

    alone = inkctl("plan", "examples/vllm-native-2node.yaml")
    with_hosts = inkctl("plan", "examples/vllm-native-2node.yaml", "--hosts", "examples/hosts.yaml")
    assert alone.returncode == 0 and with_hosts.returncode == 0, with_hosts.stderr
    a = re.search(r"recipe ([0-9a-f]{12})", alone.stdout).group(1)
    m = re.search(r"recipe ([0-9a-f]{12}) \(deployment ([0-9a-f]{12})\)", with_hosts.stdout)
    assert m and m.group(1) == a and m.group(2) != a, with_hosts.stdout
    assert f"inkctl.recipe-hash={m.group(2)}" in " ".join(with_hosts.stdout.split())


def test_a_mistyped_recipe_name_gets_the_nearest_names_not_the_whole_list(tmp_path: Path) -> None:
    """A prefix of a bundled name (what a user types from memory) offers the names it starts,
    in a hint short enough to read; the whole list stays with `inkctl recipes`."""
    from inkctl import bundled

    for argv in (["plan", "qwen3-235b"], ["init", "qwen3-235b"]):
        r = inkctl(*argv, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        hint = r.stderr.split("hint: ", 1)[1]
        offered = [n for n in bundled.names() if n in hint]
        assert offered and all(n.startswith("qwen3-235b") for n in offered), hint
        assert "`inkctl recipes` lists all" in hint
    r = inkctl("plan", "no-such-thing", cwd=tmp_path)
    assert "`inkctl recipes` lists" in r.stderr and "vllm-single-docker" not in r.stderr
    assert not list(tmp_path.iterdir())  # init wrote nothing
