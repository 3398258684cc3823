"""A fleet's rolling update on paper (``plan.rollout``): the order, what ``plan`` says of each
step, the old version of a replica rebuilt from its hosts' plan records, the copy of its
deployment directory kept aside (run for real with sh on a temporary directory), and the
drain loop (``client.drain``) on a scripted engine. The addresses are in the documentation
range: only labels, never contacted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from inkctl.client.drain import drain
from inkctl.errors import InkctlError
from inkctl.plan.replicas.fleet import build_fleet
from inkctl.plan.record import record_text
from inkctl.plan.replicas.rollout import drop_aside, keep_aside, old_plan, plan_lines, restore_aside, rollout
from inkctl.plan.step import Run, WaitHealth
from inkctl.recipe.hosts import Host
from inkctl.recipe.reading.source import load_recipe

RECIPE = Path(__file__).resolve().parents[1] / "e2e" / "recipes" / "fleet.yaml"
BOX = [Host(name="box", address="192.0.2.9", gpus="0,1,2,3,4,5")]


def _fleet(tmp_path, **changes):
    doc = yaml.safe_load(RECIPE.read_text())
    for k, v in changes.items():
        doc[k] = {**doc.get(k, {}), **v} if isinstance(v, dict) else v
    p = tmp_path / "fleet.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return build_fleet(load_recipe(p).recipe, BOX)


def test_order_is_the_replicas_order_and_only_the_changed(tmp_path):
    f = _fleet(tmp_path, fleet={"replicas": 3})
    ro = rollout(f, {"e2e-fleet-r2": ("x",), "e2e-fleet-r0": ()})
    assert ro.deployments == ("e2e-fleet-r0", "e2e-fleet-r2")
    assert [s.url for s in ro.steps] == ["http://192.0.2.9:18000", "http://192.0.2.9:18020"]
    assert ro.steps[1].changes == ("x",)
    assert ro.drain_timeout_s == 120 and ro.router_url == "http://192.0.2.9:30080"


def test_plan_lines_say_the_order_and_each_step(tmp_path):
    f = _fleet(tmp_path, fleet={"replicas": 2, "rollout": {"drain_timeout_s": 30}})
    lines = plan_lines(f)
    assert "one replica at a time, in order (e2e-fleet-r0, e2e-fleet-r1)" in lines[0]
    assert lines.index("replica 0 (e2e-fleet-r0):") < lines.index("replica 1 (e2e-fleet-r1):")
    text = "\n".join(lines)
    assert "1. take http://192.0.2.9:18010 out of the router (http://192.0.2.9:30080)" in text
    assert "at most 30 s" in text
    assert f"start the new version ({f.replicas[1].plan.recipe_hash}): inkctl-e2e-fleet-r1-r0" in text
    assert text.index("wait for health and the recipe's smoke checks") < text.index("put http://192.0.2.9:18000 back")


def test_one_replica_and_all_at_once_say_the_fleet_does_not_serve(tmp_path):
    one = plan_lines(_fleet(tmp_path, fleet={"replicas": 1}))
    assert "nothing serves while the new version boots" in one[0]
    every = plan_lines(_fleet(tmp_path, fleet={"replicas": 2, "rollout": {"strategy": "all_at_once"}}))
    assert len(every) == 1 and "every replica replaced at once" in every[0]


def test_an_unknown_strategy_is_refused(tmp_path):
    with pytest.raises(InkctlError) as e:
        _fleet(tmp_path, fleet={"replicas": 2, "rollout": {"strategy": "blue_green"}})
    assert "fleet.rollout.strategy" in e.value.message


def test_the_old_version_comes_back_from_its_plan_records(tmp_path):
    old = _fleet(tmp_path, fleet={"replicas": 2}).replicas[1].plan
    new = _fleet(tmp_path, fleet={"replicas": 2}, engine={"args": {"tensor_parallel": 2, "port": 18000,
                                                                   "max_model_len": 4096}}).replicas[1].plan
    assert old.recipe_hash != new.recipe_hash
    records = {h.name: record_text(old.deployment, old.recipe_hash, h.name, old.stages) for h in old.hosts}
    back = old_plan(new, records)
    assert back.recipe_hash == old.recipe_hash and back.deployment == new.deployment
    runs = [s for s in back.steps() if isinstance(s, Run)]
    assert [r.argv for r in runs] == [s.argv for s in old.steps() if isinstance(s, Run)]
    assert "--max-model-len" not in runs[-1].argv
    wait = [s for s in back.steps() if isinstance(s, WaitHealth)]
    assert [w.url for w in wait] == [old.health_url] and wait[0].answer_url == ""
    assert back.containers == new.containers and back.teardown == new.teardown


def test_no_record_no_old_plan(tmp_path):
    new = _fleet(tmp_path).replicas[0].plan
    with pytest.raises(ValueError, match="box: no plan record"):
        old_plan(new, {})
    with pytest.raises(ValueError, match="box: not a plan record"):
        old_plan(new, {"box": "[]"})


def test_the_deployment_directory_is_kept_aside_and_put_back(tmp_path):
    state = tmp_path / "dep"
    state.mkdir()
    (state / "env").write_text("OLD=1\n")
    subprocess.run(keep_aside(str(state)), check=True)
    (state / "env").write_text("NEW=1\n")  # the new version's files, then it fails
    subprocess.run(restore_aside(str(state)), check=True)
    assert (state / "env").read_text() == "OLD=1\n"
    assert not Path(str(state) + ".rollback").exists()
    subprocess.run(keep_aside(str(state)), check=True)
    subprocess.run(drop_aside(str(state)), check=True)
    assert not Path(str(state) + ".rollback").exists() and (state / "env").exists()
    # nothing kept (no directory): putting back changes nothing
    subprocess.run(keep_aside(str(tmp_path / "none")), check=True)
    subprocess.run(restore_aside(str(tmp_path / "none")), check=True)
    assert not (tmp_path / "none").exists()


def test_drain_ends_on_two_empty_reads_in_a_row():
    said = iter([3.0, 1.0, 0.0, 2.0, 0.0, 0.0, 5.0])
    d = drain("http://192.0.2.9:18000", 30, lambda _u: next(said), interval_s=0.0)
    assert d.ok and d.left == 0.0
    assert next(said) == 5.0  # stopped right after the second zero in a row


def test_drain_gives_up_at_its_timeout_and_says_what_is_left():
    d = drain("http://192.0.2.9:18000", 0.05, lambda _u: 2.0, interval_s=0.01)
    assert not d.ok and d.left == 2.0 and d.seconds >= 0.05
    unknown = drain("http://192.0.2.9:18000", 0.0, lambda _u: None)
    assert not unknown.ok and unknown.left is None


def test_a_surge_takes_the_spare_room_or_says_there_is_none(tmp_path):
    f = _fleet(tmp_path, fleet={"replicas": 2, "rollout": {"surge": True}})  # box has GPUs 0-5: room for one more
    assert f.surge is not None and f.surge.name == "e2e-fleet-r2" and f.surge.gpus == "box:4,5"
    assert f.surge.url == "http://192.0.2.9:18020"
    assert any("first (fleet.rollout.surge): one more replica of the new version, e2e-fleet-r2 on box:4,5" in x
               for x in plan_lines(f))
    full = _fleet(tmp_path, fleet={"replicas": 3, "rollout": {"surge": True}})
    assert full.surge is None
    assert any("the inventory has no room for one more replica: no surge" in x for x in plan_lines(full))
    assert _fleet(tmp_path, fleet={"replicas": 2}).surge is None  # not asked for


DISAGG = Path(__file__).resolve().parents[1] / "e2e" / "recipes" / "disagg.yaml"


def _pd(tmp_path, kind="sglang", prefill=2, decode=2):
    from inkctl.plan.replicas.disagg import build_disagg

    doc = yaml.safe_load(DISAGG.read_text())
    doc["fleet"]["disagg"]["prefill"]["replicas"] = prefill
    doc["fleet"]["disagg"]["decode"]["replicas"] = decode
    doc["fleet"]["rollout"] = {"drain_timeout_s": 15}
    if kind == "vllm":
        doc["engine"] = {**doc["engine"], "kind": "vllm"}
        doc["fleet"]["router"] = {**doc["fleet"]["router"], "kind": "vllm", "policy": "round_robin"}
    p = tmp_path / "pd.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return build_disagg(load_recipe(p).recipe, BOX)


def test_a_pd_fleet_behind_sglang_router_rolls_one_replica_at_a_time_prefill_first(tmp_path):
    from inkctl.plan.replicas.rollout import rolling

    f = _pd(tmp_path)
    assert rolling(f) and f.rollout.drain_timeout_s == 15
    lines = plan_lines(f)
    assert ("one replica at a time, prefill replicas first, then decode (e2e-pd-p0, e2e-pd-p1, e2e-pd-d0, e2e-pd-d1)"
            in lines[0])
    text = "\n".join(lines)
    assert text.index("prefill replica 1 (e2e-pd-p1):") < text.index("decode replica 0 (e2e-pd-d0):")
    p1 = f.replicas[1]
    assert p1.worker == {"worker_type": "prefill", "bootstrap_port": 19008}  # shifted as its engine's port was
    assert "put http://192.0.2.9:18110 back in the router (worker_type prefill, bootstrap_port 19008)" in text
    assert "put http://192.0.2.9:18130 back in the router (worker_type decode)" in text
    assert "only" not in text and "at most 15 s" in text
    ro = rollout(f, {"e2e-pd-d0": (), "e2e-pd-p1": ()})
    assert ro.deployments == ("e2e-pd-p1", "e2e-pd-d0")


def test_a_pd_role_of_one_replica_says_the_fleet_does_not_serve_meanwhile(tmp_path):
    lines = plan_lines(_pd(tmp_path, prefill=1, decode=2))
    assert any("the prefill role has one replica: the fleet does not serve while its new version boots" in x
               for x in lines)
    assert not any("the decode role has one replica" in x for x in lines)


def test_a_pd_fleet_behind_vllm_router_is_replaced_at_once_and_says_why(tmp_path):
    from inkctl.plan.replicas.rollout import rolling

    f = _pd(tmp_path, kind="vllm")
    assert not rolling(f)
    (line,) = plan_lines(f)
    assert "every replica replaced at once" in line and "vllm-router in its P/D mode cannot put a prefill" in line
    assert "POST /add_worker and POST /workers answer 400" in line
    assert f.replicas[0].worker == {"worker_type": "prefill"}  # vllm-router is told no bootstrap port
