"""An AMD host on the test cluster: h4 given an amd-smi (or rocm-smi) stand-in that replays
tests/fixtures/amd-smi/ (8x MI300X, gfx942). Preflight reads the GPUs through it; the ranks'
container spec carries ROCm's devices; a busy or a wrong AMD GPU stops preflight, located."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cluster import gpu
from tests.e2e.conftest import containers, no_traceback

pytestmark = pytest.mark.cluster
RECIPE = Path(__file__).parent / "recipes" / "amd.yaml"
HOST = "h4"  # a docker host


@pytest.fixture
def amd_host(cluster):
    """h4 with the stand-in: amd_host("rocm-smi") installs that tool alone instead."""
    bin_dir = cluster.host(HOST).bin_dir

    def make(tool="amd-smi", used=None):
        gpu.remove_amd(bin_dir)
        gpu.install_amd(bin_dir, tool, used)
        return bin_dir

    yield make
    gpu.remove_amd(bin_dir)


def checks(ran) -> dict[str, dict]:
    """The doctor's rows of HOST, by check name, from its JSON answer."""
    return {c["check"]: c for c in json.loads(ran.stdout)["checks"] if c["host"] == HOST}


def test_amd_host_passes_preflight_with_rocm_devices_in_the_container_spec(cluster, inkctl, inventory, amd_host):
    amd_host("amd-smi")
    inv = inventory(HOST)
    r = inkctl("doctor", RECIPE, "--hosts", inv, "-o", "json")
    assert r.rc == 0, r
    rows = checks(r)
    assert rows["gpus"]["status"] == "ok" and rows["gpus"]["detail"].startswith("8x AMD Instinct MI300X, gfx942"), rows["gpus"]
    assert rows["gpu-free"]["status"] == "ok", rows["gpu-free"]
    assert rows["gpu-free"]["detail"] == "no GPU memory in use on any GPU (amd-smi metric --mem-usage)"
    # the ranks' container spec, as up runs it: ROCm's devices and group, no NVIDIA flag
    plan = json.loads(inkctl("plan", RECIPE, "--hosts", inv, "-o", "json").stdout)
    argv = next(s["argv"] for st in plan["stages"] for s in st["steps"] if s.get("argv", [None])[:2] == ["docker", "run"])
    pairs = list(zip(argv, argv[1:]))
    assert ("--device", "/dev/kfd") in pairs and ("--device", "/dev/dri") in pairs and ("--group-add", "video") in pairs
    assert "--gpus" not in argv and not any("nvidia.com/gpu" in a for a in argv)
    # ROCm without amd-smi: rocm-smi answers instead
    amd_host("rocm-smi")
    r = inkctl("doctor", RECIPE, "--hosts", inv, "-o", "json")
    assert r.rc == 0, r
    assert checks(r)["gpu-free"]["detail"] == "no GPU memory in use on any GPU (rocm-smi --showmeminfo vram)"


def test_a_busy_amd_gpu_stops_up_in_preflight_located(cluster, inkctl, inventory, amd_host):
    amd_host("amd-smi", used={5: 150000})  # GPU 5: 146.5 GiB of 192 in use (someone else's job)
    inv = inventory(HOST)
    r = inkctl("up", RECIPE, "--hosts", inv)
    assert r.rc != 0, r
    out = " ".join(r.out.split())
    assert "preflight failed on h4 (gpu-free): nothing was launched" in out, r
    assert "GPU 5 146.5 of 192.0 GiB in use (amd-smi metric --mem-usage)" in out, r
    assert "on h4: amd-smi process" in out, r
    assert no_traceback(r.out)
    assert containers(cluster, HOST, "e2e-amd") == []
    # the inventory gives the ranks GPUs 0-3: GPU 5's user does not matter, the gpus check does
    inv4 = inventory(HOST, **{HOST: {"gpus": "0,1,2,3"}})
    r = inkctl("doctor", RECIPE, "--hosts", inv4, "--set", "hardware.gpus_per_host=4",
               "--set", "engine.args.tensor_parallel=4", "-o", "json")
    assert r.rc == 0, r
    assert checks(r)["gpu-free"]["detail"] == "no GPU memory in use on GPUs 0,1,2,3 (amd-smi metric --mem-usage)"


def test_a_wrong_amd_gpu_fails_preflight_located(cluster, inkctl, inventory, amd_host):
    amd_host("amd-smi")
    inv = inventory(HOST)
    r = inkctl("doctor", RECIPE, "--hosts", inv, "--set", "hardware.accelerator=mi355x")
    assert r.rc != 0, r
    out = " ".join(r.out.split())
    assert "h4" in out and "found gfx target gfx942 (AMD Instinct MI300X); the recipe needs gfx950 (mi355x)" in out, r
    assert no_traceback(r.out)
    # and an NVIDIA recipe on it is not read through amd-smi: h4's nvidia-smi answers (2 RTX PRO 6000)
    r = inkctl("doctor", RECIPE, "--hosts", inv, "--set", "hardware.accelerator=h200",
               "--set", "container.gpus=all", "-o", "json")
    assert r.rc != 0
    assert "RTX PRO 6000" in checks(r)["gpus"]["detail"], checks(r)["gpus"]
