"""nvidia-smi and /proc/meminfo parsing, on real captured answers (tests/fixtures/nvidia-smi/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inkctl.execute.state.gpu import QUERY, GpuProbeError, describe, parse_meminfo, parse_query_gpu, query_failure

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
DRIVER_DOWN = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.\n")


def test_query_argv_is_exact():
    assert QUERY == ("nvidia-smi", "--query-gpu=index,name,compute_cap,memory.total,memory.free,driver_version",
                     "--format=csv,noheader,nounits")


def test_real_h200_answer():
    (g,) = parse_query_gpu((FIXTURES / "h200-query-gpu.csv").read_text())
    assert g.index == 0
    assert g.name == "NVIDIA H200"
    assert g.compute_capability == "9.0"
    assert g.memory_total_mib == 143771
    assert g.memory_free_mib == 143156
    assert g.driver == "580.159.04"
    assert not g.unified_memory


def test_header_and_units_are_tolerated():
    """The same H200 asked without noheader/nounits reads the same."""
    (g,) = parse_query_gpu((FIXTURES / "h200-query-gpu-header.csv").read_text())
    assert (g.compute_capability, g.memory_total_mib, g.memory_free_mib) == ("9.0", 143771, 143156)


def test_eight_gpus():
    text = "".join(f"{i}, NVIDIA H200, 9.0, 143771, 143156, 580.159.04\n" for i in range(8))
    gpus = parse_query_gpu(text)
    assert [g.index for g in gpus] == list(range(8))
    assert describe(gpus) == "8x NVIDIA H200, sm 9.0, 140.4 GiB (139.8 free) each, driver 580.159.04"


@pytest.mark.parametrize("name", ["gb10", "rtxpro6000x2", "h200x8"])
def test_the_test_cluster_profiles_answer_the_exact_query(name, capsys):
    """The harness's nvidia-smi stand-in, asked the exact argv, gives what the parser reads."""
    nvidia_smi = pytest.importorskip("tests.cluster.nvidia_smi")
    profile = FIXTURES / "profiles" / f"{name}.csv"
    if not profile.is_file():
        pytest.skip(f"no {name} profile")
    nvidia_smi.PROFILE = profile.read_text()
    assert nvidia_smi.main(list(QUERY[1:])) == 0
    gpus = parse_query_gpu(capsys.readouterr().out)
    if name == "gb10":
        assert [(g.name, g.compute_capability, g.unified_memory) for g in gpus] == [("NVIDIA GB10", "12.1", True)]
    if name == "rtxpro6000x2":
        assert [(g.compute_capability, g.memory_total_mib) for g in gpus] == [("12.0", 97887)] * 2
    if name == "h200x8":
        assert len(gpus) == 8
        assert (gpus[0].compute_capability, gpus[0].memory_total_mib, gpus[0].memory_free_mib) == ("9.0", 143771, 143156)


def test_unified_memory_is_none_not_zero():
    (g,) = parse_query_gpu("0, NVIDIA GB10, 12.1, [N/A], [N/A], 580.95.05\n")
    assert g.unified_memory and g.memory_total_mib is None and g.memory_free_mib is None
    mem = parse_meminfo((FIXTURES / "h200-meminfo.txt").read_text())
    assert describe([g], mem).startswith("1x NVIDIA GB10, sm 12.1, unified memory: MemAvailable 125.4 of 125.9 GiB")


def test_meminfo():
    mem = parse_meminfo((FIXTURES / "h200-meminfo.txt").read_text())
    assert mem.total_kib == 131981020 and mem.available_kib == 131466512
    full = "MemTotal:       131981020 kB\nMemFree:         1 kB\nMemAvailable:   1048576 kB\nCached: 5 kB\n"
    assert parse_meminfo(full).available_gib == 1.0


def test_meminfo_without_memavailable():
    with pytest.raises(GpuProbeError, match="no MemAvailable"):
        parse_meminfo("MemTotal: 100 kB\nMemFree: 50 kB\n")


@pytest.mark.parametrize("text,match", [
    ("garbage\n", r"line 1: 'garbage' \(expected 6 comma-separated fields"),
    ("0, NVIDIA H200, 9.0, 143771, 580.159.04\n", "expected 6 comma-separated fields"),
    ("0, NVIDIA H200, [N/A], 143771, 143156, 580.159.04\n", r"compute capability '\[N/A\]' is not MAJOR.MINOR"),
    ("x, NVIDIA H200, 9.0, 143771, 143156, 580.159.04\n", "GPU index 'x' is not a number"),
    ("0, NVIDIA H200, 9.0, lots, 143156, 580.159.04\n", "memory.total is 'lots', not a number of MiB"),
])
def test_garbage_is_named(text, match):
    with pytest.raises(GpuProbeError, match=match):
        parse_query_gpu(text)


def test_driver_not_loaded():
    e = query_failure(9, DRIVER_DOWN)
    assert "the NVIDIA driver is not loaded" in e.message
    assert "couldn't communicate with the NVIDIA driver" in e.message
    assert "modprobe nvidia" in e.hint
    with pytest.raises(GpuProbeError, match="driver is not loaded"):
        parse_query_gpu(DRIVER_DOWN)  # the same text with exit 0 is no GPU list either


def test_not_installed():
    e = query_failure(127, "sh: 1: nvidia-smi: not found\n")
    assert e.message == "nvidia-smi not found"
    assert "PATH" in e.hint


def test_other_failure_keeps_first_line():
    e = query_failure(6, "No devices were found\n")
    assert e.message == "nvidia-smi failed (exit 6): No devices were found"


def test_no_gpu_is_an_empty_list():
    assert parse_query_gpu("") == []
    assert describe([]) == "no GPU"
