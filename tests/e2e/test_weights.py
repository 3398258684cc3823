"""End to end: the model's weights on every host (``inkctl lock`` pins, ``inkctl weights`` puts
them there, ``up`` refuses a host without them), against a Hub stand-in on the cluster's bridge.

The hub (tests/cluster/hub.py) listens on the cluster's gateway address, which the hosts reach;
the hosts' Hub caches are their ${HF_HOME}/hub. Each test starts from empty caches.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import containers, finish, no_traceback

pytestmark = pytest.mark.cluster

REPO = "test/weights-model"
GATED = "test/gated-model"
DRAFT = "test/weights-draft"
TOKEN = "hf_e2e-weights-token-4f1c"
HOSTS3 = ("h1", "h2", "h4")  # the docker hosts


@pytest.fixture(scope="module")
def hub(cluster, tmp_path_factory):
    from tests.cluster import net
    from tests.cluster.hub import Hub, make_model

    root = tmp_path_factory.mktemp("hub")
    h = Hub(net.gateway(cluster.net_id))
    h.add(make_model(str(root), REPO, shards=3, shard_mib=2))
    h.add(make_model(str(root), GATED, shards=2, shard_mib=1, gated_token=TOKEN))
    h.add(make_model(str(root), DRAFT, shards=2, shard_mib=1, seed=7))
    with h:
        yield h


@pytest.fixture(autouse=True)
def empty_caches(cluster):
    def wipe():
        for h in cluster.hosts:
            shutil.rmtree(os.path.join(h.hf_dir, "hub"), ignore_errors=True)

    wipe()
    yield
    wipe()


@pytest.fixture
def setup(recipe, inventory, inkctl, hub):
    """(recipe path, inventory path, run) for the weights recipe on ``names``; run(*args) adds the hub."""
    def make(*names, **changes):
        nodes = {"hardware": {"nodes": len(names)}, "engine": {"args": {"tensor_parallel": len(names)}}}
        rec = recipe("weights", **_merge(nodes, changes))
        inv = inventory(*names)

        def run(*args, env=None, **kw):
            return inkctl(*args, env={"HF_ENDPOINT": hub.url, **(env or {})}, **kw)

        return rec, inv, run

    return make


@pytest.fixture
def no_host_python(cluster):
    """The hosts named have no usable python3 (a stub first on their sessions' PATH that
    answers nothing): their relay must run in the engine image instead."""
    made = []

    def make(*names):
        for n in names:
            stub = Path(cluster.host(n).bin_dir) / "python3"
            stub.write_text("#!/bin/sh\nexit 127\n")
            stub.chmod(0o755)
            made.append(stub)

    yield make
    for stub in made:
        stub.unlink(missing_ok=True)


def relays(ran) -> dict[str, str]:
    """host -> how its relay ran (process | container), from the run's timeline events."""
    return {e["host"]: e["detail"] for e in events(ran.stdout)
            if e["event"] == "weights_phase" and e["phase"] == "relay_started"}


def relay_pids(cluster, host: str) -> list[int]:
    """onhost.py relays running as processes of ``host`` (its state dir is in their argv)."""
    state = str(Path(cluster.host(host).state_dir) / "e2e-weights" / "weights") + "/onhost.py"
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
                zombie = "State:\tZ" in (d / "status").read_text()
            except OSError:
                continue
            if state.encode() in argv and b"relay" in argv and not zombie:
                pids.append(int(d.name))
    return pids


def _merge(a, b):
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
    return out


def read_until(p: subprocess.Popen, done, timeout: float) -> dict:
    """Read inkctl's JSON events as they come until ``done(event)``; fail if it ends or times out first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            raise AssertionError(f"inkctl ended (rc {p.wait()}) before the moment the test waits for: {p.stderr.read()}")
        if line.startswith("{") and done(json.loads(line)):
            return json.loads(line)
    raise AssertionError(f"no such event within {timeout} s")


def events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def final(ran) -> dict:
    return next(e for e in reversed(events(ran.stdout)) if e.get("event") == "weights")


def snapshot(cluster, host: str, repo: str = REPO) -> Path:
    base = Path(cluster.host(host).hf_dir) / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots"
    revs = list(base.iterdir())
    assert len(revs) == 1, revs
    return revs[0]


def model_bytes(hub, repo=REPO, wanted=lambda p: "/" not in p and not p.endswith((".bin", ".gguf"))) -> int:
    return sum(f.size for f in hub.repos[repo].files.values() if wanted(f.path))


def test_fresh_hosts_get_the_model_once_then_only_what_is_missing_or_wrong_moves(cluster, hub, setup, no_host_python):
    rec, inv, run = setup(*HOSTS3)
    no_host_python("h4")  # h4's relay runs in the engine image, h1's and h2's as host processes
    before = dict(hub.stats)
    lock = run("lock", rec, "--hosts", inv, "-o", "json")
    assert lock.rc == 0, lock
    doc = json.loads(rec.with_name(rec.stem + ".lock.json").read_text())
    files = {f["path"]: f for f in doc["model"]["files"]}
    assert doc["model"]["revision"] == hub.repos[REPO].commit
    assert doc["pins"][f"model:{REPO}"] == hub.repos[REPO].commit
    # what engines read: config, tokenizer, generation, the index and its shards; not the bait
    assert sorted(files) == sorted(p for p in hub.repos[REPO].files if "/" not in p and not p.endswith((".bin", ".gguf")))
    assert files["model-00001-of-00003.safetensors"]["sha256"] == hub.repos[REPO].files["model-00001-of-00003.safetensors"].sha256
    lock_bytes = hub.stats["bytes"] - before["bytes"]  # the index only
    total = model_bytes(hub)

    # h4's cache is too small: refused before anything is copied there; h1 and h2 complete
    small = os.path.join(cluster.host("h4").hf_dir, "hub")
    os.makedirs(small, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", small], check=True)
    try:
        ran = run("weights", rec, "--hosts", inv, "-o", "json", timeout=180)
        on_small = list(Path(small).rglob("blobs/*"))
    finally:
        subprocess.run(["umount", small], check=False)
    assert ran.rc == 1, ran
    assert no_traceback(ran.out)
    rep = final(ran)
    assert set(rep["failed"]) == {"h4"} and "not enough disk" in rep["failed"]["h4"] and str(total) in rep["failed"]["h4"]
    assert on_small == []
    assert "h4" in ran.stderr and "not enough disk" in ran.stderr and "complete on h1, h2" in ran.stderr
    assert hub.stats["bytes"] - before["bytes"] - lock_bytes == total  # once, not once per host
    started = {e["host"]: e["source"] for e in events(ran.stdout) if e["event"] == "weights_started"}
    assert started == {"h1": "hub", "h2": "h1"}
    assert rep["hub_bytes"] == total and rep["moved"] == {"h1": total, "h2": total}

    # with room on h4: only h4 receives, from h1, nothing from the Hub
    ran = run("weights", rec, "--hosts", inv, "-o", "json", timeout=180)
    assert ran.rc == 0, ran.stderr[-3000:]
    assert final(ran)["moved"] == {"h4": total} and final(ran)["hub_bytes"] == 0
    assert relays(ran) == {"h1": "process", "h4": "container"}
    assert hub.stats["bytes"] - before["bytes"] - lock_bytes == total
    for h in HOSTS3:
        snap = snapshot(cluster, h)
        assert snap.name == hub.repos[REPO].commit
        for p, f in files.items():
            assert (snap / p).is_symlink() and (snap / p).stat().st_size == f["size"]
        assert (snap.parent.parent / "refs" / "main").read_text() == hub.repos[REPO].commit
        state = Path(cluster.host(h).state_dir) / "e2e-weights" / "weights"
        assert not list(state.glob("relay-*")), "the token files (and every file of the run) are gone"
        assert "inkctl-weights" not in cluster.docker(h, "ps", "--all", "--format", "{{.Names}}").stdout
        assert relay_pids(cluster, h) == [], "no relay process outlives the run"
    # huggingface_hub itself finds the files offline, as an engine with HF_HUB_OFFLINE=1 would
    from huggingface_hub import snapshot_download

    got = snapshot_download(REPO, cache_dir=str(Path(cluster.host("h4").hf_dir) / "hub"), local_files_only=True)
    assert Path(got).name == hub.repos[REPO].commit

    # a partial cache on h2 (a shard and a link gone), a shard altered in place on h4
    shard = "model-00002-of-00003.safetensors"
    size = hub.repos[REPO].files[shard].size
    (snapshot(cluster, "h2") / shard).resolve().unlink()
    (snapshot(cluster, "h2") / "tokenizer.json").unlink()
    with open((snapshot(cluster, "h4") / shard).resolve(), "r+b") as f:
        f.seek(size // 2)
        f.write(b"\xff" * 16)
    before_fix = hub.stats["bytes"]
    ver = run("weights", rec, "--hosts", inv, "--verify", timeout=120)
    assert ver.rc == 1, ver
    assert f"h4: {shard} altered" in ver.out and f"h2: {shard} missing, tokenizer.json unlinked" in ver.out, ver
    assert "--verify --repair" in ver.out
    fix = run("weights", rec, "--hosts", inv, "--verify", "--repair", "-o", "json", timeout=180)
    assert fix.rc == 0, fix
    assert final(fix)["moved"] == {"h2": size, "h4": size}  # only what was wrong moved (a link needs no bytes)
    assert hub.stats["bytes"] == before_fix  # from h1, not from the Hub
    with open((snapshot(cluster, "h4") / shard).resolve(), "rb") as f:
        import hashlib

        assert hashlib.sha256(f.read()).hexdigest() == files[shard]["sha256"]


def test_interrupted_download_resumes_where_it_stopped(cluster, hub, setup, inkctl):
    rec, inv, run = setup("h1")
    assert run("lock", rec, "--hosts", inv).rc == 0
    total = model_bytes(hub)
    hub.rate = 1 << 16  # 64 KiB/s per connection: the 6 MiB model takes ~30 s, interrupted at its first bytes
    before = dict(hub.stats)
    blobs = Path(cluster.host("h1").hf_dir) / "hub" / "models--test--weights-model" / "blobs"
    try:
        p = inkctl.start("weights", rec, "--hosts", inv, "-o", "json", env={"HF_ENDPOINT": hub.url})
        read_until(p, lambda e: e.get("event") == "weights_progress" and e["bytes"] > 0, timeout=90)
        # the progress may count a small file done while the big one's first bytes are still in the
        # downloader's buffer: interrupt once a partial file holds bytes on the host's disk
        deadline = time.monotonic() + 60
        while sum(f.stat().st_size for f in blobs.glob("*.incomplete")) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        out, err = finish(p, timeout=60)
        assert p.returncode == 130, out + err
        assert "partial files are kept" in err
    finally:
        hub.rate = None
    partial = sum(f.stat().st_size for f in blobs.glob("*.incomplete"))
    assert partial > 0, list(blobs.iterdir())
    present = partial + sum(f.stat().st_size for f in blobs.iterdir() if not f.name.endswith(".incomplete"))
    assert "inkctl-weights" not in cluster.docker("h1", "ps", "--all", "--format", "{{.Names}}").stdout

    again = run("weights", rec, "--hosts", inv, "-o", "json", timeout=120)
    assert again.rc == 0, again
    assert hub.stats["ranges"] > before["ranges"]  # resumed with Range requests
    assert final(again)["moved"]["h1"] == total - present  # only the rest was written
    assert not list(blobs.glob("*.incomplete"))
    assert run("weights", rec, "--hosts", inv, "--verify").rc == 0


def test_a_relay_host_cut_mid_copy_is_named_the_next_resumes_from_the_one_before(cluster, hub, setup, inkctl):
    """The chain h1 -> h2 -> h4: h2 is cut while it relays; h4 names it, reattaches to h1 and
    completes from what it had. Healed, the rerun completes h2 at once (no leftover container
    in the way)."""
    rec, inv, run = setup(*HOSTS3)
    assert run("lock", rec, "--hosts", inv).rc == 0
    p = inkctl.start("weights", rec, "--hosts", inv, "-o", "json", "--bwlimit", "1", env={"HF_ENDPOINT": hub.url})
    read_until(p, lambda e: e.get("event") == "weights_progress" and e["host"] == "h4" and e["bytes"] > 0, timeout=120)
    cluster.cut("h2")
    try:
        out, err = finish(p, timeout=180)
        # the cut run's relay on h2 (a host process there) lives on: its SSH session cannot end
        # while the host is cut off, and it may still write into the files a rerun writes
        old = relay_pids(cluster, "h2")
    finally:
        cluster.heal("h2")
    assert p.returncode == 1, out + err
    rep = json.loads(out.strip().splitlines()[-1])
    assert set(rep["failed"]) == {"h2"} and "went away" in rep["failed"]["h2"] and "of" in rep["failed"]["h2"]
    assert rep["reattached"] == [{"host": "h4", "dead": "h2"}], rep
    assert rep["moved"]["h4"] == model_bytes(hub) and rep["moved"]["h1"] == model_bytes(hub)
    assert any(e["event"] == "weights_reattached" and e["dead"] == "h2" for e in events(out))
    assert "h2" in err and "complete on h1, h4" in err and no_traceback(err)
    assert hub.stats["bytes"] >= model_bytes(hub)
    assert old, "the cut run's relay lives on h2 until something ends it"
    again = run("weights", rec, "--hosts", inv, "-o", "json", timeout=180)
    assert again.rc == 0, again
    assert set(final(again)["moved"]) == {"h2"}
    assert "already in use" not in again.out
    assert not set(old) & set(relay_pids(cluster, "h2")), "the rerun ended the old relay"
    state = Path(cluster.host("h2").state_dir) / "e2e-weights" / "weights"
    assert not list(state.glob("relay-*")), "nothing of either run stays on h2"
    assert run("weights", rec, "--hosts", inv, "--verify").rc == 0


def test_a_file_missing_only_on_the_head_comes_from_a_host_that_has_it(cluster, hub, setup):
    rec, inv, run = setup(*HOSTS3)
    assert run("lock", rec, "--hosts", inv).rc == 0
    assert run("weights", rec, "--hosts", inv, timeout=180).rc == 0
    shard = "model-00002-of-00003.safetensors"
    (snapshot(cluster, "h1") / shard).resolve().unlink()
    before = hub.stats["bytes"]
    ran = run("weights", rec, "--hosts", inv, "-o", "json", timeout=180)
    assert ran.rc == 0, ran
    assert hub.stats["bytes"] == before  # the Hub is the last resort
    started = {e["host"]: e["source"] for e in events(ran.stdout) if e["event"] == "weights_started"}
    assert started == {"h1": "h2"}, started
    assert final(ran)["moved"] == {"h1": hub.repos[REPO].files[shard].size} and final(ran)["hub_bytes"] == 0


def test_a_dropped_hub_download_is_retried_and_a_lost_file_does_not_stop_the_others(cluster, hub, setup):
    rec, inv, run = setup("h1", "h2")
    assert run("lock", rec, "--hosts", inv).rc == 0
    shard = "model-00001-of-00003.safetensors"
    hub.drop = {shard: 1}
    try:
        ran = run("weights", rec, "--hosts", inv, "-o", "json", timeout=180)
        assert ran.rc == 0, ran
        assert hub.stats["dropped"] >= 1
        assert final(ran)["moved"] == {"h1": model_bytes(hub), "h2": model_bytes(hub)}
        for h in ("h1", "h2"):
            shutil.rmtree(os.path.join(cluster.host(h).hf_dir, "hub"))
        hub.drop = {shard: 1000}  # that file never comes whole: the rest still reaches both hosts
        bad = run("weights", rec, "--hosts", inv, "-o", "json", timeout=240)
    finally:
        hub.drop = {}
    assert bad.rc == 1, bad
    rep = final(bad)
    assert set(rep["failed"]) == {"h1", "h2"} and shard in rep["failed"]["h1"], rep
    for h in ("h1", "h2"):
        snap = snapshot(cluster, h)
        have = {p.name for p in snap.iterdir()}
        assert have == set(model_files(hub)) - {shard}, (h, have)
    assert no_traceback(bad.out)


def model_files(hub, repo=REPO):
    return [p for p in hub.repos[repo].files if "/" not in p and not p.endswith((".bin", ".gguf"))]


def test_gated_model_without_token_is_refused_clearly(cluster, hub, setup):
    rec, inv, run = setup("h1", model={"repo": GATED})
    no = run("lock", rec, "--hosts", inv)
    assert no.rc == 2, no
    assert f"{GATED} is gated" in no.stderr and "no token was sent" in no.stderr, no
    assert "env E2E_HF_TOKEN" in no.stderr, no  # where the recipe reads the token from
    assert no_traceback(no.out)
    wrong = run("lock", rec, "--hosts", inv, env={"E2E_HF_TOKEN": "hf_wrong"})
    assert wrong.rc == 2 and "the token was refused" in wrong.stderr and "hf_wrong" not in wrong.out, wrong

    ok = run("lock", rec, "--hosts", inv, env={"E2E_HF_TOKEN": TOKEN})
    assert ok.rc == 0, ok
    # weights without the token: one line that says so and names the secret to set
    none = run("weights", rec, "--hosts", inv, "-o", "json", timeout=120)
    assert none.rc == 1, none
    assert none.stderr.count("no token was sent") == 1, none.stderr
    assert "env E2E_HF_TOKEN" in none.stderr and "rerun to resume" not in none.stderr, none.stderr
    assert no_traceback(none.out)
    got = run("weights", rec, "--hosts", inv, "-o", "json", env={"E2E_HF_TOKEN": TOKEN}, timeout=180)
    assert got.rc == 0, got  # the head downloaded with the token (the hub refuses without it)
    assert TOKEN not in got.out
    assert final(got)["hub_bytes"] == model_bytes(hub, GATED)


def test_up_refuses_hosts_without_the_weights_and_plans_offline_with_them(cluster, hub, setup):
    rec, inv, run = setup("h1", "h2")
    assert run("lock", rec, "--hosts", inv).rc == 0
    shard = "model-00003-of-00003.safetensors"

    token = {"E2E_HF_TOKEN": "hf_unused"}  # the recipe's secret; this model is public
    up = run("up", rec, "--hosts", inv, env=token, timeout=180)
    assert up.rc != 0, up
    assert "h1 (weights), h2 (weights)" in up.out and shard in up.out and f"inkctl weights {rec}" in up.out, up
    assert containers(cluster, "h1", "e2e-weights") == [] and containers(cluster, "h2", "e2e-weights") == []

    # with the model pinned, the plan up runs gives the engine HF_HUB_OFFLINE=1
    plan = run("plan", rec, "--hosts", inv, "-o", "json")
    assert plan.rc == 0, plan
    assert "HF_HUB_OFFLINE=1" in plan.stdout


def test_a_draft_model_is_pinned_copied_checked_and_found_offline(cluster, hub, setup):
    """A speculative draft goes through lock, weights and the preflight before up, like the model."""
    rec, inv, run = setup("h1", "h2", speculative={"method": "eagle3", "draft": {"repo": DRAFT},
                                                   "num_speculative_tokens": 3})
    lock = run("lock", rec, "--hosts", inv)
    assert lock.rc == 0, lock
    doc = json.loads(rec.with_name(rec.stem + ".lock.json").read_text())
    assert doc["models"]["draft"]["repo"] == DRAFT and doc["models"]["draft"]["revision"] == hub.repos[DRAFT].commit
    assert doc["pins"][f"model:{DRAFT}"] == hub.repos[DRAFT].commit
    assert {f["path"] for f in doc["models"]["draft"]["files"]} >= {"model-00001-of-00002.safetensors", "config.json"}

    got = run("weights", rec, "--hosts", inv, "-o", "json")
    assert got.rc == 0, got
    reports = [e for e in events(got.stdout) if e.get("event") == "weights"]
    assert [e["model"] for e in reports] == [REPO, DRAFT], reports
    for host in ("h1", "h2"):
        assert snapshot(cluster, host, DRAFT).name == hub.repos[DRAFT].commit
    from huggingface_hub import snapshot_download

    found = snapshot_download(DRAFT, cache_dir=str(Path(cluster.host("h2").hf_dir) / "hub"), local_files_only=True)
    assert Path(found).name == hub.repos[DRAFT].commit  # what an engine with HF_HUB_OFFLINE=1 finds

    plan = run("plan", rec, "--hosts", inv, "-o", "json")
    assert plan.rc == 0 and "HF_HUB_OFFLINE=1" in plan.stdout, plan
    assert '{\\"method\\":\\"eagle3\\",\\"model\\":\\"test/weights-draft\\",\\"num_speculative_tokens\\":3}' in plan.stdout \
        or '"--speculative-config"' in plan.stdout, plan

    # a draft shard lost on h2: up stops in preflight, naming it, and starts nothing
    shard = snapshot(cluster, "h2", DRAFT) / "model-00002-of-00002.safetensors"
    os.remove(shard)
    up = run("up", rec, "--hosts", inv, env={"E2E_HF_TOKEN": "hf_unused"}, timeout=180)
    assert up.rc != 0, up
    assert "h2 (weights)" in up.out and "model-00002-of-00002.safetensors" in up.out and DRAFT in up.out, up
    assert "h1 (weights)" not in up.out, up
    assert containers(cluster, "h1", "e2e-weights") == [] and containers(cluster, "h2", "e2e-weights") == []
    assert no_traceback(up.out), up
