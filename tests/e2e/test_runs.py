"""Every up and down leaves a record directory (argv, recipe hash, events, debug log, exit
status) under the XDG state dir; ``inkctl runs`` lists and shows them; a secret never gets in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

SECRET = "hf_runs-s3cret_Value$(never)"


def _runs_dir(home: Path) -> Path:
    return home / ".local" / "state" / "inkctl" / "runs"


def _records(home: Path) -> dict[str, Path]:
    """command -> its newest record directory."""
    out: dict[str, Path] = {}
    for d in sorted(_runs_dir(home).iterdir()):
        out[d.name.split("-", 1)[1].split("-")[0]] = d
    return out


def _events(d: Path) -> list[dict]:
    return [json.loads(line) for line in (d / "events.jsonl").read_text().splitlines()]


def test_up_and_down_leave_records_that_runs_lists_and_shows(cluster, inkctl, inventory, recipe, home):
    rec = recipe("single", name="e2e-runs", secrets={"HF_TOKEN": {"env": "HF_TOKEN"}},
                 container={"env": {"FAKE_READY_AFTER": "2"}})
    inv = inventory("h1")
    env = {"HF_TOKEN": SECRET}
    plan = json.loads(inkctl("plan", rec, "--hosts", inv, "-o", "json").stdout)
    up = inkctl("up", rec, "--hosts", inv, env=env)
    assert up.rc == 0, up
    down = inkctl("down", rec, "--hosts", inv, env=env)
    assert down.rc == 0, down
    assert not list(_runs_dir(home).glob("*-plan*"))  # a command that changes nothing leaves none
    records = _records(home)
    assert sorted(records) == ["down", "up"], sorted(_runs_dir(home).iterdir())

    info = json.loads((records["up"] / "run.json").read_text())
    assert info["argv"] == ["inkctl", "up", str(rec), "--hosts", str(inv)]
    assert (info["status"], info["exit_code"], info["command"]) == ("ok", 0, "up")
    assert info["recipe_hash"] == plan["recipe_hash"] and info["deployment"] == "e2e-runs" and info["hosts"] == ["h1"]
    kinds = [e["event"] for e in _events(records["up"])]
    assert "finished" in kinds and kinds[-1] == "finished", kinds
    finished = _events(records["up"])[-1]
    assert finished["ok"] is True and finished["deployment"] == "e2e-runs"
    assert any(k.startswith("step") for k in kinds), kinds  # the steps, as -o json prints them
    debug = (records["up"] / "debug.log").read_text()
    assert "h1: exit 0" in debug  # every remote command, with its exit code (debug level, not shown)
    assert "debug" not in up.stderr.lower()  # quiet by default

    d_info = json.loads((records["down"] / "run.json").read_text())
    assert (d_info["status"], d_info["exit_code"], d_info["recipe_hash"]) == ("ok", 0, plan["recipe_hash"])
    (gone,) = [e for e in _events(records["down"]) if e["event"] == "down"]
    assert gone["ok"] is True and gone["removed"]["h1"] == ["inkctl-e2e-runs-r0"]

    # the secret reached the container (up passed); nothing in any record holds it
    for p in _runs_dir(home).rglob("*"):
        if p.is_file():
            assert SECRET.encode() not in p.read_bytes(), p

    listed = inkctl("runs")
    assert listed.rc == 0, listed
    lines = listed.stdout.splitlines()
    assert lines[0].split()[:3] == ["RUN", "STATUS", "TIME"] and all(len(x) <= 80 for x in lines), lines
    assert lines[1].startswith(records["down"].name) and lines[2].startswith(records["up"].name), lines
    assert " ok " in lines[2] and lines[2].rstrip().endswith("e2e-runs"), lines
    as_json = json.loads(inkctl("runs", "-o", "json").stdout)
    assert [r["id"] for r in as_json["runs"]] == [records["down"].name, records["up"].name]

    shown = inkctl("runs", records["up"].name[:-3])  # a unique start of the id
    assert shown.rc == 0, shown
    assert all(len(x) <= 80 for x in shown.stdout.splitlines()), shown.stdout
    assert "status    ok, exit 0" in shown.stdout and plan["recipe_hash"] in shown.stdout, shown.stdout
    assert "finished" in shown.stdout and str(records["up"]) in shown.stdout.replace("\n            ", "")
    one = json.loads(inkctl("runs", "last", "-o", "json").stdout)
    assert one["id"] == records["down"].name and any(e["event"] == "down" for e in one["events"])
    missing = inkctl("runs", "nosuchrun")
    assert missing.rc == 2 and "no run 'nosuchrun'" in missing.stderr, missing


def test_a_failed_up_records_its_events_error_and_exit_status(cluster, inkctl, inventory, recipe, home):
    rec = recipe("single", name="e2e-runfail", container={"env": {
        "FAKE_READY_AFTER": "30", "FAKE_CRASH_AFTER": "0.5", "FAKE_EXIT_CODE": "3"}})
    r = inkctl("--debug", "up", rec, "--hosts", inventory("h1"))
    assert r.rc == 1, r
    (d,) = _runs_dir(home).iterdir()
    info = json.loads((d / "run.json").read_text())
    assert (info["status"], info["exit_code"]) == ("failed", 1), info
    assert "exited with code 3" in info["error"], info
    ev = _events(d)
    assert ev[-1]["event"] == "finished" and ev[-1]["ok"] is False and "exited with code 3" in ev[-1]["message"]
    assert any(e["event"] == "rollback_finished" or "rollback" in e["event"] for e in ev), [e["event"] for e in ev]
    # --debug: the debug log on stderr too, the same lines the record keeps
    assert "h1: exit 0 in" in r.stderr and "h1: exit 0 in" in (d / "debug.log").read_text(), r.stderr[-2000:]
    shown = inkctl("runs", d.name)
    assert "status    failed (1)" in shown.stdout and "exited with code 3" in shown.stdout, shown.stdout
