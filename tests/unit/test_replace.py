"""The plan record and the diff ``up`` shows before replacing a changed deployment."""

from __future__ import annotations

import json
from pathlib import Path

from inkctl.execute.state.deployed import ContainerState
from inkctl.execute.deploy.replace import Replacement
from inkctl.plan.deploy import build_plan
from inkctl.plan.record import argv_by_rank, diff_argv, flag_units, parse_record
from inkctl.plan.step import Put
from inkctl.recipe.reading.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "tests" / "e2e" / "recipes" / "vllm-native-2.yaml"


def plan(**sets):
    loaded = load_recipe(RECIPE, [f"{k}={v}" for k, v in sets.items()], ROOT / "examples" / "hosts.yaml")
    return build_plan(loaded.recipe, loaded.hosts)


def records(p) -> dict:
    return {s.host: s.content for s in p.puts() if isinstance(s, Put) and s.path.endswith("/plan.json")}


def test_flag_units_group_a_flag_with_its_value():
    argv = ["docker", "run", "--detach", "--name", "c", "-e", "A=1", "--gpus=all", "img", "serve", "m",
            "--max-model-len", "4096", "--enforce-eager", "--offset", "-1"]
    assert flag_units(argv) == ["docker", "run", "--detach", "--name c", "-e A=1", "--gpus=all", "img", "serve", "m",
                                "--max-model-len 4096", "--enforce-eager", "--offset -1"]


def test_diff_shows_only_what_changes_by_flag():
    old = ("vllm", "serve", "m", "--max-model-len", "4096", "--port", "8000")
    new = ("vllm", "serve", "m", "--max-model-len", "8192", "--port", "8000", "--enforce-eager")
    assert diff_argv(old, new) == ["- --max-model-len 4096", "+ --max-model-len 8192", "+ --enforce-eager"]
    assert diff_argv(old, old) == []


def test_every_host_gets_a_record_of_its_own_ranks_written_by_its_launch_command():
    p = plan()
    assert [st.name for st in p.stages[:2]] == ["page-cache", "launch"]  # unified memory: the cache is dropped first
    assert all(any(f.path.endswith("/plan.json") for f in s.files) for s in p.stages[1].steps)
    recs = records(p)
    assert set(recs) == {h.name for h in p.hosts}
    for h in p.hosts:
        doc = json.loads(recs[h.name])
        assert doc["recipe_hash"] == p.recipe_hash and doc["deployment"] == p.deployment
        assert [r["rank"] for r in doc["runs"]] == [h.rank]
        assert parse_record(recs[h.name]).argv_by_rank == argv_by_rank(p.stages, h.name)


def test_no_secret_reaches_the_record():
    loaded = load_recipe(ROOT / "examples" / "vllm-single-docker.yaml", [], ROOT / "examples" / "hosts-one.yaml")
    assert loaded.recipe.secrets  # the example has one
    p = build_plan(loaded.recipe, loaded.hosts)
    [text] = records(p).values()
    assert "--env-file" in text and "***" not in text and "SecretRef" not in text
    for name in loaded.recipe.secrets:
        assert f"{name}=" not in text


def test_replacement_describes_the_change_per_rank_and_a_missing_record():
    old, new = plan(**{"engine.args.max_model_len": 4096}), plan(**{"engine.args.max_model_len": 8192})
    recs = records(old)
    found = [ContainerState(c.host, c.name, "running", labels={"inkctl.recipe-hash": old.recipe_hash}) for c in old.containers]
    r = Replacement(new, found)
    first = old.hosts[0].name
    r.records = {h: parse_record(t) for h, t in recs.items() if h != first}
    r.missing = {first: "no plan record (x)"}
    text = "\n".join(r.describe())
    assert f"recipe hash {old.recipe_hash} -> {new.recipe_hash}" in text
    assert f"{first}: no plan record (x); the recipe hashes differ" in text
    second = old.hosts[1].name
    assert f"rank 1 ({second}):\n      - --max-model-len 4096\n      + --max-model-len 8192" in text
    assert "rank 0" not in text.split("what changes")[1]  # no record there: nothing claimed
    assert "recipe-hash" not in text
