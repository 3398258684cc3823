"""Start-up you can see and shorten (issue 23), end to end on the test cluster:

- the boot table: each rank's phases as the engine printed them (the fake prints vLLM's own
  format strings, with the durations set by FAKE_COMPILE_S / FAKE_GRAPHS_S / FAKE_READY_AFTER)
  and inkctl's milestones, in ``up -o json``'s ``boot_phases`` event and in the text table;
- the compile cache: the second up of a recipe loads instead of compiling; a cache merged and
  copied to another host, host to host (the control machine's link does not carry it), makes a
  rank warm there; a corrupt cache is caught against its pin, and only its bad file moves again;
- a GPU another process holds refuses the up (real nvidia-smi answers), --skip-check waives it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.cluster.proc import wait_for
from tests.e2e.conftest import containers, no_traceback
from tests.e2e.test_guard import Follow, follow, lock_dir, stand_in, state_dir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.cluster


BUSY = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi-busy"
GB10_UUID = "GPU-a1b2c3d4-0b10-5e7f-8a9b-0c1d2e3f4a5b"  # tests/fixtures/nvidia-smi/profiles/gb10.csv

FIRST_TOKEN_S = 2.0
PHASES = {"FAKE_WEIGHTS_S": "1.5", "FAKE_COMPILE_S": "2.5", "FAKE_GRAPHS_S": "1", "FAKE_CACHED_COMPILE_S": "0.1"}


BIG = 8 << 20  # a compiled kernel big enough to see which links carried it


def link_bytes(cluster) -> dict[str, int]:
    """Bytes counted on the control side: h1's and h2's veths (what each host sent and got) and
    the bridge's own interface (what this machine itself sent or received)."""
    from tests.cluster import net

    def n(dev: str, what: str) -> int:
        return int(Path(f"/sys/class/net/{dev}/statistics/{what}_bytes").read_text())

    k = cluster.net_id
    br = net.bridge(k)
    return {"h1 sent": n(net.veth(1, k), "rx"), "h2 received": n(net.veth(2, k), "tx"),
            "control": n(br, "rx") + n(br, "tx")}


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def boot_event(stdout: str) -> dict:
    (ev,) = [e for e in events(stdout) if e["event"] == "boot_phases"]
    return ev


# the boot memory watchdog (unified-memory recipes) is not under test here; on a machine shared
# by many clusters MemAvailable dips below its floor and it would stop a boot
QUIET = {"enabled": False, "drop_page_cache": False}


def cached(tmp_path: Path, recipe, base: str, **more):
    return recipe(base, compile_cache={"enabled": True, "path": "${COMPILE_CACHE}"},
                  container={"env": dict(PHASES)}, watchdog=QUIET, **more)


def cache_vars(tmp_path: Path, *names: str) -> dict:
    return {n: {"COMPILE_CACHE": str(tmp_path / f"cc-{n}")} for n in names}


def test_boot_table_matches_the_configured_durations_and_the_second_up_is_warm(cluster, inkctl, inventory, recipe,
                                                                                 tmp_path):
    # the first token of the readiness completion comes FIRST_TOKEN_S after the request
    r = recipe("single", name="e2e-boot", compile_cache={"enabled": True, "path": "${COMPILE_CACHE}"},
               container={"env": {**PHASES, "FAKE_TTFT": str(FIRST_TOKEN_S)}}, watchdog=QUIET)
    inv = inventory("h1", vars=cache_vars(tmp_path, "h1"))
    res = tmp_path / "results"
    runs = tmp_path / "runs"
    first = inkctl("up", str(r), "--hosts", str(inv), "-o", "json", "--results-dir", str(res),
                   env={"INKCTL_RUNS_DIR": str(runs)})
    assert first.rc == 0, first
    ev = boot_event(first.stdout)
    (rank,) = ev["record"]["ranks"]
    s = rank["seconds"]
    assert (rank["host"], rank["rank"], rank["compile_cache"]) == ("h1", 0, "cold")
    assert 1.5 <= s["weights"] <= 2.0, s
    assert 2.5 <= s["compile"] <= 4.5, s
    assert s["graphs"] == 1.0  # "Graph capturing finished in %.0f secs"
    assert s["init_engine"] >= s["compile"] + 1.0 and s["model_load"] == pytest.approx(s["weights"], abs=0.01)
    m = ev["record"]["inkctl"]
    assert 0 < m["container"] <= m["port_open"] <= m["health"] < m["first_token"]
    # measured, not the end of the health stage: the fake's first-token delay after health
    assert FIRST_TOKEN_S <= m["first_token"] - m["health"] <= FIRST_TOKEN_S + 0.75, m
    (fin,) = [e for e in events(first.stdout) if e["event"] == "finished"]
    assert fin["first_ttft_s"] == pytest.approx(m["first_token"] - m["health"], abs=0.3), (fin, m)
    # the same record in the run's record directory
    (recorded,) = [json.loads(ln) for d in runs.iterdir() for ln in (d / "events.jsonl").read_text().splitlines()
                   if '"boot_phases"' in ln]
    assert recorded["record"]["inkctl"]["first_token"] == m["first_token"]
    assert m["health"] >= 1.5 + 2.5 + 1.0  # the boot waited for every phase
    assert ev["previous"] == "" and ev["slower"] == []
    assert inkctl("down", str(r), "--hosts", str(inv)).rc == 0

    second = inkctl("up", str(r), "--hosts", str(inv), "--results-dir", str(res))
    assert second.rc == 0, second
    table = second.stdout[second.stdout.index("boot phase (s)"):]
    assert "torch.compile (warm)" in table and "weights loaded" in table and "first token" in table, table
    rows = {ln[:22].strip(): ln[22:].split() for ln in table.splitlines()}
    assert float(rows["first token"][0]) >= float(rows["health answering"][0]) + FIRST_TOKEN_S - 0.15, table
    assert all(len(line) <= 80 for line in table.splitlines()), table
    recs = sorted((res / "boots" / "e2e-boot").glob("*.json"))
    assert len(recs) == 2
    warm = json.loads(recs[1].read_text())
    assert warm["ranks"][0]["compile_cache"] == "warm" and warm["ranks"][0]["seconds"]["compile"] < 1.0
    cmp = inkctl("results", "--boots", "--results-dir", str(res), recs[0].as_posix(), recs[1].as_posix())
    assert cmp.rc == 0 and "torch.compile" in cmp.stdout, cmp
    line = next(ln for ln in cmp.stdout.splitlines() if ln.startswith("torch.compile"))
    assert float(line.split()[-1]) < -1.5, cmp.stdout  # B against A: seconds saved
    assert inkctl("down", str(r), "--hosts", str(inv)).rc == 0

    # a phase slower than the previous boot is named: the cache gone, the compile is back
    shutil.rmtree(tmp_path / "cc-h1")
    third = inkctl("up", str(r), "--hosts", str(inv), "--results-dir", str(res))
    assert third.rc == 0, third
    assert "slower than before: torch.compile took" in third.stdout, third


def test_cache_merged_copied_to_a_fresh_host_is_warm_and_a_corrupt_one_is_caught(cluster, inkctl, inventory, recipe,
                                                                                tmp_path):
    r = cached(tmp_path, recipe, "vllm-native-2", name="e2e-cache")
    cv = cache_vars(tmp_path, "h1", "h2", "h4")
    inv12, inv21 = inventory("h1", "h2", vars=cv), inventory("h2", "h1", vars=cv)
    res = tmp_path / "results"
    up = inkctl("up", str(r), "--hosts", str(inv12), "-o", "json", "--results-dir", str(res))
    assert up.rc == 0, up
    assert [x["compile_cache"] for x in boot_event(up.stdout)["record"]["ranks"]] == ["cold", "cold"]
    assert inkctl("down", str(r), "--hosts", str(inv12)).rc == 0

    # each host holds its own rank's artefacts (h1 a big kernel too); the merge gives both the
    # union, then pin it
    (kdir,) = [d for d in (tmp_path / "cc-h1").iterdir() if d.is_dir()]
    (kdir / "triton").mkdir(exist_ok=True)
    (kdir / "triton" / "big-kernel.cubin").write_bytes(os.urandom(BIG))
    merged = inkctl("cache", str(r), "--hosts", str(inv12))
    assert merged.rc == 0, merged
    # (the fake's per-rank artefacts are byte for byte the same: h1 copies its own; the kernel
    # goes host to host)
    assert "h1: copied: 1 of 3 files (0 host to host)" in merged.stdout, merged
    assert "h2: copied: 2 of 3 files (1 host to host)" in merged.stdout, merged
    pinned = inkctl("cache", str(r), "--hosts", str(inv12), "--lock")
    assert pinned.rc == 0 and "pinned compile-cache:vllm-sm121-" in pinned.stdout, pinned
    lock = json.loads(r.with_name(r.stem + ".lock.json").read_text())
    assert [k for k in lock["pins"] if k.startswith("compile-cache:")]

    # h2 replaced by a fresh machine: no cache; the copy brings the pinned one
    shutil.rmtree(tmp_path / "cc-h2")
    v = inkctl("cache", str(r), "--hosts", str(inv12), "--verify")
    assert v.rc == 0 and "h2: absent" in v.stdout, v
    before = link_bytes(cluster)
    copied = inkctl("cache", str(r), "--hosts", str(inv12), "-o", "json")
    moved = {k: link_bytes(cluster)[k] - v for k, v in before.items()}
    assert copied.rc == 0, copied
    rows = {x["host"]: x for x in json.loads(copied.stdout)["hosts"]}
    assert rows["h2"]["status"] == "copied" and rows["h2"]["bytes"] >= BIG, rows
    assert "the pinned cache from h1 (3 files)" in rows["h2"]["detail"], rows
    # host to host: the bytes left h1 and reached h2 over their links; this machine (the
    # bridge's own address) carried the commands and the progress lines, not the cache
    assert moved["h1 sent"] >= BIG and moved["h2 received"] >= BIG, moved
    assert moved["control"] < BIG // 4, moved
    print(f"cache copy h1 -> h2, bytes on the links: {moved}")
    assert (tmp_path / "cc-h2" / kdir.name / "triton" / "big-kernel.cubin").read_bytes() == \
        (kdir / "triton" / "big-kernel.cubin").read_bytes()
    assert not list((tmp_path / "cc-h2").glob(".incoming-*"))
    for h in ("h1", "h2"):  # the relay containers are gone
        assert cluster.docker(h, "ps", "-a", "--format", "{{.Names}}").stdout.count("inkctl-cache-") == 0
    assert inkctl("cache", str(r), "--hosts", str(inv12), "--verify").rc == 0
    # ranks swapped: rank 0 now runs on h2, which never compiled it
    up2 = inkctl("up", str(r), "--hosts", str(inv21), "-o", "json", "--results-dir", str(res))
    assert up2.rc == 0, up2
    ranks = boot_event(up2.stdout)["record"]["ranks"]
    assert [(x["host"], x["compile_cache"]) for x in ranks] == [("h2", "warm"), ("h1", "warm")]
    assert inkctl("down", str(r), "--hosts", str(inv21)).rc == 0

    # a file corrupted on h2 (same size): --verify names it, the copy sends that file alone again
    big2 = tmp_path / "cc-h2" / kdir.name / "triton" / "big-kernel.cubin"
    big2.write_bytes(bytes(BIG))
    bad2 = inkctl("cache", str(r), "--hosts", str(inv12), "--verify")
    assert bad2.rc != 0 and "h2: corrupt:" in bad2.stdout and "big-kernel.cubin" in bad2.stdout, bad2
    stale = tmp_path / "cc-h2" / f".incoming-{kdir.name}" / "triton" / "left-by-an-interrupted-copy.cubin"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"stale")
    fixed = inkctl("cache", str(r), "--hosts", str(inv12))
    assert fixed.rc == 0 and "h2: copied: the pinned cache from h1 (3 files), 1 host to host" in fixed.stdout, fixed
    assert "h1: ok: holds the pinned cache" in fixed.stdout, fixed
    assert big2.read_bytes() == (kdir / "triton" / "big-kernel.cubin").read_bytes()
    assert not stale.parent.parent.exists() and not list((tmp_path / "cc-h2").rglob(stale.name))
    assert inkctl("cache", str(r), "--hosts", str(inv12), "--verify").rc == 0

    # another GPU architecture (h4: RTX PRO 6000, sm 12.0) never gets sm 12.1 kernels
    other = inkctl("cache", str(r), "--hosts", str(inventory("h1", "h4", vars=cv)))
    assert other.rc == 0 and "h4: skipped: GPU arch 12.0, h1's is 12.1" in other.stdout, other

    # a corrupt cache: --verify names the host and the file; up refuses before starting anything
    victim = next((tmp_path / "cc-h1").rglob("inkctl-fake-compiled.bin"))
    victim.write_bytes(b"garbage")
    bad = inkctl("cache", str(r), "--hosts", str(inv12), "--verify")
    assert bad.rc != 0 and "h1: corrupt:" in bad.stdout and victim.name in bad.stdout, bad
    assert "compile cache corrupt on h1" in bad.stderr, bad
    refused = inkctl("up", str(r), "--hosts", str(inv12), "--results-dir", str(res))
    assert refused.rc != 0 and "compile cache corrupt: h1:" in refused.out, refused
    assert no_traceback(refused.out)
    assert containers(cluster, "h1", "e2e-cache") == [] and containers(cluster, "h2", "e2e-cache") == []


def test_a_gpu_held_by_another_process_refuses_up_and_skip_check_waives_it(cluster, inkctl, inventory, recipe):
    r = recipe("single", name="e2e-busy", watchdog=QUIET)
    inv = inventory("h1")
    apps = Path(cluster.host("h1").bin_dir) / "compute-apps.csv"
    # the real answer of an H200 held by a python3 (pid 445, 20998 MiB), on h1's GPU 0
    row = (BUSY / "busy-compute-apps.csv").read_text().replace("GPU-5e351fe9-bf09-94ee-8f17-8a3207975e53", GB10_UUID)
    apps.write_text(row)
    try:
        up = inkctl("up", str(r), "--hosts", str(inv))
        assert up.rc != 0, up
        assert "preflight failed on h1 (gpu-free): nothing was launched" in up.out, up
        assert "GPU 0: pid 445 (python3) holds 20.5 GiB" in up.out, up
        assert containers(cluster, "h1", "e2e-busy") == []
        waived = inkctl("up", str(r), "--hosts", str(inv), "--skip-check", "gpu-free")
        assert waived.rc == 0, waived
    finally:
        apps.unlink(missing_ok=True)
    assert inkctl("down", str(r), "--hosts", str(inv)).rc == 0


def test_watch_fails_an_engine_whose_core_is_stuck_while_health_answers(cluster, inkctl, follow, inventory, recipe):
    import threading

    import httpx

    rec = recipe("single", name="e2e-stuck", smoke={"enabled": False}, watchdog=QUIET)
    inv = inventory("h1")
    assert inkctl("up", rec, "--hosts", inv).rc == 0
    f = follow("watch", rec, "--hosts", inv, "-o", "json", "--interval", "0.5", "--stuck-after", "3")
    wait_for("watch to see the rank", lambda: f.saw('"event": "ok"'), timeout=60)
    base = f"http://{cluster.host('h1').address}:18000"
    ok = httpx.post(base + "/v1/chat/completions", json={"model": "fake", "messages": [{"role": "user", "content": "hi"}],
                                                          "max_tokens": 4}, timeout=30, trust_env=False)
    assert ok.status_code == 200  # tokens flowed: generation_tokens_total moved
    cluster.docker("h1", "kill", "--signal", "USR1", "inkctl-e2e-stuck-r0", check=True)  # the core stops

    def ask():  # a request that waits for a core that never schedules it
        try:
            httpx.post(base + "/v1/chat/completions", json={"model": "fake", "messages": [{"role": "user", "content": "x"}]},
                       timeout=60, trust_env=False)
        except httpx.HTTPError:
            pass

    threading.Thread(target=ask, daemon=True).start()
    assert f.end(timeout=60) == 1, f.text
    fail = [json.loads(ln) for ln in f.text.splitlines() if ln.startswith("{") and '"failure"' in ln]
    assert fail and fail[0]["cause"] == "stuck" and fail[0]["host"] == "h1" and fail[0]["rank"] == 0, f.text
    assert "while 1 request(s) wait" in fail[0]["message"] and "/metrics" in fail[0]["message"], fail
    assert httpx.get(base + "/health", timeout=5, trust_env=False).status_code == 200  # HTTP still answers
    assert containers(cluster, "h1", "e2e-stuck") == ["inkctl-e2e-stuck-r0 running"]
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_doctor_network_runs_the_all_reduce_in_the_engine_image_and_says_what_it_lacks(cluster, inkctl, inventory,
                                                                                      recipe):
    """The test image has no torch (and no nccl-tests): the check still starts one container per
    host from the engine image across the pair, with the ranks' NCCL env, and says so; the
    parsers are held to real H200 output in tests/unit/test_startup.py."""
    r = recipe("vllm-native-2", name="e2e-net")
    inv = inventory("h1", "h2")
    d = inkctl("doctor", str(r), "--hosts", str(inv), "--network", "-o", "json")
    assert d.rc != 0, d
    rep = json.loads(d.stdout)
    (pair,) = rep["network"]["pairs"]
    assert pair["hosts"] == ["h1", "h2"] and pair["verdict"] == "failed"
    assert "No module named 'torch'" in pair["error"], pair
    assert [h["nccl_tests"] for h in rep["network"]["hosts"]] == [False, False]
    assert "network check failed: h1 <-> h2: failed" in d.stderr and "has no torch" in d.stderr, d
    text = inkctl("doctor", str(r), "--hosts", str(inv), "--network")
    assert text.rc != 0 and "h1 <-> h2" in text.stdout and "the image has no torch" in text.stdout, text
    assert "all_reduce_perf is not in the image" in text.stdout
    mine = text.stdout[text.stdout.index("network: NCCL all-reduce"):]
    assert all(len(line) <= 80 for line in mine.splitlines()), mine
    for h in ("h1", "h2"):  # nothing left behind
        out = cluster.docker(h, "ps", "--all", "--filter", "label=inkctl.netcheck", "--format", "{{.Names}}").stdout
        assert out.strip() == ""
    assert no_traceback(d.out) and no_traceback(text.out)


def test_sglang_boot_phases_per_rank(cluster, inkctl, inventory, recipe, tmp_path):
    """SGLang v0.5's lines: the weights phase from the timestamps of "Load weight begin/end"
    (that release prints no elapsed there), the graph capture from its own elapsed."""
    r = recipe("sglang-2", name="e2e-sgboot", container={"env": {"FAKE_WEIGHTS_S": "2.2", "FAKE_GRAPHS_S": "1"}},
               watchdog=QUIET)
    inv = inventory("h1", "h2")
    up = inkctl("up", str(r), "--hosts", str(inv), "-o", "json", "--results-dir", str(tmp_path / "res"))
    assert up.rc == 0, up
    ranks = boot_event(up.stdout)["record"]["ranks"]
    assert [(x["host"], x["rank"]) for x in ranks] == [("h1", 0), ("h2", 1)]
    for x in ranks:
        assert 1.0 <= x["seconds"]["graphs"] <= 1.5, x
        assert 2.0 <= x["seconds"]["weights"] <= 4.0, x  # whole seconds: the log's timestamps
    assert inkctl("down", str(r), "--hosts", str(inv)).rc == 0
