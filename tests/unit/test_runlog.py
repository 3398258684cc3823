"""The run record (inkctl.runlog): what a run leaves, secrets masked, and how it is found."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inkctl import runlog, scrub

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cret-value-of-a-token"


@pytest.fixture(autouse=True)
def _clean():
    before = scrub._ACTIVE
    yield
    runlog.finish(1)  # a test that failed half-way leaves no record open
    scrub._ACTIVE = before


def test_a_record_has_argv_events_debug_log_and_status(tmp_path):
    rec = runlog.start("up", ["up", "r.yaml", "--hosts", "h.yaml"], base=tmp_path)
    assert rec is not None and runlog.current() is rec
    assert json.loads((rec.path / "run.json").read_text())["status"] == "running"
    runlog.note(recipe="r.yaml", recipe_hash="abc123", deployment="d")
    runlog.event("step_started", host="h1", purpose="start rank 0")
    logging.getLogger("inkctl.execute.hosts.ssh").debug("h1: exit 0 in 0.1 s: docker ps")
    runlog.finish(0)
    assert runlog.current() is None
    info = json.loads((rec.path / "run.json").read_text())
    assert info["argv"] == ["inkctl", "up", "r.yaml", "--hosts", "h.yaml"] and info["command"] == "up"
    assert (info["status"], info["exit_code"], info["recipe_hash"], info["deployment"]) == ("ok", 0, "abc123", "d")
    assert info["seconds"] >= 0 and info["finished"] >= info["started"]
    (ev,) = [json.loads(x) for x in (rec.path / "events.jsonl").read_text().splitlines()]
    assert ev["event"] == "step_started" and ev["host"] == "h1" and "ts" in ev
    assert "h1: exit 0 in 0.1 s: docker ps" in (rec.path / "debug.log").read_text()
    # closed: later log lines go nowhere near it
    logging.getLogger("inkctl.x").debug("after the end")
    assert "after the end" not in (rec.path / "debug.log").read_text()


def test_secrets_are_masked_even_when_armed_after_they_were_written(tmp_path):
    rec = runlog.start("weights", ["weights", "r.yaml", "--set", f"x={SECRET}"], base=tmp_path)
    assert rec is not None
    runlog.event("info", text=f"token {SECRET} echoed by a host")
    logging.getLogger("inkctl.weights").debug("env HF_TOKEN=%s", SECRET)
    scrub.arm([SECRET])  # known only now
    runlog.event("info", text=f"again {SECRET}")
    runlog.finish(1, error=f"failed with {SECRET}")
    for name in runlog.FILES:
        text = (rec.path / name).read_text()
        assert SECRET not in text, name
    assert "***" in (rec.path / "events.jsonl").read_text() and "***" in (rec.path / "debug.log").read_text()
    assert json.loads((rec.path / "run.json").read_text())["error"] == "failed with ***"


def test_listing_newest_first_found_by_prefix_or_last_and_killed_runs(tmp_path):
    a = runlog.start("up", ["up"], base=tmp_path)
    runlog.finish(0)
    b = runlog.start("up", ["up"], base=tmp_path)  # the same second: its own directory
    runlog.finish(2, error="bad")
    assert a is not None and b is not None and a.path != b.path
    dead = tmp_path / "20000101T000000Z-down"
    dead.mkdir()
    (dead / "run.json").write_text(json.dumps({"id": dead.name, "command": "down", "status": "running", "pid": 2**22 + 1}))
    rows = runlog.listing(tmp_path)
    assert [r["id"] for r in rows] == [b.path.name, a.path.name, dead.name]
    assert [r["status"] for r in rows] == ["failed", "ok", "killed"]  # running, but its process is gone
    assert runlog.find("last", tmp_path) == b.path
    assert runlog.find("2000", tmp_path) == dead
    assert runlog.find(a.path.name, tmp_path) == a.path
    assert runlog.find(a.path.name[:10], tmp_path) is None  # ambiguous


def test_old_records_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setattr(runlog, "KEEP", 3)
    for i in range(5):
        (tmp_path / f"2000010{i}T000000Z-up").mkdir()
    runlog.start("down", ["down"], base=tmp_path)
    runlog.finish(0)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 3 and names[:2] == ["20000103T000000Z-up", "20000104T000000Z-up"]


def test_an_unwritable_place_warns_and_the_command_goes_on(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("")
    with caplog.at_level(logging.WARNING, logger="inkctl"):
        assert runlog.start("up", ["up"], base=blocked / "runs") is None
    assert any("no run record for this up" in r.getMessage() for r in caplog.records)
    runlog.event("x")  # no record: nothing happens
    runlog.note(a=1)


def test_xdg_state_home_and_the_cli_records_only_commands_that_change_hosts(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("INKCTL_")}
    env.update(XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path))

    def inkctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=ROOT, env=env, capture_output=True, text=True)

    assert inkctl("validate", "examples/").returncode == 0
    assert inkctl("up", "--help").returncode == 0
    bad = inkctl("down", "examples/vllm-single-docker.yaml", "--hosts", str(tmp_path / "missing.yaml"))
    assert bad.returncode == 2
    runs = tmp_path / "state" / "inkctl" / "runs"
    (rec,) = runs.iterdir()  # validate and --help left none
    info = json.loads((rec / "run.json").read_text())
    assert info["command"] == "down" and info["exit_code"] == 2 and "missing.yaml" in info["error"]
    listed = inkctl("runs")
    assert listed.returncode == 0 and rec.name in listed.stdout and "failed (2)" in listed.stdout
    assert all(len(line) <= 80 for line in listed.stdout.splitlines())
