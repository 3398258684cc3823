"""Two failures seen once in about six runs on unseen hosts, kept as loops (issue 18):

- two ``up`` runs on different hosts at the same time, from one directory: both must end with
  their summary and exit 0 (one ended after its smoke summary with "internal error"); two
  recipes, and one recipe on two hosts (their boot records and run records share directories:
  the collisions themselves are made to happen in tests/unit/test_concurrent_runs.py);
- a ``watch`` started right after an earlier ``watch`` on the same hosts stopped: it must not
  declare a host lost that answers (one said "h3 lost ... no answer for 4.5 s" 27 ms after its
  first "ok").

Each test repeats its scenario ``INKCTL_SEAMS_LOOPS`` times (default 3; the hunt used 20):
``INKCTL_E2E_NET_ID=K INKCTL_SEAMS_LOOPS=20 pytest -m cluster tests/e2e/test_seams_loops.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.cluster.proc import wait_for
from tests.e2e.conftest import ROOT, no_traceback
from tests.e2e.test_guard import follow  # noqa: F401  (fixture)

pytestmark = pytest.mark.cluster
LOOPS = int(os.environ.get("INKCTL_SEAMS_LOOPS", "3"))


def test_two_ups_on_different_hosts_at_once_both_finish(cluster, home, inkctl, inventory, recipe, tmp_path):
    a = recipe("single", name="e2e-twin-a", watchdog={"enabled": False})  # the machine's own memory is not the point
    b = recipe("podman", name="e2e-twin-b")
    inv_a, inv_b = inventory("h1"), inventory("h3")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSH_", "INKCTL_", "E2E_"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), NO_COLOR="1", COLUMNS="200")
    for i in range(LOOPS):
        procs = [subprocess.Popen([sys.executable, "-m", "inkctl", "up", str(r), "--hosts", str(inv)], cwd=tmp_path,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  stdin=subprocess.DEVNULL)
                 for r, inv in ((a, inv_a), (b, inv_b))]
        outs = [p.communicate(timeout=240) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0 and no_traceback(out + err), f"loop {i}: rc={p.returncode}\n{out}\n{err}"
            assert "is up" in out or "ready" in out, out
        for r, inv in ((a, inv_a), (b, inv_b)):
            assert inkctl("down", r, "--hosts", inv, timeout=120).rc == 0


def test_one_recipe_up_on_two_hosts_at_once_from_one_directory(cluster, home, inkctl, inventory, recipe, tmp_path):
    """The same recipe on h1 and on h2 at once, from one directory: one deployment name, so one
    boot-record directory, written by both within the same second; one run-record directory.
    Both finish; every boot record and run record is there, whole."""
    rec = recipe("single", name="e2e-twin", watchdog={"enabled": False})
    invs = inventory("h1"), inventory("h2")
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SSH_", "INKCTL_", "E2E_"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), NO_COLOR="1", XDG_STATE_HOME=str(state))
    for i in range(LOOPS):
        procs = [subprocess.Popen([sys.executable, "-m", "inkctl", "up", str(rec), "--hosts", str(inv)], cwd=tmp_path,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  stdin=subprocess.DEVNULL) for inv in invs]
        outs = [p.communicate(timeout=240) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0 and no_traceback(out + err), f"loop {i}: rc={p.returncode}\n{out}\n{err}"
            assert "smoke: 1/1 checks passed" in out, out
        for inv in invs:
            assert inkctl("down", rec, "--hosts", inv, timeout=120).rc == 0
    records = sorted((tmp_path / "bench-results" / "boots" / "e2e-twin").glob("*.json"))
    assert len(records) == 2 * LOOPS
    assert all(isinstance(json.loads(r.read_text()), dict) for r in records)
    runs = [json.loads((d / "run.json").read_text()) for d in (state / "inkctl" / "runs").iterdir()]
    assert sorted(r["status"] for r in runs if r["command"] == "up") == ["ok"] * (2 * LOOPS)


def _events(f) -> list[dict]:
    return [json.loads(x) for x in "".join(f.out).splitlines() if x.startswith("{")]


def test_a_watch_right_after_another_on_the_same_hosts_sees_no_ghost(cluster, inkctl, follow, inventory,  # noqa: F811
                                                                      recipe):
    rec = recipe("podman", name="e2e-rewatch", smoke={"enabled": False})
    inv = inventory("h3")
    assert inkctl("up", rec, "--hosts", inv, timeout=120).rc == 0
    try:
        for i in range(LOOPS):
            f = follow("watch", rec, "--hosts", inv, "-o", "json", "--interval", "0.5")
            wait_for("watch to see every rank", lambda f=f: f.saw('"event": "ok"'), timeout=60)
            time.sleep(1.5)  # a few turns after the first ok
            f.p.send_signal(signal.SIGINT)
            assert f.end(timeout=30) == 130, f.text
            bad = [e for e in _events(f) if e["event"] == "failure"]
            assert not bad, f"loop {i}: {bad}\n{f.text}"
    finally:
        assert inkctl("down", rec, "--hosts", inv, timeout=120).rc == 0
