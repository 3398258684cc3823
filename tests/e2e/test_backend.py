"""The backend seam on the test cluster (issue 27, item 4): ``watch --restart`` restarts in
process through the same api as up and down, with the options of the original ``up``, and a
down that fails is reported with nothing started over it; the api, called from Python, stops a
run when its cancel token is set (no signal handler of its own) and removes what it started.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.cluster.proc import wait_for
from tests.e2e.conftest import containers, no_traceback
from tests.e2e.test_guard import Follow, follow  # noqa: F401  (fixtures)

pytestmark = pytest.mark.cluster


def _events(f) -> list[dict]:
    return [json.loads(line) for line in f.text.splitlines() if line.startswith("{")]


def test_watch_restart_brings_it_back_with_the_options_of_the_original_up(cluster, inkctl, follow, inventory, recipe,
                                                                          tmp_path):
    rec = recipe("single", name="e2e-bkopts", smoke={"enabled": False})
    inv = inventory("h1")
    res = tmp_path / "results"
    up = inkctl("up", rec, "--hosts", inv, "--results-dir", res, "--timeout", "90", "--skip-check", "memory",
                timeout=120)
    assert up.rc == 0, up
    assert len(list((res / "boots" / "e2e-bkopts").glob("*.json"))) == 1, up
    f = follow("watch", rec, "--hosts", inv, "-o", "json", "--interval", "0.5", "--restart", "--backoff", "0")
    try:
        wait_for("watch to see every rank", lambda: f.saw('"event": "ok"'), timeout=60)
        cluster.docker("h1", "kill", "inkctl-e2e-bkopts-r0", check=True)
        wait_for("the restart", lambda: f.saw('"event": "restarted"'), timeout=120)
        assert containers(cluster, "h1", "e2e-bkopts") == ["inkctl-e2e-bkopts-r0 running"]
        # the restart's up kept --results-dir: its boot record went beside the first, not to ./bench-results
        assert len(list((res / "boots" / "e2e-bkopts").glob("*.json"))) == 2, f.text
        said = [e["event"] for e in _events(f)]
        assert said.index("failure") < said.index("restart") < said.index("restarted"), f.text
    finally:
        f.p.send_signal(2)
        f.end(timeout=30)
    assert no_traceback(f.text), f.text
    # the watch's record holds the restart's up: its plan's events, the options kept
    runs = tmp_path / "home" / ".local" / "state" / "inkctl" / "runs"
    (watch_run,) = [d for d in runs.iterdir() if d.name.endswith("-watch")]
    info = json.loads((watch_run / "run.json").read_text())
    assert info["up_options"]["skip"] == ["memory"] and info["up_options"]["timeout"] == 90.0, info
    assert '"event": "finished"' in (watch_run / "events.jsonl").read_text()
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_watch_restart_reports_a_failed_down_and_starts_nothing_over_it(cluster, inkctl, follow, inventory, recipe):
    rec = recipe("single", name="e2e-bkdown", smoke={"enabled": False})
    inv = inventory("h1")
    assert inkctl("up", rec, "--hosts", inv, timeout=120).rc == 0
    f = follow("watch", rec, "--hosts", inv, "-o", "json", "--interval", "0.5", "--restart", "--backoff", "0",
               "--max-restarts-per-hour", "1")
    wait_for("watch to see every rank", lambda: f.saw('"event": "ok"'), timeout=60)
    cluster.cut("h1")
    try:
        rc = f.end(timeout=240)
    finally:
        cluster.heal("h1")
    said = _events(f)
    kinds = [e["event"] for e in said]
    assert rc == 1, f.text
    assert kinds.count("restart_failed") == 1 and "restarted" not in kinds, f.text
    (failed,) = [e for e in said if e["event"] == "restart_failed"]
    assert failed["message"].startswith("down failed: e2e-bkdown: could not clean 1 host(s)"), failed
    assert failed["message"].endswith("not starting it again over what is left") and "h1" in failed["message"], failed
    assert "restart_refused" in kinds and "(the last: down failed" in "".join(f.err), f.text
    assert no_traceback(f.text), f.text
    assert containers(cluster, "h1", "e2e-bkdown") == ["inkctl-e2e-bkdown-r0 running"]  # nothing new started
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_the_cancel_token_stops_up_from_python_and_removes_what_it_started(cluster, home, inventory, recipe,
                                                                           monkeypatch):
    from inkctl.api import backend
    from inkctl.api.target import Target
    from inkctl.api.up import UpOptions
    from inkctl.errors import EXIT_INTERRUPTED, InkctlError
    from inkctl.execute.events import Collect, StepFinished

    monkeypatch.setenv("HOME", str(home))  # the cluster's ssh config and known hosts
    rec = recipe("single", name="e2e-bkcancel", smoke={"enabled": False}, container={"env": {"FAKE_WEIGHTS_S": "60"}})
    inv = inventory("h1")
    cancel, sink, ended = threading.Event(), Collect(), []

    def run() -> None:
        try:
            backend.up(Target.of(rec, inv), UpOptions(), lambda: sink, cancel=cancel)
            ended.append(None)
        except InkctlError as e:
            ended.append(e)

    t = threading.Thread(target=run)
    t.start()
    wait_for("the rank's container", lambda: containers(cluster, "h1", "e2e-bkcancel") ==
             ["inkctl-e2e-bkcancel-r0 running"], timeout=90)
    assert sink.of(StepFinished)  # under way
    t0 = time.monotonic()
    cancel.set()
    t.join(timeout=60)
    assert not t.is_alive() and time.monotonic() - t0 < 30
    (err,) = ended
    assert isinstance(err, InkctlError) and err.exit_code == EXIT_INTERRUPTED, err
    assert containers(cluster, "h1", "e2e-bkcancel") == []  # rolled back
