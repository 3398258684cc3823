"""The engine's own word on every argv, before anything starts: ``up``'s preflight runs each
rank's argv through the engine's parser and pre-checks inside the image on its host (the fake
engine's image carries a parser with the real ones' habits: every flag some real release has,
argparse's refusals, vLLM's headless rule). A refusal stops ``up`` with nothing started, located
in the recipe; a verdict is kept (a second ``up`` asks nothing) and ``lock`` pins it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import containers

pytestmark = pytest.mark.cluster
RECIPES = Path(__file__).parent / "recipes"


def preflight_rows(r) -> dict:
    return {(c["host"], c["check"]): c for line in r.stdout.splitlines() if line.startswith("{")
            for e in [json.loads(line)] if e["event"] == "preflight" for c in e["checks"]}


def proof_containers(cluster, host: str) -> list[str]:
    out = cluster.docker(host, "ps", "-a", "--filter", "label=inkctl.proof", "--format", "{{.Names}}").stdout
    return out.split()


def test_an_unknown_flag_in_extra_stops_up_before_any_rank_starts(cluster, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-proof-unknown", engine={"args": {"extra": ["--enforce-eager", "--foo-bar"]}})
    r = inkctl("up", rec, "--hosts", inventory("h1"), "--output", "json", timeout=120)
    assert r.rc == 1, r
    row = preflight_rows(r)[("h1", "argv")]
    assert row["status"] == "fail"
    assert "rank 0 (head)" in row["detail"] and "unrecognized arguments: --foo-bar" in row["detail"], row
    assert row["hint"].startswith("from engine.args.extra[1] (--foo-bar)"), row
    assert containers(cluster, "h1", "e2e-proof-unknown") == []
    assert proof_containers(cluster, "h1") == []  # the throwaway container is gone too
    # validate on its own cannot know: the fake's version has no table, and it says so
    assert inkctl("validate", rec).rc == 0


def test_a_head_only_flag_goes_to_the_head_and_the_workers_own_args_are_proven_there(cluster, inkctl, inventory, recipe):
    inv = inventory("h1", "h2")
    # extra goes to every rank: validate knows vLLM's headless worker refuses --api-server-count
    bad = recipe("vllm-native-2", name="e2e-proof-headless", engine={"args": {"extra": ["--api-server-count", "4"]}})
    v = inkctl("validate", bad)
    assert v.rc == 2 and "--api-server-count goes to the head only" in v.out and "engine.args.head_extra" in v.out, v
    # head_extra: the head gets it, the worker does not, and the engine on each accepts its own
    rec = recipe("vllm-native-2", name="e2e-proof-headless", engine={"args": {"head_extra": ["--api-server-count", "4"]}})
    r = inkctl("up", rec, "--hosts", inv, "--output", "json", timeout=180)
    assert r.rc == 0, r
    rows = preflight_rows(r)
    assert rows[("h1", "argv")]["status"] == "ok" and rows[("h2", "argv")]["status"] == "ok", rows
    head = json.loads(cluster.docker("h1", "exec", "inkctl-e2e-proof-headless-r0", "cat", "/tmp/inkctl-fake-engine.json").stdout)
    worker = json.loads(cluster.docker("h2", "exec", "inkctl-e2e-proof-headless-r1", "cat", "/tmp/inkctl-fake-engine.json").stdout)
    assert head["argv"][-2:] == ["--api-server-count", "4"] and "--api-server-count" not in worker["argv"]
    assert inkctl("down", rec, "--hosts", inv).rc == 0
    # what only a worker gets is read on the worker: refused there, located at worker_extra
    wrk = recipe("vllm-native-2", name="e2e-proof-worker", engine={"args": {"worker_extra": ["--foo-bar"]}})
    r = inkctl("up", wrk, "--hosts", inv, "--output", "json", timeout=180)
    assert r.rc == 1, r
    rows = preflight_rows(r)
    assert rows[("h1", "argv")]["status"] == "ok"
    assert rows[("h2", "argv")]["status"] == "fail" and "rank 1 (worker)" in rows[("h2", "argv")]["detail"]
    assert rows[("h2", "argv")]["hint"].startswith("from engine.args.worker_extra[0] (--foo-bar)"), rows[("h2", "argv")]
    assert containers(cluster, "h1", "e2e-proof-worker") == [] and containers(cluster, "h2", "e2e-proof-worker") == []


def test_a_verdict_is_kept_and_lock_pins_it(cluster, inkctl, inventory, recipe, home):
    inv = inventory("h1")
    rec = recipe("single", name="e2e-proof-kept")
    first = inkctl("up", rec, "--hosts", inv, "--output", "json", timeout=120)
    assert first.rc == 0, first
    row = preflight_rows(first)[("h1", "argv")]
    assert row["status"] == "ok" and "asked in" in row["detail"], row
    kept = sorted((home / ".cache" / "inkctl" / "proof").glob("*.json"))  # by key, and by argv alone (plan)
    assert len(kept) == 2 and all(json.loads(f.read_text())["verdict"] == "ok" for f in kept)
    assert inkctl("down", rec, "--hosts", inv).rc == 0

    again = inkctl("up", rec, "--hosts", inv, "--output", "json", timeout=120)
    assert again.rc == 0, again
    assert "kept verdict" in preflight_rows(again)[("h1", "argv")]["detail"]
    assert inkctl("down", rec, "--hosts", inv).rc == 0
    told = inkctl("up", rec, "--hosts", inv, timeout=120)  # the boot table says what the proof cost
    assert told.rc == 0 and re.search(r"^argv proof \(before\) +0\.0  kept verdict, 0 asked$", told.stdout, re.M), told
    assert inkctl("down", rec, "--hosts", inv).rc == 0

    # the lock file pins it: a fresh machine (no cache) asks nothing either
    locked = inkctl("lock", rec, "--hosts", inv, timeout=120)
    assert locked.rc == 0, locked
    doc = json.loads(rec.with_name(rec.stem + ".lock.json").read_text())
    (verdict,) = doc["proofs"].values()
    assert verdict["verdict"] == "ok" and verdict["rank"] == 0 and verdict["image"].startswith("sha256:")
    for f in (home / ".cache" / "inkctl" / "proof").glob("*.json"):
        f.unlink()
    shown = inkctl("plan", rec, "--hosts", inv)  # plan shows the pinned verdict, no host asked
    assert shown.rc == 0, shown
    assert f"argv   accepted by vllm in image {verdict['image'][:19]} (pinned in the lock file)" in shown.stdout, shown
    pinned = inkctl("up", rec, "--hosts", inv, "--output", "json", timeout=120)
    assert pinned.rc == 0, pinned
    assert "pinned in the lock file" in preflight_rows(pinned)[("h1", "argv")]["detail"]
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_skip_check_argv_waives_it_knowingly(cluster, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-proof-waived", engine={"args": {"extra": ["--foo-bar"]}})
    r = inkctl("up", rec, "--hosts", inventory("h1"), "--skip-check", "argv", "--output", "json", timeout=120)
    # the engine itself then refuses at boot, as it would have: up fails there, rolled back
    assert r.rc == 1, r
    assert preflight_rows(r)[("h1", "argv")]["status"] == "skipped"
    assert "unrecognized arguments: --foo-bar" in r.out, r
    assert containers(cluster, "h1", "e2e-proof-waived") == []
