"""Issue 23's parsers and pure parts: boot phases from the engines' own log lines, the boot
table, liveness by progress from /metrics, the network check's readers (on output recorded on a
real H200: tests/fixtures/nccl-perf/, and NCCL 2.28 logs: tests/fixtures/nccl/), the compile
cache's key and manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from inkctl.execute.deploy import cachesync, netcheck
from inkctl.execute.supervise import bootphases, progress
from inkctl.execute.supervise.bootphases import PhaseReader, read_log, slower_than

FIX = Path(__file__).resolve().parents[1] / "fixtures"

# vLLM lines as the engine prints them (format strings of vllm/v1 worker, compilation and engine code)
VLLM_LOG = """\
(EngineCore_DP0 pid=212) INFO 10-06 12:00:02 [default_loader.py:267] Loading weights took 11.40 seconds
(EngineCore_DP0 pid=212) INFO 10-06 12:00:03 [gpu_model_runner.py:2602] Model loading took 14.2978 GiB memory and 12.221976 seconds
(EngineCore_DP0 pid=212) INFO 10-06 12:00:04 [backends.py:1089] Using cache directory: /root/.cache/vllm/torch_compile_cache/da3c862604/rank_0_0/backbone for vLLM's torch.compile
(EngineCore_DP0 pid=212) INFO 10-06 12:00:20 [backends.py:215] Compiling a graph for compile range (1, 8192) takes 14.78 s
(EngineCore_DP0 pid=212) INFO 10-06 12:00:21 [monitor.py:34] torch.compile takes 16.05 s in total
(EngineCore_DP0 pid=212) INFO 10-06 12:00:23 [gpu_worker.py:298] Available KV cache memory: 1.50 GiB
(EngineCore_DP0 pid=212) INFO 10-06 12:00:23 [kv_cache_utils.py:1087] GPU KV cache size: 49,152 tokens
Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 11/11
(EngineCore_DP0 pid=212) INFO 10-06 12:00:40 [gpu_model_runner.py:3480] Graph capturing finished in 8 secs, took 0.31 GiB
(EngineCore_DP0 pid=212) INFO 10-06 12:00:40 [core.py:210] init engine (profile, create kv cache, warmup model) took 36.07 s (compilation: 19.20 s)
INFO 10-06 12:00:41 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000
"""

VLLM_WARM = """\
(Worker_TP0 pid=57) INFO 06-21 07:20:13 [backends.py:292] Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 0.717 s
(Worker_TP0 pid=57) INFO 06-21 07:20:13 [monitor.py:53] torch.compile took 4.89 s in total
INFO 04-09 00:49:01 llm_engine.py:431] init engine (profile, create kv cache, warmup model) took 32.75 seconds
"""

# SGLang v0.5: no elapsed on "Load weight end." (the timestamps tell); nightlies print elapsed=
SGLANG_LOG = """\
[2026-02-26 05:20:21 TP0] Init torch distributed ends. mem usage=1.02 GB
[2026-02-26 05:20:21 TP0] Load weight begin. avail mem=139.37 GB
[2026-02-26 05:24:09 TP0] Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, avail mem=94.04 GB, mem usage=45.58 GB.
[2026-02-26 05:24:10 TP0] KV Cache is allocated. #tokens: 549277, K size: 25.14 GB, V size: 25.14 GB
[2026-02-26 05:24:10 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=40.01 GB
[2026-02-26 05:24:37 TP0] Capture cuda graph end. Time elapsed: 26.12 s. mem usage=1.93 GB. avail mem=8.16 GB.
[2026-02-26 05:24:40] The server is fired up and ready to roll!
"""
SGLANG_NIGHTLY = """\
[2026-08-10 09:45:41 TP0] Init torch distributed ends. elapsed=1.25 s, mem usage=0.70 GB
[2026-08-10 09:47:14 DP0 TP0 EP0] Load weight end. elapsed=93.30 s, type=DeepseekV4ForCausalLM, avail mem=13.43 GB, mem usage=47.06 GB.
[2026-08-10 09:47:40 TP0] Capture target decode CUDA graph end. elapsed=16.40 s, mem usage=1.91 GB, avail mem=14.18 GB.
"""


def test_vllm_phases_from_its_own_lines():
    p = read_log(VLLM_LOG.splitlines(), "vllm", "h1", 0)
    assert p.seconds == {"weights": 11.40, "model_load": 12.221976, "compile": 16.05, "graphs": 8.0,
                         "init_engine": 36.07}
    assert p.compile_cache == "cold" and p.kv_cache_gib == 1.50


def test_vllm_warm_compile_and_the_older_init_engine_wording():
    p = read_log(VLLM_WARM.splitlines(), "vllm")
    assert p.compile_cache == "warm" and p.seconds == {"compile": 4.89, "init_engine": 32.75}


def test_sglang_phases_with_and_without_elapsed():
    p = read_log(SGLANG_LOG.splitlines(), "sglang")
    assert p.seconds == {"weights": 228.0, "graphs": 26.12}  # 05:20:21 -> 05:24:09 from the stamps
    n = read_log(SGLANG_NIGHTLY.splitlines(), "sglang")
    assert n.seconds == {"dist_init": 1.25, "weights": 93.30, "graphs": 16.40}


def test_unknown_lines_cost_nothing_and_change_nothing():
    p = read_log(["random line took forever", "NCCL INFO Using network Socket", ""] * 100, "vllm")
    assert p.seconds == {} and p.compile_cache is None


def test_phase_reader_keeps_ranks_apart():
    class W:
        def __init__(self, host, rank):
            self.host, self.rank = host, rank

    r = PhaseReader("vllm")
    for line in VLLM_LOG.splitlines():
        r(W("h2", 1), line)
    for line in VLLM_WARM.splitlines():
        assert r(W("h1", 0), line) is None  # never a fault: phases do not fail a boot
    assert [(x.host, x.rank, x.compile_cache) for x in r.phases()] == [("h1", 0, "warm"), ("h2", 1, "cold")]


def _record(compile_s, health):
    return bootphases.boot_record("vllm", [bootphases.RankPhases("h1", 0, {"compile": compile_s, "weights": 5.0})],
                                  {"container": 0.4, "health": health})


def test_a_phase_slower_than_the_previous_boot_is_named():
    assert slower_than(_record(30.0, 50.0), _record(1.0, 20.0)) == [
        "torch.compile took 30.0 s, 1.0 s in the previous boot", "health answering took 50.0 s, 20.0 s in the previous boot"]
    assert slower_than(_record(1.2, 20.5), _record(1.0, 20.0)) == []  # noise is not news


def test_boot_table_fits_80_columns_with_ranks_or_fastest_and_slowest():
    from inkctl.cli.show.boottable import boot_compare, boot_table

    ranks = [read_log(VLLM_LOG.splitlines(), "vllm", f"host-with-a-long-name-{i}", i) for i in range(3)]
    rec = bootphases.boot_record("vllm", ranks, {"container": 0.5, "port_open": 2.0, "health": 40.0, "first_token": 40.2})
    table = boot_table(rec, ["torch.compile took 16.1 s, 1.0 s in the previous boot"])
    assert all(len(line) <= 80 for line in table.splitlines()), table
    assert "torch.compile (cold)" in table and "first token" in table
    many = bootphases.boot_record("vllm", [read_log(VLLM_LOG.splitlines(), "vllm", "h", i) for i in range(8)], {})
    t8 = boot_table(many)
    assert "fastest" in t8 and "slowest" in t8 and all(len(line) <= 80 for line in t8.splitlines())
    cmp = boot_compare("a", rec, "b", _record(1.0, 20.0))
    assert "torch.compile" in cmp and "-15.1" in cmp


# --- liveness by progress ---------------------------------------------------------------

VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
vllm:num_requests_running{engine="1",model_name="m"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 3.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e+09
"""


def test_metrics_summed_over_labels():
    r = progress.reading(VLLM_METRICS)
    assert (r.waiting, r.running, r.generated) == (3.0, 1.0, 1234.0)
    sg = progress.reading("sglang:num_queue_reqs{tp_rank=\"0\"} 2\nsglang:num_running_reqs 0\n"
                          "sglang:generation_tokens_total 10\n")
    assert (sg.waiting, sg.running, sg.generated) == (2.0, 0.0, 10.0)
    assert progress.reading("process_start_time_seconds 1\n").generated is None


def test_stuck_only_when_requests_wait_and_no_token_comes():
    R = progress.Reading
    c = progress.ProgressCheck(stuck_after_s=10)
    assert c.feed(R(0, 0, 5), 0) is None
    assert c.feed(R(0, 0, 5), 100) is None  # idle: nothing to generate
    assert c.feed(R(2, 0, 5), 101) is None  # requests arrive: the clock starts
    assert c.feed(R(2, 1, 9), 105) is None  # tokens came: restarts
    assert c.feed(R(2, 1, 9), 114) is None
    text = c.feed(R(2, 1, 9), 115.5)
    assert text.startswith("no token generated for 10 s while 2 request(s) wait and 1 run")
    assert progress.ProgressCheck(5).feed(R(3, 0, None), 0) is None  # no counter: not judged


# --- the network check's readers ----------------------------------------------------------

def test_probe_output_recorded_on_an_h200():
    text = (FIX / "nccl-perf" / "torch-allreduce-1gpu.log").read_text()
    out = netcheck.parse_probe(text)
    assert out.start == {"gpu": "NVIDIA H200", "hosts": ["vm"], "kind": "start", "nccl": "2.28.9",
                         "torch": "2.11.0+cu130", "world": 1}
    assert [s.bytes for s in out.sizes] == [1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28]
    assert all(s.busbw_gbs == 0.0 and s.wrong == 0 for s in out.sizes)  # one rank: nothing crosses a link
    assert out.done and out.error is None
    d = netcheck.diagnose(text)
    assert d.transport == "Socket eth0" and d.problems == []


def test_nccl_tests_table_recorded_on_an_h200():
    out = netcheck.parse_nccl_tests((FIX / "nccl-perf" / "all-reduce-perf-1gpu.log").read_text())
    assert out.version == "2.19.6" and out.avg_busbw_gbs == 0.0
    assert [(s.bytes, s.time_us, s.algbw_gbs) for s in out.sizes][-1] == (268435456, 128.19, 2094.0)
    assert len(out.sizes) == 5 and all(s.wrong == 0 for s in out.sizes)


def test_interface_and_rdma_problems_are_named_with_the_fix():
    bad_if = netcheck.diagnose((FIX / "nccl" / "nccl-bad-ifname.log").read_text())
    assert bad_if.problems[0][0] == "NCCL found no socket interface matching NCCL_SOCKET_IFNAME"
    assert "nccl_socket_ifname" in bad_if.problems[0][1]
    fallback = netcheck.diagnose((FIX / "nccl" / "nccl-ib-hca-missing.log").read_text(), rdma_asked=True)
    assert fallback.transport == "Socket eth0"
    assert fallback.problems[0][0].startswith("NCCL fell back to TCP sockets over eth0 where the recipe asks for RDMA")
    # NCCL's WARN on a GID mismatch (wording as reported on RoCE clusters; not captured here)
    gid = netcheck.diagnose("h:1:2 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with 22 Invalid "
                            "argument, on dev roceP2p1s0f0:1, local GID ::ffff:10.0.0.94, remote GID fe80::1\n")
    what, fix = gid.problems[0]
    assert what.startswith("RDMA queue pair setup failed on roceP2p1s0f0:1: 22 Invalid argument") and "NCCL_IB_GID_INDEX" in fix


def test_link_rates_and_what_a_link_should_give():
    links = netcheck.parse_links("net eth0 10000\nnet lo -1\nnet wlan0 x\nib mlx5_0:1 200 Gb/sec (4X HDR)\n")
    assert links == {"eth0": 10.0, "mlx5_0:1": 200.0}
    assert netcheck.expected_gbs(200) == 20.0
    ib = netcheck.Diagnosis(netcheck.RankNet(network="IB", ib_device="mlx5_0"))
    assert netcheck.link_rate(links, ib) == ("mlx5_0:1", 200.0)
    probe = netcheck.ProbeOutput(start={}, sizes=[netcheck.Size(1 << 28, 1.0, 12.0, 12.0, 0)], done=True)
    slow = netcheck.PairResult(("h1", "h2"), probe, {"h1": ib}, link=("mlx5_0:1", 200.0))
    assert slow.verdict == "slow" and slow.as_dict()["expected_gbs"] == 20.0
    assert netcheck.pairs(["a", "b", "c"]) == [("a", "b"), ("a", "c"), ("b", "c")] and netcheck.pairs(["a"]) == [("a",)]


# --- the compile cache ------------------------------------------------------------------

def test_cache_key_follows_what_invalidates_it_and_nothing_else():
    from inkctl.plan import compilecache
    from inkctl.recipe.model import Recipe

    base = {"name": "x", "model": {"repo": "org/m"}, "engine": {"kind": "vllm", "version": "0.11.0",
            "image": {"ref": "vllm/vllm-openai:v0.11.0"}, "args": {"tensor_parallel": 8}},
            "hardware": {"accelerator": "h200", "compute_capability": "9.0", "nodes": 1, "gpus_per_host": 8}}

    def key(**over):
        import copy

        doc = copy.deepcopy(base)
        for path, v in over.items():
            d = doc
            *head, last = path.split("__")
            for k in head:
                d = d.setdefault(k, {})
            d[last] = v
        return compilecache.key(Recipe.model_validate(doc))

    k = key()
    assert k.startswith("vllm-sm90-") and key(engine__args__port=9000) == k and key(name="y") == k
    for change in ({"engine__args__tensor_parallel": 4}, {"hardware__compute_capability": "10.0"},
                   {"engine__image__ref": "vllm/vllm-openai:v0.12.0"}, {"model__repo": "org/other"}):
        assert key(**change) != k, change


def test_manifest_digest_and_the_merge_of_per_rank_caches():
    present, files = cachesync.parse_manifest("a" * 64 + "  ./vllm/rank_0_0/x.bin\n" + "b" * 64 + "  ./triton/k.so\n")
    assert present and files == {"vllm/rank_0_0/x.bin": "a" * 64, "triton/k.so": "b" * 64}
    assert cachesync.parse_manifest("@@absent\n") == (False, {})
    assert cachesync.digest(files) == cachesync.digest(dict(reversed(list(files.items()))))
    h1 = cachesync.HostCache("h1", "/c/k", True, {"r0": "a" * 64, "shared": "c" * 64})
    h2 = cachesync.HostCache("h2", "/c/k", True, {"r1": "b" * 64, "shared": "d" * 64})
    fresh = cachesync.HostCache("h3", "/c/k")
    from inkctl.weights import cachecopy

    sizes = {"h1": {"r0": 10, "shared": 3}, "h2": {"r1": 20, "shared": 4}}
    # the union: the first holder (the source) wins a path two hosts hold differently
    assert cachecopy.target([h1, h2, fresh], sizes, union=True) == {
        "r0": ("a" * 64, 10), "shared": ("c" * 64, 3), "r1": ("b" * 64, 20)}
    assert cachecopy.target([h2, h1], sizes, union=False) == {"r1": ("b" * 64, 20), "shared": ("d" * 64, 4)}
    assert cachecopy.incoming("/c/vllm-sm90-ab/") == "/c/.incoming-vllm-sm90-ab"


def test_boot_records_saved_listed_and_the_previous_one_found(tmp_path):
    from datetime import datetime, timezone

    from inkctl import bootlog as boots

    assert boots.previous(tmp_path, "d") is None and boots.list_boots(tmp_path) == []
    t = datetime(2026, 12, 1, 23, 0, tzinfo=timezone.utc)
    a = boots.save(tmp_path, "d", _record(5.0, 20.0), when=t)
    b = boots.save(tmp_path, "d", _record(1.0, 15.0), when=t)  # same second: a second file
    boots.save(tmp_path, "other", _record(1.0, 15.0), when=t)
    assert (a.name, b.name) == ("20261201-230000.json", "20261201-230000-2.json")
    prev = boots.previous(tmp_path, "d")
    assert prev is not None and prev[0] == "d/20261201-230000-2" and prev[1]["inkctl"]["health"] == 15.0
    assert [x["id"] for x in boots.list_boots(tmp_path)] == ["d/20261201-230000", "d/20261201-230000-2",
                                                             "other/20261201-230000"]
    assert boots.load(tmp_path, "other/")[0] == "other/20261201-230000"
    from inkctl.errors import InkctlError

    with pytest.raises(InkctlError, match="2 boots"):
        boots.load(tmp_path, "d/")


def test_compile_cache_in_the_plan_only_when_enabled():
    from inkctl.plan.deploy import build_plan
    from inkctl.recipe.hosts import Host
    from inkctl.recipe.model import Recipe

    doc = {"name": "x", "model": {"repo": "org/m"}, "engine": {"kind": "sglang", "version": "0.5.0",
           "image": {"ref": "lmsysorg/sglang:v0.5.0"}, "args": {"tensor_parallel": 2}},
           "hardware": {"accelerator": "h200", "compute_capability": "9.0", "nodes": 2, "gpus_per_host": 1},
           "container": {"network": "host"}, "network": {"socket_ifname": "eth0"}}
    hosts = [Host(name=f"h{i}", address=f"10.0.0.{i}", vars={"CC": f"/cache{i}"}) for i in (1, 2)]
    off = build_plan(Recipe.model_validate(doc), hosts)
    assert "compile-cache" not in [s.name for s in off.stages]
    on = build_plan(Recipe.model_validate({**doc, "compile_cache": {"enabled": True, "path": "${CC}/c"}}), hosts)
    assert on.recipe_hash != off.recipe_hash
    (stage,) = [s for s in on.stages if s.name == "compile-cache"]
    dirs = [s.argv[-1] for s in stage.steps]
    assert dirs[0].startswith("/cache1/c/sglang-sm90-") and dirs[1].startswith("/cache2/c/sglang-sm90-")
    launch = next(s for s in on.stages if s.name == "launch")
    spec = launch.steps[0].container
    assert any(m.target == "/root/.cache/inkctl-compile" and m.source == dirs[0] and not m.read_only for m in spec.mounts)
    env = dict(spec.env)
    assert env["SGLANG_DG_CACHE_DIR"] == "/root/.cache/inkctl-compile/deep_gemm"
    assert env["TRITON_CACHE_DIR"] == "/root/.cache/inkctl-compile/triton" and "VLLM_CACHE_ROOT" not in env
