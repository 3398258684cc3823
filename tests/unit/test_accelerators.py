"""The accelerator table, any other GPU declared by its properties, and AMD GPUs read from
amd-smi / rocm-smi answers (tests/fixtures/amd-smi/, written in the tools' formats)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inkctl.execute.state.gpu import GpuProbeError, describe
from inkctl.execute.state.gpu_amd import parse
from inkctl.plan.container import gpu_args
from inkctl.recipe.accelerators import KNOWN, lookup, normalize
from inkctl.recipe.model import Recipe
from inkctl.recipe.checks.rules import recipe_findings

AMD = Path(__file__).resolve().parents[1] / "fixtures" / "amd-smi"


def recipe(hardware: dict, **container) -> Recipe:
    return Recipe.model_validate({
        "name": "x", "model": {"repo": "org/m"},
        "hardware": {"gpus_per_host": 1, **hardware},
        "engine": {"kind": "vllm", "version": "v0.28.0", "image": {"ref": "vllm/vllm-openai:v0.28.0"}},
        "container": container, "smoke": {"enabled": False}})


def errors(r: Recipe) -> dict[str, str]:
    return {p.path: p.message for p in recipe_findings(r) if p.severity == "error"}


@pytest.mark.parametrize("name", ["A100", "H100", "H200", "H20", "L40S", "B200", "GB200", "GB10", "dgx-spark",
                                  "RTX 5090", "RTX-PRO-6000", "MI300X", "MI325X", "MI355X",
                                  "rtx-pro-6000-blackwell", "dgx-spark-gb10"])
def test_every_field_gpu_is_known_by_any_case(name):
    a = lookup(name)
    assert a is not None, name
    r = recipe({"accelerator": name}, gpus="rocm" if a.vendor == "amd" else "all")
    assert r.hardware.accelerator == a.name
    assert r.hardware.arch == a.arch
    assert r.hardware.unified_memory == a.unified
    assert errors(r) == {}


def test_table_facts():
    assert {a.name: (a.vendor, a.arch) for a in KNOWN if a.name in ("a100", "l40s", "mi300x", "mi355x", "dgx-spark-gb10")} == {
        "a100": ("nvidia", "8.0"), "l40s": ("nvidia", "8.9"), "mi300x": ("amd", "gfx942"),
        "mi355x": ("amd", "gfx950"), "dgx-spark-gb10": ("nvidia", "12.1")}
    assert normalize(" Instinct_MI300X ") == "mi300x"


def test_stated_capability_must_agree_with_the_table():
    assert errors(recipe({"accelerator": "a100", "compute_capability": "9.0"})) == {
        "hardware.compute_capability": "a100 has compute capability 8.0, not 9.0"}
    assert errors(recipe({"accelerator": "mi300x", "gfx_target": "gfx950"}, gpus="rocm")) == {
        "hardware.gfx_target": "mi300x has gfx target gfx942, not gfx950"}


def test_an_unknown_gpu_declared_by_its_properties():
    r = recipe({"accelerator": "RTX 4090", "compute_capability": "8.9", "memory_gib": 24})
    assert (r.hardware.accelerator, r.hardware.vendor, r.hardware.arch) == ("rtx-4090", "nvidia", "8.9")
    assert errors(r) == {}
    r = recipe({"accelerator": "mi250x", "gfx_target": "gfx90a"}, gpus="rocm")
    assert (r.hardware.vendor, r.hardware.arch) == ("amd", "gfx90a")
    assert errors(r) == {}


def test_an_unknown_gpu_without_properties_is_located_with_a_suggestion():
    r = recipe({"accelerator": "h300"})
    p = next(p for p in recipe_findings(r) if p.path == "hardware.accelerator")
    assert p.message == "unknown accelerator 'h300' with no compute_capability to say what it is"
    assert p.hint.startswith("did you mean 'h200'?")


def test_amd_needs_rocm_devices_and_nvidia_does_not():
    assert errors(recipe({"accelerator": "mi300x"})) == {
        "container.gpus": "mi300x is an AMD GPU: the NVIDIA runtime's --gpus does not reach it"}
    assert errors(recipe({"accelerator": "h100"}, gpus="rocm")) == {
        "container.gpus": "h100 is an NVIDIA GPU: ROCm devices do not reach it"}
    assert gpu_args("rocm", "0,1") == ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video",
                                       "--cap-add", "SYS_PTRACE", "--security-opt", "seccomp=unconfined"]


def test_amd_smi_answers_both_shapes():
    gpus = parse("amd-smi", (AMD / "mi300x-static-asic-vram.json").read_text())
    assert len(gpus) == 8
    assert (gpus[0].name, gpus[0].compute_capability, gpus[0].memory_total_mib) == ("AMD Instinct MI300X", "gfx942", 196592)
    assert describe(gpus).startswith("8x AMD Instinct MI300X, gfx942, 192.0 GiB")
    old = parse("amd-smi", (AMD / "mi300x-static-asic-vram-list.json").read_text())
    assert [g.index for g in old] == [0, 1]


def test_rocm_smi_answer():
    gpus = parse("rocm-smi", (AMD / "mi300x-rocm-smi.json").read_text())
    assert [g.index for g in gpus] == list(range(8))
    g = gpus[0]
    assert (g.name, g.compute_capability, g.memory_total_mib, g.memory_free_mib) == (
        "AMD Instinct MI300X OAM", "gfx942", 196592, 196304)


def test_amd_smi_garbage_is_one_clear_error():
    with pytest.raises(GpuProbeError, match="amd-smi did not answer JSON: 'Segmentation fault'"):
        parse("amd-smi", "Segmentation fault\n")
    with pytest.raises(GpuProbeError, match="no gfx target"):
        parse("amd-smi", json.dumps({"gpu_data": [{"gpu": 0, "asic": {"target_graphics_version": "N/A"}}]}))


def test_preflight_reads_amd_gpus_through_amd_smi():
    from tests.unit.test_preflight import Replay, answer, by_check, recipe as h200_recipe, run

    from inkctl.execute.deploy.preflight import PreflightFailed

    amd = (f"amd-smi\n{(AMD / 'mi300x-static-asic-vram.json').read_text()}", "", 0)
    r = h200_recipe(hardware={"accelerator": "MI300X", "gpus_per_host": 8, "memory_gib": 192},
                    container={"runtime": "docker", "gpus": "rocm"})
    report = run(r, [Replay("h1", preflight=answer(gpus=("", "", 127), amdgpus=amd))])
    g = by_check(report)["gpus"]
    assert g.status == "ok" and g.detail.startswith("8x AMD Instinct MI300X, gfx942"), g
    r2 = h200_recipe(hardware={"accelerator": "mi355x", "gpus_per_host": 8}, container={"runtime": "docker", "gpus": "rocm"})
    with pytest.raises(PreflightFailed) as ei:
        run(r2, [Replay("h1", preflight=answer(gpus=("", "", 127), amdgpus=amd))])
    assert by_check(ei.value.results)["gpus"].detail == (
        "found gfx target gfx942 (AMD Instinct MI300X); the recipe needs gfx950 (mi355x)")
    with pytest.raises(PreflightFailed) as ei:
        run(r, [Replay("h1", preflight=answer(gpus=("", "", 127)))])
    assert by_check(ei.value.results)["gpus"].detail == "neither amd-smi nor rocm-smi found"


def test_busy_amd_gpus_fail_gpu_free_and_the_inventorys_gpus_narrow_it():
    """AMD hosts: gpu-free reads the memory in use (amd-smi metric --mem-usage, or rocm-smi's used
    VRAM), as amd-smi lists no compute processes the way nvidia-smi does."""
    from tests.unit.test_preflight import Replay, answer, by_check, hosts, recipe as h200_recipe

    from inkctl.execute.deploy.preflight import PreflightFailed, run_preflight
    from inkctl.plan.deploy import build_plan

    static = (f"amd-smi\n{(AMD / 'mi300x-static-asic-vram.json').read_text()}", "", 0)
    idle = json.loads((AMD / "mi300x-metric-mem-usage.json").read_text())
    busy = json.loads(json.dumps(idle))
    busy["gpu_data"][3]["mem_usage"]["used_vram"]["value"] = 150000
    r = h200_recipe(hardware={"accelerator": "MI300X", "gpus_per_host": 8, "memory_gib": 192},
                    container={"runtime": "docker", "gpus": "rocm"})

    def check(r, metric, gpus=None, amdgpus=static):
        hs = hosts(1)
        if gpus:
            hs = [hs[0].model_copy(update={"gpus": gpus})]
        t = Replay("h1", preflight=answer(gpus=("", "", 127), gpuapps=("", "", 127), amdgpus=amdgpus,
                                          amdmem=(json.dumps(metric), "", 0)))
        try:
            return by_check(run_preflight(r, build_plan(r, hs), {"h1": t}))["gpu-free"]
        except PreflightFailed as e:
            return by_check(e.results)["gpu-free"]

    ok = check(r, idle)
    assert (ok.status, ok.detail) == ("ok", "no GPU memory in use on any GPU (amd-smi metric --mem-usage)")
    bad = check(r, busy)
    assert bad.status == "fail" and bad.detail == (
        "1 GPU(s) the plan needs on h1 already hold memory: GPU 3 146.5 of 192.0 GiB in use (amd-smi metric --mem-usage)")
    assert "on h1: amd-smi process" in bad.hint and "--skip-check gpu-free" in bad.hint
    # the inventory gives the ranks GPUs 4-7 (ROCR_VISIBLE_DEVICES): GPU 3's user is someone else's
    r4 = h200_recipe(hardware={"accelerator": "MI300X", "gpus_per_host": 4, "memory_gib": 192},
                     engine__args__tensor_parallel=4, container={"runtime": "docker", "gpus": "rocm"})
    fine = check(r4, busy, gpus="4,5,6,7")
    assert (fine.status, fine.detail) == ("ok", "no GPU memory in use on GPUs 4,5,6,7 (amd-smi metric --mem-usage)")
    # rocm-smi (no amd-smi): the used VRAM of its own answer
    rocm = json.loads((AMD / "mi300x-rocm-smi.json").read_text())
    rocm["card2"]["VRAM Total Used Memory (B)"] = str(100 * 2**30)
    bad = check(r, idle, amdgpus=(f"rocm-smi\n{json.dumps(rocm)}", "", 0))
    assert bad.status == "fail" and "GPU 2 100.0 of 192.0 GiB in use (rocm-smi --showmeminfo vram)" in bad.detail
