"""Stays up, or says so (issue 9): a host lost during the health wait with an engine that does
not notice, after boot under ``watch``, a rank dying after boot, ``watch --restart``, NCCL
falling back to sockets, secrets an engine echoes, and the GPU selection the engine process
really sees. Every assertion is about what happened on the hosts and what inkctl said.
"""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import containers, no_traceback, poll
from tests.e2e.test_guard import Follow, follow, lock_dir, state_dir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.cluster

# an engine that, like NCCL with its default timeout, does not notice a lost peer for minutes
DEAF = {"FAKE_PEER_TIMEOUT": "600"}


def events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(autouse=True)
def _no_locks_left(cluster):
    yield
    import shutil

    for h in cluster.hosts:
        for d in (Path(h.state_dir) / "locks").glob("e2e-*.lock"):
            shutil.rmtree(d, ignore_errors=True)


def test_a_host_cut_during_the_health_wait_fails_up_even_when_the_engine_does_not_notice(
        cluster, inkctl, follow, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-lost", smoke={"enabled": False},
                 container={"env": {**DEAF, "FAKE_READY_AFTER": "8"}})
    inv = inventory("h1", "h2")
    f = follow("up", rec, "--hosts", inv, "-o", "json")
    poll(lambda: f.saw('"kind": "health"'), timeout=90)
    time.sleep(1)  # the fault: 1 s into the health wait (the head answers 200 some seconds later)
    cluster.cut("h2")
    cut_at = time.monotonic()
    try:
        rc = f.end(timeout=60)
        took = time.monotonic() - cut_at
    finally:
        cluster.heal("h2")
    ev = events("".join(f.out))
    done = [e for e in ev if e["event"] == "finished"]
    assert rc == 1 and done and done[-1]["ok"] is False, f.text  # never a success with a rank unverified
    msg = done[-1]["message"]
    assert re.search(r"h2: host lost[^\n]*\(rank 1\)", msg), msg
    assert "rank 0 (h1, inkctl-e2e-lost-r0): running" in msg, msg  # what the other rank did
    assert "rolled back: removed the deployment's containers and files on h1" in msg, msg
    assert "could NOT remove:\n  h2: inkctl-e2e-lost-r1" in msg and "and the deploy lock" in msg, msg
    assert f"inkctl down {rec} --hosts {inv}" in done[-1]["hint"], done[-1]
    assert took < 30, f"{took:.1f} s from the cut to the exit"  # generous: bench/supervise.py measures it
    assert no_traceback(f.text)
    assert containers(cluster, "h1", "e2e-lost") == [] and not lock_dir(cluster, "h1", "e2e-lost").exists()
    assert lock_dir(cluster, "h2", "e2e-lost").exists()  # as the message says
    # the host is back: the one command from the message finishes the clean-up (the lock's holder is gone)
    d = inkctl("down", rec, "--hosts", inv)
    assert d.rc == 0, d
    assert "took over a stale deploy lock" in d.out and f"(pid {f.p.pid})" in d.out, d
    assert containers(cluster, "h2", "e2e-lost") == [] and not state_dir(cluster, "h2", "e2e-lost").exists()
    assert not lock_dir(cluster, "h2", "e2e-lost").exists()
