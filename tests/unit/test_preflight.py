"""Preflight logic on recorded answers: a fake transport replays what hosts printed.

The probe is one ``sh -c SCRIPT`` per host; ``answer()`` builds what that script prints from
recorded outputs of each command (docker 28, podman 4.3, nvidia-smi 580, /proc), and
``test_the_real_script_prints_what_answer_builds`` runs the real script through a real shell
with stand-in binaries, so the replayed shape cannot drift from the script's.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from inkctl.errors import InkctlError, UsageError
from inkctl.execute.events import Collect
from inkctl.execute.deploy.preflight import (PreflightFailed, PreflightReport, Unreachable, mount_sources, planned_image,
                                      run_preflight)
from inkctl import runtimes
from inkctl.execute.state.probe import HOST_PROBE, parse_links, split_sections
from inkctl.execute.hosts.transport import HostError, Result
from inkctl.plan.deploy import build_plan
from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe

PROOF_MARK = "@@INKCTL-PROOF "
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
H200 = (FIXTURES / "h200-query-gpu.csv").read_text()
H200x8 = "".join(H200.replace("0, ", f"{i}, ", 1) for i in range(8))
BUSY = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi-busy"
BUSY_UUID = "GPU-5e351fe9-bf09-94ee-8f17-8a3207975e53"  # the GPU of the busy-*.csv answers
UUIDS8 = "".join(f"{i}, GPU-00000000-0000-0000-0000-00000000000{i}\n" for i in range(8)).replace(
    "GPU-00000000-0000-0000-0000-000000000003", BUSY_UUID)
GB10 = "0, NVIDIA GB10, 12.1, [N/A], [N/A], 580.95.05\n"
MEMINFO = (FIXTURES / "h200-meminfo.txt").read_text()
DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
DOCKER_DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
DRIVER_DOWN = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.")
# /proc/net/tcp of a host with sshd on :22 and something on :8000 (0x1F40), both LISTEN (0A)
TCP_HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
SSHD = "   0: 0B00E70A:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 20732 1 0 100 0 0 10 0\n"
PORT_8000 = "   1: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 632 1 0 100 0 0 10 0\n"
ESTABLISHED_8000 = "   2: 0B00E70A:1F40 0100E70A:9C40 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0 100 0 0 10 0\n"


@pytest.fixture(autouse=True)
def _proof_cache(tmp_path, monkeypatch):
    """The argv proof keeps verdicts under $XDG_CACHE_HOME: each test its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def image_json(iid=DIGEST, repo_digests=()):
    return json.dumps([{"Id": iid, "RepoTags": ["vllm/vllm-openai:v0.28.0"], "RepoDigests": list(repo_digests)}], indent=4)


def ps_line(name, deployment, state="running", recipe_hash="0123456789ab"):
    """One line of ``ps --all --format ps_format(...)``: name, state, deployment and recipe-hash labels."""
    return f"{name}\t{state}\t{deployment or ''}\t{recipe_hash if deployment else ''}\n"


# a host with two containers of other workloads, neither holding a planned name
OTHERS = ps_line("registry", None) + ps_line("inkctl-y-r0", "y", "exited")


def section(name, out="", err="", rc=0):
    return name, out, err, rc


# /sys/class/net of a test-cluster host (namespace: eth0 is a veth, lo) and of a DGX Spark with its
# RoCE port down: name, operstate, flags (IFF_UP is 0x1)
NET_CLUSTER = "eth0 up 0x1003\nlo unknown 0x9\n"
NET_SPARK_DOWN = "enP7s7 up 0x1003\nenp1s0f1np1 down 0x1002\nlo unknown 0x9\nwlP9s9 down 0x1002\n"
NET_SPARK = "enP7s7 up 0x1003\nenp1s0f1np1 up 0x1003\nlo unknown 0x9\n"


def answer(*, containers=(OTHERS, "", 0), gpus=(H200x8, "", 0), meminfo=(MEMINFO, "", 0),
           image=None, listen=(TCP_HEADER + SSHD, "", 0), paths=("present\n", "", 0), net=(NET_CLUSTER, "", 0),
           hcas=("", "", 0), gpuapps=None, amdgpus=("", "", 127), amdmem=("", "", 127), seconds=0.05,
           fabric=("root|/sys\n", "", 0)) -> Result:
    gpuapps = gpuapps or (UUIDS8 + "@@apps\n", "", 0)
    image = image or (image_json(repo_digests=[f"vllm/vllm-openai@{DIGEST}"]), "", 0)
    out, err = [], []
    for sec, (o, e, rc) in (("containers", containers), ("gpus", gpus), ("gpuapps", gpuapps), ("amdgpus", amdgpus), ("amdmem", amdmem), ("meminfo", meminfo), ("image", image),
                            ("listen", listen), ("net", net), ("hcas", hcas), ("paths", paths), ("fabric", fabric)):
        out.append(f"@@inkctl {sec}\n{o}" + ("" if not o or o.endswith("\n") else "\n") + f"@@inkctl rc {rc}\n")
        err.append(f"@@inkctl {sec}\n{e}" + ("" if not e or e.endswith("\n") else "\n"))
    return Result(("sh",), 0, "".join(out).encode(), "".join(err).encode(), seconds)


class Replay:
    """A transport that answers each script by its $0 name (inkctl-preflight, inkctl-pull)."""

    def __init__(self, name, **answers):
        self.name = name
        self.answers = answers
        self.calls: list[tuple[str, ...]] = []
        self.barrier: threading.Barrier | None = None

    def run(self, argv, *, timeout=None, stdin=None):
        self.calls.append(tuple(argv))
        if "inkctl.proof=1" in argv:  # the argv proof's container: the engine's verdict, as its program prints it
            res = self.answers.get("proof") or Result(tuple(argv), 0, (PROOF_MARK + json.dumps(
                {"verdict": "ok", "stage": "engine-config", "engine": "vllm", "version": "0.28.0"}) + "\n").encode(), b"", 0.4)
            if isinstance(res, Exception):
                raise res
            return res
        if self.barrier is not None:
            self.barrier.wait()  # every host must be mid-probe at once: serial probing breaks it
        assert argv[:2] == ["sh", "-c"] or tuple(argv[:2]) == ("sh", "-c"), argv
        key = argv[3].replace("inkctl-", "")
        res = self.answers[key]
        if isinstance(res, Exception):
            raise res
        return res

    def put(self, path, content, mode):
        raise AssertionError("preflight writes nothing")

    def stream(self, argv, on_line, stop=None):
        raise AssertionError("preflight streams nothing")

    def alive(self) -> bool:
        return False  # never reached

    def close(self):
        pass


def recipe(**over) -> Recipe:
    doc = {
        "name": "x",
        "model": {"repo": "thinkingmachines/Inkling-NVFP4", "weights_gb": 600},
        "hardware": {"accelerator": "h200", "compute_capability": "9.0", "nodes": 1, "gpus_per_host": 8},
        "engine": {"kind": "vllm", "version": "v0.28.0",
                   "image": {"ref": "vllm/vllm-openai:v0.28.0", "digest": DIGEST},
                   "args": {"tensor_parallel": 8, "port": 8000}},
        "container": {"runtime": "docker", "mounts": [{"source": "${HF_HOME}", "target": "/hf", "read_only": True}]},
        "smoke": {"enabled": False},
    }
    for path, value in over.items():
        d = doc
        keys = path.split("__")
        for k in keys[:-1]:
            d = d.setdefault(k, {})
        d[keys[-1]] = value
    return Recipe.model_validate(doc)


def hosts(n=1):
    return [Host(name=f"h{i + 1}", address=f"10.231.0.{11 + i}", vars={"HF_HOME": f"/data/hf{i + 1}"}) for i in range(n)]


def run(r, transports, **kw):
    plan = build_plan(r, hosts(len(transports)))
    return run_preflight(r, plan, {t.name: t for t in transports}, **kw)


def by_check(results, host="h1"):
    return {x.check: x for x in results if x.host == host}


# --- all well -------------------------------------------------------------------------------

def test_all_pass_in_one_round_trip():
    t = Replay("h1", preflight=answer())
    res = by_check(run(recipe(), [t]))
    assert {c: r.status for c, r in res.items()} == {c: "ok" for c in ("ssh", "runtime", "gpus", "gpu-free", "image", "argv",
                                                                      "paths", "ports", "memory", "network", "fabric", "name")}
    probes = [c for c in t.calls if c[:2] == ("sh", "-c")]
    assert len(probes) == 1 and len(t.calls) == 2  # the probe, then the argv proof in the image it found
    argv = probes[0]
    assert argv[:4] == ("sh", "-c", HOST_PROBE, "inkctl-preflight")
    # values travel as positional arguments, never inside the script
    assert argv[4:] == ("docker", runtimes.get("docker").ps_format(), "vllm/vllm-openai:v0.28.0", "", "", "", "", "", "10.231.0.11", "/data/hf1")
    assert "/data/hf1" not in HOST_PROBE and "vllm/vllm-openai" not in HOST_PROBE
    assert res["gpus"].detail == "8x NVIDIA H200, sm 9.0, 140.4 GiB (139.8 free) each, driver 580.159.04"
    assert res["runtime"].detail == "docker answering: 2 containers (1 running)"
    assert res["name"].detail == "free: inkctl-x-r0"  # another deployment's containers do not matter
    assert "matches the pinned digest" in res["image"].detail
    assert res["paths"].detail == "present: /data/hf1"
    assert res["ports"].detail == "free: 8000 (engine)"
    assert res["memory"].detail == "MemAvailable 125.4 of 125.9 GiB"


def test_hosts_are_probed_in_parallel():
    ts = [Replay(f"h{i}", preflight=answer()) for i in (1, 2)]
    barrier = threading.Barrier(len(ts), timeout=10)
    for t in ts:
        t.barrier = barrier
    r = recipe(hardware__nodes=2, hardware__gpus_per_host=4, engine__args__tensor_parallel=8,
               container__network="host")
    results = run(r, ts)
    assert not barrier.broken
    assert {x.host for x in results} == {"h1", "h2"}


# --- runtime --------------------------------------------------------------------------------

def test_runtime_down_is_not_runtime_missing():
    t = Replay("h1", preflight=answer(containers=("", DOCKER_DOWN, 1), image=("", "", 1)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    res = by_check(ei.value.results)
    assert res["runtime"].status == "fail"
    assert res["runtime"].detail == f"docker is installed but not answering (runtime down): {DOCKER_DOWN}"
    assert "systemctl start docker" in res["runtime"].hint
    assert res["image"].status == res["name"].status == "not-run"
    assert res["gpus"].status == "ok"  # everything that does not need the runtime still says how it is
    msg = ei.value.message
    assert msg.startswith("preflight failed on h1 (runtime): nothing was launched")
    assert "\n" not in msg  # the table is the CLI's to show, from ei.value.results


def test_runtime_not_installed():
    t = Replay("h1", preflight=answer(containers=("", "", 127), image=("", "", 127)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    r = by_check(ei.value.results)["runtime"]
    assert r.detail == "docker is not installed (not on the SSH user's PATH)"
    assert "runtime down" not in r.detail


# --- gpus -----------------------------------------------------------------------------------

def test_wrong_compute_capability_names_what_was_found():
    t = Replay("h1", preflight=answer(gpus=(GB10 * 8, "", 0)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    g = by_check(ei.value.results)["gpus"]
    assert g.detail == "found compute capability 12.1 (NVIDIA GB10); the recipe needs 9.0 (h200)"
    assert "(gpus)" in ei.value.message


def test_too_few_gpus():
    t = Replay("h1", preflight=answer(gpus=(H200, "", 0)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    g = by_check(ei.value.results)["gpus"]
    assert g.detail.startswith("found 1x NVIDIA H200, sm 9.0")
    assert g.detail.endswith("the recipe needs 8 GPU(s) per host")


@pytest.mark.parametrize("gpus,expect", [
    (("", "", 127), "nvidia-smi not found"),
    (("", DRIVER_DOWN, 9), "the NVIDIA driver is not loaded (nvidia-smi: NVIDIA-SMI has failed because it couldn't communicate"),
    (("Segmentation fault\n", "", 0), "unexpected nvidia-smi output on line 1: 'Segmentation fault'"),
])
def test_nvidia_smi_failures(gpus, expect):
    t = Replay("h1", preflight=answer(gpus=gpus))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    assert by_check(ei.value.results)["gpus"].detail.startswith(expect)


def test_gpu_memory_in_use_warns_without_failing():
    busy = H200x8.replace("143156", "20000", 1)
    res = by_check(run(recipe(), [Replay("h1", preflight=answer(gpus=(busy, "", 0)))]))
    assert res["gpus"].status == "warn"
    assert "GPU 0: 120.9 GiB already in use" in res["gpus"].detail


def test_gpu_smaller_than_the_recipe_says():
    r = recipe(hardware__memory_gib=192)
    with pytest.raises(PreflightFailed) as ei:
        run(r, [Replay("h1", preflight=answer())])
    assert by_check(ei.value.results)["gpus"].detail.startswith(
        "GPU 0 has 140.4 GiB; the recipe expects 192 GiB per GPU (hardware.memory_gib)")


# --- unified memory (GB10) -------------------------------------------------------------------

def spark(**over):
    base = dict(hardware__accelerator="dgx-spark-gb10", hardware__compute_capability="12.1", hardware__nodes=2,
                hardware__gpus_per_host=1, hardware__unified_memory=True, engine__args__tensor_parallel=2,
                model__weights_gb=170.7)
    base.update(over)
    return recipe(**base)


def test_gb10_reads_memavailable():
    ts = [Replay(f"h{i}", preflight=answer(gpus=(GB10, "", 0))) for i in (1, 2)]
    results = run(spark(), ts)
    g, m = by_check(results)["gpus"], by_check(results)["memory"]
    assert g.detail == "1x NVIDIA GB10, sm 12.1, unified memory: MemAvailable 125.4 of 125.9 GiB, driver 580.95.05"
    assert m.status == "ok" and "unified memory; watchdog floor 8 GiB" in m.detail


def test_gb10_low_memavailable_warns():
    low = "MemTotal:       127599920 kB\nMemAvailable:     6291456 kB\n"
    ts = [Replay("h1", preflight=answer(gpus=(GB10, "", 0), meminfo=(low, "", 0))),
          Replay("h2", preflight=answer(gpus=(GB10, "", 0)))]
    results = run(spark(), ts)  # a warning does not fail
    m = by_check(results)["memory"]
    assert m.status == "warn"
    assert m.detail.startswith("MemAvailable 6.0 of 121.7 GiB: below the watchdog threshold of 8 GiB")


# --- image ----------------------------------------------------------------------------------

def test_image_missing_without_pull():
    t = Replay("h1", preflight=answer(image=("[]\n", "Error: No such image: vllm/vllm-openai:v0.28.0\n", 1)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    i = by_check(ei.value.results)["image"]
    assert i.detail == "vllm/vllm-openai:v0.28.0 is not on the host"
    assert "engine.image.pull: true" in i.hint
    assert len(t.calls) == 1  # no pull attempted


def test_image_missing_with_pull_pulls_the_pinned_digest_and_tags_it():
    t = Replay("h1", preflight=answer(image=("[]\n", "Error: No such image\n", 1)),
               pull=Result(("sh",), 0, image_json(repo_digests=[f"vllm/vllm-openai@{DIGEST}"]).encode(), b"", 30.0))
    res = by_check(run(recipe(engine__image__pull=True), [t]))
    assert res["image"].status == "ok"
    assert res["image"].detail.startswith(f"vllm/vllm-openai:v0.28.0 was missing: pulled vllm/vllm-openai@{DIGEST}")
    assert t.calls[1][3:] == ("inkctl-pull", "docker", f"vllm/vllm-openai@{DIGEST}", "vllm/vllm-openai:v0.28.0")


def test_pull_failure_fails():
    t = Replay("h1", preflight=answer(image=("[]\n", "Error: No such image\n", 1)),
               pull=Result(("sh",), 1, b"", b"Error response from daemon: Get \"https://registry-1.docker.io/v2/\": dial tcp: lookup registry-1.docker.io: no such host\n", 0.1))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(engine__image__pull=True), [t])
    assert "pulling vllm/vllm-openai@sha256:abab" in by_check(ei.value.results)["image"].detail
    assert "no such host" in by_check(ei.value.results)["image"].detail


def test_image_with_another_digest_fails():
    t = Replay("h1", preflight=answer(image=(image_json(iid=OTHER, repo_digests=[f"vllm/vllm-openai@{OTHER}"]), "", 0)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    i = by_check(ei.value.results)["image"]
    assert i.detail == f"vllm/vllm-openai:v0.28.0 on the host is {OTHER[:19]}, not the pinned {DIGEST}"


def test_pinned_digest_matches_the_image_id_too():
    """A locally built or imported image has no RepoDigests: its Id is its content address."""
    t = Replay("h1", preflight=answer(image=(image_json(iid=DIGEST, repo_digests=[]), "", 0)))
    assert by_check(run(recipe(), [t]))["image"].status == "ok"


def test_unpinned_image_present():
    t = Replay("h1", preflight=answer(image=(image_json(iid=OTHER), "", 0)))
    res = by_check(run(recipe(engine__image__digest=None), [t]))
    assert res["image"].detail == f"vllm/vllm-openai:v0.28.0 present ({OTHER[:19]})"


def test_the_image_comes_from_the_plan_when_not_given():
    """A plan built for an inkctl-built image checks that image, with no pin and no pull."""
    r = recipe(engine__image__pull=True)
    plan = build_plan(r, hosts(1), image="inkctl/x:build-0123456789ab")
    assert planned_image(plan) == "inkctl/x:build-0123456789ab"
    t = Replay("h1", preflight=answer(image=(image_json(iid=OTHER), "", 0)))
    res = by_check(run_preflight(r, plan, {"h1": t}))
    assert res["image"].detail == f"inkctl/x:build-0123456789ab present ({OTHER[:19]})"  # the ref's pin does not apply
    assert t.calls[0][6] == "inkctl/x:build-0123456789ab" and len(t.calls) == 2  # the probe, the argv proof
    proof = t.calls[1]
    assert proof[:3] == ("docker", "run", "--rm") and proof[-2:] == ("inkctl/x:build-0123456789ab", "-")  # in that image


def test_built_image_is_checked_not_pulled():
    t = Replay("h1", preflight=answer(image=("[]\n", "Error: No such image\n", 1)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(engine__image__pull=True), [t], image="inkctl/x:build-0123456789ab")
    assert t.calls[0][6] == "inkctl/x:build-0123456789ab"
    assert by_check(ei.value.results)["image"].hint == "build it first: inkctl build"
    assert len(t.calls) == 1


# --- paths, ports, names --------------------------------------------------------------------

def test_missing_mount_names_the_expanded_path_and_the_recipe_field():
    t = Replay("h1", preflight=answer(paths=("missing\n", "", 0)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    p = by_check(ei.value.results)["paths"]
    assert p.detail == "/data/hf1 does not exist from container.mounts[0].source ${HF_HOME}"
    assert "vars" in p.hint


def test_mount_sources_come_from_the_planned_argv():
    r = recipe(container__mounts=[{"source": "${HF_HOME}", "target": "/hf"},
                                  {"source": "/opt/optional", "target": "/o", "required": False},
                                  {"source": "/srv/${HOST}/cache", "target": "/c"}])
    plan = build_plan(r, hosts(1))
    assert mount_sources(r, plan, "h1") == [(0, "/data/hf1"), (2, "/srv/h1/cache")]


def test_busy_port_fails_and_an_established_connection_does_not():
    t = Replay("h1", preflight=answer(listen=(TCP_HEADER + SSHD + ESTABLISHED_8000, "", 0)))
    assert by_check(run(recipe(), [t]))["ports"].status == "ok"
    t = Replay("h1", preflight=answer(listen=(TCP_HEADER + SSHD + PORT_8000, "", 0)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    p = by_check(ei.value.results)["ports"]
    assert p.detail == "in use: 8000 (engine)"
    assert "sport = :8000" in p.hint


def test_multinode_head_checks_the_rendezvous_port_workers_none():
    ts = [Replay(f"h{i}", preflight=answer(gpus=(GB10, "", 0))) for i in (1, 2)]
    results = run(spark(), ts)
    assert by_check(results, "h1")["ports"].detail == "free: 8000 (engine), 29501 (master)"
    assert by_check(results, "h2")["ports"].detail == "no fixed port on a worker"


def test_sglang_and_ray_rendezvous_ports():
    from inkctl.execute.deploy.preflight import planned_ports

    s = spark(engine={"kind": "sglang", "version": "x", "image": {"ref": "lmsysorg/sglang:x"},
                      "args": {"tensor_parallel": 2, "port": 8010}})
    assert planned_ports(s, 0) == [(8010, "engine"), (20000, "dist-init")]
    assert planned_ports(spark(engine__multinode="ray"), 0) == [(8000, "engine"), (6379, "ray")]


def test_foreign_container_holding_the_name_fails():
    names = (OTHERS + ps_line("inkctl-x-r0", "other"), "", 0)
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [Replay("h1", preflight=answer(containers=names))])
    n = by_check(ei.value.results)["name"]
    assert n.detail == "inkctl-x-r0 is taken by another container (deployment 'other', running)"
    assert n.hint == "remove it on h1 (docker rm -f inkctl-x-r0) or rename the deployment"
    names = (ps_line("inkctl-x-r0", None, "exited"), "", 0)
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [Replay("h1", preflight=answer(containers=names))])
    assert "no inkctl label" in by_check(ei.value.results)["name"].detail


def test_own_running_deployment_holds_its_port_without_failing():
    names = (ps_line("inkctl-x-r0", "x"), "", 0)
    res = by_check(run(recipe(), [Replay("h1", preflight=answer(containers=names, listen=(TCP_HEADER + PORT_8000, "", 0)))]))
    assert res["name"].status == "ok" and "inkctl-x-r0 running" in res["name"].detail
    assert res["ports"].status == "ok" and "this deployment" in res["ports"].detail


# --- skip, unreachable, sinks ----------------------------------------------------------------

def test_skip_check_waives_a_failure_knowingly():
    t = Replay("h1", preflight=answer(gpus=(GB10 * 8, "", 0)))
    res = by_check(run(recipe(), [t], skip={"gpus"}))
    assert res["gpus"].status == "skipped"
    assert res["gpus"].detail.startswith("skipped (--skip-check); would be: found compute capability 12.1")


def test_skip_check_unknown_or_ssh():
    t = Replay("h1", preflight=answer())
    with pytest.raises(UsageError, match="--skip-check gpu: no such check"):
        run(recipe(), [t], skip={"gpu"})
    with pytest.raises(UsageError, match="cannot be waived"):
        run(recipe(), [t], skip={"ssh"})


def test_an_unreachable_host_fails_ssh_and_the_others_are_still_checked():
    err = HostError("h2", "unreachable", "unreachable: cannot connect to 10.231.0.12:22: no route to host",
                    hint="check that the host is up")
    ts = [Replay("h1", preflight=answer(gpus=(GB10, "", 0))), Unreachable(err)]
    with pytest.raises(PreflightFailed) as ei:
        run(spark(), ts)
    h2 = by_check(ei.value.results, "h2")
    assert h2["ssh"].status == "fail"
    assert h2["ssh"].detail == "unreachable: cannot connect to 10.231.0.12:22: no route to host"
    assert {h2[c].status for c in h2 if c != "ssh"} == {"not-run"}
    assert all(r.status == "ok" for r in by_check(ei.value.results, "h1").values())
    assert ei.value.message.startswith("preflight failed on h2 (ssh)")


def test_an_unreachable_host_answers_every_transport_call_with_its_error():
    """`status`/`logs` hand Unreachable to code that reads files and removes directories too
    (mypy found it lacked read and remove_dir): whatever is asked, the host's own error."""
    import inspect

    from inkctl.execute.hosts.transport import Transport

    err = HostError("h2", "unreachable", "no route to host")
    u = Unreachable(err)
    members = {n for n, _ in inspect.getmembers(Transport, inspect.isfunction) if not n.startswith("_")} - {"alive", "close"}
    assert members == {"run", "put", "read", "remove_dir", "stream"}
    calls = {"run": lambda: u.run(["true"]), "put": lambda: u.put("/x", b"", 0o600), "read": lambda: u.read("/x"),
             "remove_dir": lambda: u.remove_dir("/x"), "stream": lambda: u.stream(["true"], print)}
    for name in members:
        with pytest.raises(HostError) as ei:
            calls[name]()
        assert ei.value is err, name
    assert u.alive() is False


def test_connection_lost_during_the_probe():
    t = Replay("h1", preflight=HostError("h1", "unreachable", "connection lost"))
    with pytest.raises(PreflightFailed):
        run(recipe(), [t])


def test_event_sink_gets_one_report_and_the_message_stays_short():
    sink = Collect()
    t = Replay("h1", preflight=answer(paths=("missing\n", "", 0)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t], sink=sink)
    (report,) = sink.events
    assert isinstance(report, PreflightReport) and not report.ok
    assert report.as_dict()["event"] == "preflight"
    assert "\n" not in ei.value.message
    got = Collect()
    run(recipe(), [Replay("h1", preflight=answer())], sink=got)
    (report,) = got.events
    assert report.ok and len(report.results) == 12


def test_preflight_failed_is_an_inkctl_error_with_exit_1():
    assert issubclass(PreflightFailed, InkctlError)
    assert PreflightFailed("x", []).exit_code == 1


# --- the real script --------------------------------------------------------------------------

def _stub(d: Path, name: str, body: str) -> None:
    p = d / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def test_the_real_script_prints_what_answer_builds(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (tmp_path / "present").mkdir()
    # one query answers gpus and the uuid table (its fields and the uuid last), one the compute apps
    _stub(bin_, "nvidia-smi", "\n".join([
        'case "$1" in',
        f"--query-gpu=*,uuid) sed 's/$/, GPU-0000-h200/' {FIXTURES / 'h200-query-gpu.csv'};;",
        "--query-compute-apps=*) ;;",
        "*) exit 6;;",
        "esac", ""]))
    _stub(bin_, "docker", "\n".join([
        'case "$1 $2" in',
        '"ps --all") [ "$4" = "$PSFMT" ] || exit 9; printf \'%s\' "$PS";;',
        f'"image inspect") echo \'{image_json()}\';;',
        "*) exit 8;;",
        "esac", ""]))
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "PSFMT": runtimes.get("docker").ps_format(), "PS": OTHERS}
    argv = ["sh", "-c", HOST_PROBE, "inkctl-preflight", "docker", runtimes.get("docker").ps_format(), "img:1", "", "", "", "", "", "",
            str(tmp_path / "present"), str(tmp_path / "absent dir; rm -rf /")]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    s = split_sections(p.stdout, p.stderr)
    assert "lock" not in s.out  # no lock asked for (doctor): no lock section
    assert s.get("containers") == (OTHERS.strip(), "", 0)
    assert s.get("gpus") == (H200.strip(), "", 0)
    assert s.get("gpuapps") == ("0, GPU-0000-h200\n@@apps", "", 0)
    assert s.get("amdgpus")[2] == 127  # no amd-smi, no rocm-smi on this machine
    assert s.get("image")[2] == 0 and json.loads(s.get("image")[0])[0]["Id"] == DIGEST
    assert s.get("paths") == ("present\nmissing", "", 0)
    assert s.get("meminfo")[0].startswith("MemTotal:") and s.get("meminfo")[2] == 0
    assert "MemAvailable:" in s.get("meminfo")[0]
    listen = s.get("listen")  # ss where the host has it, else /proc/net/tcp{,6}
    assert listen[2] == 0 and (listen[0].lstrip().startswith("sl") or all(
        line.startswith("LISTEN") for line in listen[0].splitlines()))
    links = parse_links(s.get("net")[0])  # this machine's own interfaces, read the way a host's are
    assert "lo" in links and links["lo"].up and s.get("net")[2] == 0
    assert s.get("hcas")[2] == 0
    # a host without docker or nvidia-smi: 127 for both, told apart from "installed but down";
    # the image is not asked of a runtime that is not there
    bare = tmp_path / "bare"
    bare.mkdir()
    for tool in ("grep", "cat"):
        (bare / tool).symlink_to(shutil.which(tool))
    p = subprocess.run([shutil.which("sh"), *argv[1:]], env={"PATH": str(bare)}, capture_output=True, text=True, timeout=30)
    s = split_sections(p.stdout, p.stderr)
    assert s.get("containers")[2] == 127 and s.get("gpus")[2] == 127 and s.get("image")[2] == 127
    assert s.get("amdgpus") == ("", "", 127)
    assert s.get("gpuapps") == ("", "", 127)
    assert s.get("paths") == ("present\nmissing", "", 0)
    assert s.get("listen")[0].lstrip().startswith("sl")  # no ss: the listening sockets from /proc


def test_the_real_script_takes_the_deploy_lock_first(tmp_path):
    """The lock section is deploylock's own acquisition: taken -> the probe goes on; held -> the
    holder record, and the rest still answers (a stale lock taken over after it needs them)."""
    from inkctl.execute.state.deploylock import DeployLock, LockHeld
    from inkctl.execute.hosts.local import LocalTransport
    from inkctl.execute.deploy.preflight import probe_one

    r = recipe(container__mounts=[])
    plan = build_plan(r, [Host(name="h1", address="127.0.0.1")])
    plan = type(plan)(**{**plan.__dict__, "hosts": (type(plan.hosts[0])(**{**plan.hosts[0].__dict__,
                                                                           "state_dir": str(tmp_path / "s" / "x")}),)})
    tr = {"h1": LocalTransport("h1")}
    first = DeployLock(plan, tr, "inkctl up first.yaml")
    a = probe_one(r, plan, tr["h1"], lock=first)
    assert a.sections.get("lock")[2] == 0 and "containers" in a.sections.out
    first.taken({"h1": a.lock_answer()})
    assert first.held_on == ["h1"] and (tmp_path / "s" / "locks" / "x.lock" / "holder.json").exists()
    second = DeployLock(plan, tr, "inkctl up second.yaml")
    b = probe_one(r, plan, tr["h1"], lock=second)
    assert b.sections.get("lock")[2] == 75 and "containers" in b.sections.out
    with pytest.raises(LockHeld, match="running `inkctl up first.yaml`"):
        second.taken({"h1": b.lock_answer()})
    first.release()
    assert not (tmp_path / "s" / "locks" / "x.lock").exists()


def test_probe_parses_podman():
    """podman 4.3's inspect: bare name, bare hex image id, ImageName (recorded on Debian 12)."""
    from inkctl.execute.state.deployed import parse_inspect

    rec = [{"Id": "a10a6ea99b0f", "Name": "inkctl-t-r0", "Image": "8fcbef0cfaa3b507a3537837d2305d3300b557e48c4a97d2af9c97e7dc8d0407",
            "ImageName": "localhost/tiny:1",
            "State": {"Status": "running", "Running": True, "ExitCode": 0, "StartedAt": "2026-11-29T16:31:37.880627661Z",
                      "FinishedAt": "0001-01-01T00:00:00Z"},
            "Config": {"Image": "localhost/tiny:1", "Labels": {"inkctl.deployment": "t", "inkctl.rank": "0"}}},
           {"Id": "b", "Name": "t-exit", "Image": "8fcbef0cfaa3", "ImageName": "localhost/tiny:1",
            "State": {"Status": "exited", "Running": False, "ExitCode": 3, "StartedAt": "2026-11-29T16:31:38.089651286Z",
                      "FinishedAt": "2026-11-29T16:31:38.090473232Z"},
            "Config": {"Labels": {"inkctl.deployment": "t"}}}]
    a, b = parse_inspect(json.dumps(rec))
    assert (a.name, a.state, a.exit_code, a.rank, a.image, a.image_id_short) == (
        "inkctl-t-r0", "running", None, 0, "localhost/tiny:1", "8fcbef0cfaa3")
    assert a.started_at.isoformat() == "2026-11-29T16:31:37.880627+00:00"
    assert (b.state, b.exit_code, b.rank) == ("exited", 3, None)


def test_listening_ports_reads_tcp_and_tcp6():
    from inkctl.execute.state.probe import listening_ports

    tcp6 = "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 1\n"
    assert listening_ports(TCP_HEADER + SSHD + PORT_8000 + ESTABLISHED_8000 + tcp6) == {22, 8000, 8080}


def test_listening_ports_reads_ss():
    """``ss -Hltn``, as iproute2 6.1 prints it: IPv4, IPv6 and any-address listeners."""
    from inkctl.execute.state.probe import listening_ports

    ss = ("LISTEN 0      128    10.231.7.11:22 0.0.0.0:*\n"
          "LISTEN 0      4096         [::]:8000       [::]:*\n"
          "LISTEN 0      511             *:8080          *:*\n"
          "LISTEN 0      4096   127.0.0.53%lo:53  0.0.0.0:*\n")
    assert listening_ports(ss) == {22, 8000, 8080, 53}


def test_threads_do_not_leak():
    before = threading.active_count()
    run(recipe(), [Replay("h1", preflight=answer())])
    assert threading.active_count() <= before


# --- network: the plan's NCCL_SOCKET_IFNAME and NCCL_IB_HCA on each host ----------------------

def two_node(**over):
    return recipe(hardware__nodes=2, hardware__gpus_per_host=4, engine__args__tensor_parallel=8,
                  container__network="host", **over)


def test_network_all_fine_on_both_hosts():
    r = two_node(network__socket_ifname="eth0")
    ts = [Replay(f"h{i}", preflight=answer()) for i in (1, 2)]
    res = run(r, ts)
    for host in ("h1", "h2"):
        assert by_check(res, host)["network"].status == "ok"
        assert by_check(res, host)["network"].detail == "eth0 up"


def test_network_missing_interface_names_host_and_what_is_there():
    r = two_node(network__socket_ifname="enp1s0f1np1")
    ts = [Replay("h1", preflight=answer(net=(NET_SPARK, "", 0))), Replay("h2", preflight=answer())]
    with pytest.raises(PreflightFailed) as ei:
        run(r, ts)
    assert ei.value.message.startswith("preflight failed on h2 (network)")
    assert by_check(ei.value.results, "h1")["network"].status == "ok"
    n = by_check(ei.value.results, "h2")["network"]
    assert n.status == "fail"
    assert n.detail == "interface enp1s0f1np1 (NCCL_SOCKET_IFNAME) does not exist on h2; it has: eth0 (up), lo (up)"
    assert "nccl_socket_ifname for h2" in n.hint


def test_network_interface_down_fails_and_unknown_with_iff_up_passes():
    r = two_node(network__socket_ifname="enp1s0f1np1")
    ts = [Replay("h1", preflight=answer(net=(NET_SPARK_DOWN, "", 0))), Replay("h2", preflight=answer(net=(NET_SPARK, "", 0)))]
    with pytest.raises(PreflightFailed) as ei:
        run(r, ts)
    n = by_check(ei.value.results, "h1")["network"]
    assert n.status == "fail"
    assert n.detail.startswith("interface enp1s0f1np1 (NCCL_SOCKET_IFNAME) on h1 is down, not up; it has: enP7s7 (up), "
                               "enp1s0f1np1 (down), lo (up), wlP9s9 (down)")
    assert "ip link set enp1s0f1np1 up" in n.hint
    # a virtual link reports operstate 'unknown': up when its IFF_UP flag is set, down when not
    tun = "tun0 unknown 0x1091\nlo unknown 0x9\n"
    res = run(two_node(network__socket_ifname="tun0"), [Replay(f"h{i}", preflight=answer(net=(tun, "", 0))) for i in (1, 2)])
    assert by_check(res)["network"].status == "ok"
    with pytest.raises(PreflightFailed):
        run(two_node(network__socket_ifname="tun0"),
            [Replay(f"h{i}", preflight=answer(net=("tun0 unknown 0x1090\n", "", 0))) for i in (1, 2)])


def test_network_prefix_and_exclusion_follow_nccl():
    # NCCL_SOCKET_IFNAME=eth matches eth0 (a prefix); =eth needs the exact name; ^docker excludes
    assert by_check(run(two_node(network__socket_ifname="eth"), [Replay(f"h{i}", preflight=answer()) for i in (1, 2)])
                    )["network"].detail == "eth0 up"
    with pytest.raises(PreflightFailed):
        run(two_node(network__socket_ifname="=eth"), [Replay(f"h{i}", preflight=answer()) for i in (1, 2)])
    res = run(two_node(network__socket_ifname="^docker,lo"), [Replay(f"h{i}", preflight=answer()) for i in (1, 2)])
    assert by_check(res)["network"].status == "ok" and "not checked" in by_check(res)["network"].detail


def test_network_missing_hca():
    r = two_node(network__socket_ifname="eth0", network__ib_hca=["rocep1s0f1"])
    ts = [Replay("h1", preflight=answer(hcas=("rocep1s0f1\n", "", 0))), Replay("h2", preflight=answer())]
    with pytest.raises(PreflightFailed) as ei:
        run(r, ts)
    assert by_check(ei.value.results, "h1")["network"].detail == "eth0 up; RDMA rocep1s0f1 present"
    n = by_check(ei.value.results, "h2")["network"]
    assert n.status == "fail"
    assert n.detail == ("RDMA adapter rocep1s0f1 (NCCL_IB_HCA) not in /sys/class/infiniband on h2; "
                        "it has: none (no RDMA driver loaded)")
    # waivable like every other check but ssh
    res = run(r, ts, skip={"network"})
    assert by_check(res, "h2")["network"].status == "skipped"


def test_network_single_node_is_not_checked():
    res = run(recipe(network__socket_ifname="nosuch0"), [Replay("h1", preflight=answer())])
    assert by_check(res)["network"].status == "ok"
    assert by_check(res)["network"].detail == "single node: no NCCL network to check"


# --- gpu-free: nvidia-smi --query-compute-apps on every host (real answers: fixtures/nvidia-smi-busy) --

def test_gpu_held_by_another_process_fails_naming_pid_process_and_memory():
    apps = (BUSY / "busy-compute-apps.csv").read_text()  # GPU 3 here: python3 pid 445, 20998 MiB
    t = Replay("h1", preflight=answer(gpuapps=(UUIDS8 + "@@apps\n" + apps, "", 0)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    assert ei.value.message.startswith("preflight failed on h1 (gpu-free): nothing was launched")
    r = by_check(ei.value.results)["gpu-free"]
    assert r.status == "fail"
    assert r.detail == "1 process(es) hold GPU memory the plan needs on h1: GPU 3: pid 445 (python3) holds 20.5 GiB"
    assert "ps -o pid,user,cmd -p 445" in r.hint and "--skip-check gpu-free" in r.hint


def test_gpu_held_answer_with_header_and_units_is_read_too():
    apps = (BUSY / "busy-compute-apps-header.csv").read_text()
    t = Replay("h1", preflight=answer(gpuapps=(UUIDS8 + "@@apps\n" + apps, "", 0)))
    with pytest.raises(PreflightFailed) as ei:
        run(recipe(), [t])
    assert "pid 445 (python3) holds 20.5 GiB" in by_check(ei.value.results)["gpu-free"].detail


def test_gpu_held_on_a_gpu_the_plan_does_not_use_passes():
    from inkctl.execute.state.gpu import parse_holders

    text = (BUSY / "device-busy-compute-apps.txt").read_text()  # captured on the device machine
    apps, _, uuids = text.partition("# nvidia-smi --query-gpu")
    held = parse_holders(uuids.split("\n", 1)[1], apps)
    assert [(h.gpu, h.pid, h.process, h.used_mib) for h in held] == [(0, 506, "python3", 8710)]
    idle = (BUSY / "idle-compute-apps.csv").read_text()
    t = Replay("h1", preflight=answer(gpuapps=(UUIDS8 + "@@apps\n" + idle, "", 0)))
    assert by_check(run(recipe(), [t]))["gpu-free"].status == "ok"


def test_gpu_held_can_be_skipped_knowingly():
    apps = (BUSY / "busy-compute-apps.csv").read_text()
    t = Replay("h1", preflight=answer(gpuapps=(UUIDS8 + "@@apps\n" + apps, "", 0)))
    r = by_check(run(recipe(), [t], skip={"gpu-free"}))["gpu-free"]
    assert r.status == "skipped" and "pid 445" in r.detail


def test_network_rdma_false_stops_requiring_the_adapters():
    r = two_node(network__socket_ifname="eth0", network__ib_hca=["rocep1s0f1"], network__rdma=False)
    ts = [Replay("h1", preflight=answer()), Replay("h2", preflight=answer())]
    res = by_check(run(r, ts), "h2")["network"]
    assert res.status == "ok"
    assert res.detail.startswith("eth0 up; RDMA adapter rocep1s0f1 absent: not required (network.rdma: false)")


def test_gpu_held_only_counts_on_the_gpus_the_plan_gives_the_host():
    from inkctl.execute.deploy.preflight import planned_gpus

    apps = (BUSY / "busy-compute-apps.csv").read_text()  # GPU 3 held
    r = recipe(hardware__gpus_per_host=2)
    h = [Host(name="h1", address="10.231.0.11", gpus="0,1", vars={"HF_HOME": "/data/hf1"})]
    plan = build_plan(r, h)
    assert planned_gpus(plan, "h1") == [0, 1]
    t = Replay("h1", preflight=answer(gpuapps=(UUIDS8 + "@@apps\n" + apps, "", 0)))
    res = by_check(run_preflight(r, plan, {"h1": t}))["gpu-free"]
    assert (res.status, res.detail) == ("ok", "no other process holds memory on GPUs 0,1 "
                                              "(1 process(es) on GPUs this plan does not use)")


# --- the argv proof (execute/deploy/proof.py): the engine's word on each rank's argv ----------

def _said(**verdict) -> Result:
    return Result(("docker",), 0, (PROOF_MARK + json.dumps(verdict) + "\n").encode(), b"", 0.3)


def test_a_refused_argv_fails_preflight_located_in_the_recipe():
    r = recipe(engine__args__extra=["--enforce-eager", "--foo-bar"])
    t = Replay("h1", preflight=answer(), proof=_said(verdict="refused", stage="serve", engine="vllm", version="0.28.0",
                                                     message="vllm serve: error: unrecognized arguments: --foo-bar"))
    with pytest.raises(PreflightFailed) as ei:
        run(r, [t])
    row = by_check(ei.value.results)["argv"]
    assert row.status == "fail"
    assert row.detail == "rank 0 (head): vllm 0.28.0 refused its argv: vllm serve: error: unrecognized arguments: --foo-bar"
    assert row.hint and row.hint.startswith("from engine.args.extra[1] (--foo-bar): ")
    assert "h1 (argv)" in ei.value.message


def test_an_image_without_python_is_not_checked_and_not_failed():
    t = Replay("h1", preflight=answer(), proof=Result(("docker",), 127, b"",
               b'docker: Error response from daemon: exec: "python3": executable file not found in $PATH\n', 0.2))
    row = by_check(run(recipe(), [t]))["argv"]
    assert row.status == "warn"
    assert row.detail == ("rank 0 (head): not checked: the image has no python3, so no engine in it could be asked "
                          "(a custom entrypoint?)")


def test_a_verdict_pinned_in_the_lock_file_is_not_asked_again():
    from inkctl.execute.deploy.proof import program
    from inkctl.plan.proof import rank_argvs

    r = recipe()
    plan = build_plan(r, hosts(1))
    (rank,) = rank_argvs(plan, r)
    prog = program("vllm")
    assert prog is not None
    key = rank.key(DIGEST, prog)
    pins = {key: {"verdict": "ok", "stage": "engine-config", "engine": "vllm", "version": "0.28.0", "key": key,
                  "argv_key": rank.argv_key(prog), "image": DIGEST}}
    t = Replay("h1", preflight=answer())
    res = by_check(run_preflight(r, plan, {"h1": t}, proof_pins=pins))
    assert res["argv"].detail == "vllm 0.28.0 read the argv (checked up to engine-config; pinned in the lock file)"
    assert len(t.calls) == 1  # the probe only
    # the same argv on another image is asked again
    t2 = Replay("h1", preflight=answer(image=(image_json(iid=OTHER), "", 0)))
    by_check(run_preflight(r.model_copy(update={"engine": r.engine.model_copy(update={"image": r.engine.image.model_copy(
        update={"digest": None})})}), plan, {"h1": t2}, proof_pins=pins))
    assert len(t2.calls) == 2
