"""What ``plan`` shows each step of a rolling update replaces: the per-rank argv diff (the one
``up`` shows before it replaces a deployment, ``plan.record.diff_plans``) against the last
launch ``up`` recorded on this machine (``inkctl.launchlog``), as text and JSON, and exactly
today's text when there is no such record. The addresses are in the documentation range: only
labels, never contacted."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from inkctl import launchlog
from inkctl.api.boots import record_launches
from inkctl.cli.plan import plan as run_plan
from inkctl.plan.record import diff_argv, diff_plans, launch_record, rank_changes
from inkctl.plan.replicas.fleet import build_fleet
from inkctl.plan.replicas.rollout import HOST_RECORDS, plan_lines
from inkctl.recipe.hosts import Host
from inkctl.recipe.reading.source import load_recipe

RECIPE = Path(__file__).resolve().parents[1] / "e2e" / "recipes" / "fleet.yaml"
BOX = [Host(name="box", address="192.0.2.9", gpus="0,1,2,3")]


def _recipe(tmp_path, name="fleet.yaml", **args):
    doc = yaml.safe_load(RECIPE.read_text())
    doc["engine"]["args"].update(args)
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def _fleet(path):
    return build_fleet(load_recipe(path).recipe, BOX)


def _inventory(tmp_path):
    p = tmp_path / "hosts.yaml"
    p.write_text(yaml.safe_dump({"hosts": [{"name": "box", "address": "192.0.2.9", "gpus": "0,1,2,3"}]}))
    return p


def test_a_changed_flag_is_paired_by_name_wherever_it_moved():
    old = ["vllm", "serve", "m", "--max-model-len", "4096", "--port", "1", "-e", "A=1", "--x=1"]
    new = ["vllm", "serve", "m", "--port", "1", "--max-model-len", "8192", "-e", "A=2", "--x=2", "--enforce-eager"]
    assert diff_argv(old, new) == ["- --max-model-len 4096", "+ --max-model-len 8192", "- -e A=1", "+ -e A=2",
                                   "- --x=1", "+ --x=2", "+ --enforce-eager"]
    assert diff_argv(old, old) == []


def test_rank_changes_say_changed_unchanged_added_removed():
    a, b = (("run", "--a", "1"),), (("run", "--a", "2"),)
    got = rank_changes({0: a, 1: a, 2: a}, {0: b, 1: a, 3: a}, {0: "h0", 1: "h1", 3: "h3"})
    assert [(c.rank, c.state) for c in got] == [(0, "changed"), (1, "unchanged"), (2, "removed"), (3, "added")]
    assert got[0].lines == ("- --a 1", "+ --a 2")
    assert diff_plans({1: a}, {1: a}, {1: "h1"}) == ["  rank 1 (h1): unchanged"]


def test_the_launch_record_keeps_argv_image_and_env_names(tmp_path):
    rep = _fleet(_recipe(tmp_path)).replicas[0]
    rec = launch_record(rep.plan)
    assert rec["recipe_hash"] == rep.plan.recipe_hash
    (r0,) = rec["ranks"]
    assert (r0["rank"], r0["host"], r0["container"], r0["image"]) == (0, "box", "inkctl-e2e-fleet-r0-r0",
                                                                       "inkctl-fake-engine:latest")
    assert any("--tensor-parallel-size" in a for a in r0["argv"][-1])
    assert all(isinstance(n, str) and "=" not in n for n in r0["env"])


def test_no_local_record_prints_what_plan_printed_before(tmp_path):
    f = _fleet(_recipe(tmp_path))
    assert plan_lines(f, {r.name: None for r in f.replicas}, str(tmp_path)) == plan_lines(f)
    assert plan_lines(f)[-1] == HOST_RECORDS


def test_plan_text_shows_each_replicas_changed_flag_against_the_local_record(tmp_path, capsys):
    old = _fleet(_recipe(tmp_path, "old.yaml", max_model_len=4096))
    results = tmp_path / "results"
    record_launches(results, [old.replicas[0].plan])  # r1: no record on this machine
    new = _recipe(tmp_path, "new.yaml", max_model_len=8192)
    assert run_plan(new, hosts=_inventory(tmp_path), results_dir=results) == 0
    out = capsys.readouterr().out
    text = out[out.index("rolling update"):]
    path = str(launchlog.latest(results, "e2e-fleet-r0")[0])
    assert f"what changes (- old, + new) against its last local launch ({path}, " in text
    assert "rank 0 (box):\n        - --max-model-len 4096\n        + --max-model-len 8192\n" in text
    assert f"no local launch record of e2e-fleet-r1 (under {results / 'launches'})" in text
    assert HOST_RECORDS not in text
    # the same version as the record: every rank unchanged
    record_launches(results, [_fleet(new).replicas[0].plan])
    assert run_plan(new, hosts=_inventory(tmp_path), results_dir=results) == 0
    text = capsys.readouterr().out
    assert "the same version as its last local launch" in text and "rank 0 (box): unchanged" in text


def test_plan_text_without_a_record_is_unchanged(tmp_path, capsys):
    new = _recipe(tmp_path, "new.yaml", max_model_len=8192)
    run_plan(new, hosts=_inventory(tmp_path), results_dir=tmp_path / "nothing-here")
    without = capsys.readouterr().out
    assert HOST_RECORDS in without and "local launch" not in without
    assert not (tmp_path / "nothing-here").exists()  # plan writes nothing


def test_plan_json_has_the_changes_where_a_record_is(tmp_path, capsys):
    old = _fleet(_recipe(tmp_path, "old.yaml", max_model_len=4096))
    results = tmp_path / "results"
    record_launches(results, [old.replicas[1].plan])
    new = _recipe(tmp_path, "new.yaml", max_model_len=8192)
    run_plan(new, hosts=_inventory(tmp_path), output="json", results_dir=results)
    reps = json.loads(capsys.readouterr().out)["replicas"]
    assert "changes" not in reps[0]
    ch = reps[1]["changes"]
    assert ch["record"] == str(launchlog.latest(results, "e2e-fleet-r1")[0])
    assert ch["recipe_hash"] == old.replicas[1].plan.recipe_hash
    assert ch["ranks"] == [{"rank": 0, "host": "box", "state": "changed",
                            "lines": ["- --max-model-len 4096", "+ --max-model-len 8192"]}]


def test_launch_records_keep_the_newest_few(tmp_path):
    from datetime import datetime, timezone

    for k in range(launchlog.KEEP + 2):
        launchlog.save(tmp_path, "d", {"ranks": [], "n": k}, when=datetime(2026, 1, 1, 0, 0, k, tzinfo=timezone.utc))
    assert len(list(launchlog.folder(tmp_path, "d").glob("*.json"))) == launchlog.KEEP
    assert launchlog.latest(tmp_path, "d")[1]["n"] == launchlog.KEEP + 1


def test_the_launch_record_names_secrets_and_holds_no_value(tmp_path, monkeypatch):
    from inkctl.plan.deploy import build_plan

    monkeypatch.setenv("HF_TOKEN", "hf_sekrit_value_0123456789")
    root = Path(__file__).resolve().parents[2]
    recipe = load_recipe(root / "examples" / "vllm-single-docker.yaml").recipe
    plan = build_plan(recipe, [Host(name="box", address="192.0.2.9", user="ubuntu")])
    path = launchlog.save(tmp_path, plan.deployment, launch_record(plan))
    text = path.read_text()
    assert "HF_TOKEN" in launchlog.latest(tmp_path, plan.deployment)[1]["ranks"][0]["env"]
    assert "hf_sekrit" not in text and "HF_TOKEN=" not in text
