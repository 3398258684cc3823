"""What a host's AMD GPUs are, from ``amd-smi`` (ROCm 6+) or, where it is missing, ``rocm-smi``.

Pure parsers of the tools' JSON answers; the remote call is a section of the one launch probe
(``probe.HOST_PROBE``), which prints the name of the tool that answered on the first line.
The architecture is the gfx target (``gfx942``), compared with ``hardware.gfx_target``;
it travels in ``Gpu.compute_capability`` so that preflight compares one field for both vendors.

Formats, as the tools print them:
- ``amd-smi static --asic --vram --json``: one object per GPU (``gpu``, ``asic.market_name``,
  ``asic.target_graphics_version``, ``vram.size`` as ``{"value": N, "unit": "MB"}``); amd-smi
  before 25.x prints a bare list, later ones wrap it as ``{"gpu_data": [...]}``.
- ``rocm-smi --showproductname --showmeminfo vram --json``: an object keyed ``card0``, ``card1``
  ... with ``Card Series``, ``GFX Version``, ``VRAM Total Memory (B)`` and
  ``VRAM Total Used Memory (B)`` as strings; a ``system`` key may sit beside the cards.
- ``amd-smi metric --mem-usage --json``: the memory in use (``amd-smi static`` has none), one
  object per GPU (``gpu``, ``mem_usage.total_vram``/``used_vram`` as ``{"value": N, "unit": "MB"}``),
  bare or wrapped in ``gpu_data`` as ``static`` is. Preflight's gpu-free check reads it (or
  rocm-smi's used VRAM) for AMD hosts, where nvidia-smi's list of compute processes does not exist.
"""

from __future__ import annotations

import json
import re

from inkctl.execute.state.gpu import Gpu, GpuProbeError

AMD_SMI = ("amd-smi", "static", "--asic", "--vram", "--json")
ROCM_SMI = ("rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json")
AMD_SMI_MEM = ("amd-smi", "metric", "--mem-usage", "--json")
_UNIT_MIB = {"B": 1 / 2**20, "KB": 1 / 1024, "MB": 1, "MIB": 1, "GB": 1024, "GIB": 1024}


def parse(tool: str, text: str) -> list[Gpu]:
    """The answer of ``tool`` ('amd-smi' or 'rocm-smi'); raises GpuProbeError saying what is wrong."""
    try:
        doc = json.loads(text)
    except ValueError:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")
        raise GpuProbeError(f"{tool} did not answer JSON: {first[:100]!r}",
                            hint="run on the host: " + " ".join(AMD_SMI if tool == "amd-smi" else ROCM_SMI)) from None
    return parse_amd_smi(doc) if tool == "amd-smi" else parse_rocm_smi(doc)


def parse_amd_smi(doc) -> list[Gpu]:
    items = doc.get("gpu_data") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise GpuProbeError("amd-smi static answered neither a list of GPUs nor {'gpu_data': [...]}")
    gpus = []
    for n, item in enumerate(items):
        asic, vram = item.get("asic") or {}, item.get("vram") or {}
        arch = str(asic.get("target_graphics_version", "")).split(":", 1)[0].lower()
        if not arch.startswith("gfx"):
            raise GpuProbeError(f"amd-smi: GPU {item.get('gpu', n)} has no gfx target ({arch or 'missing'!r})",
                                hint="a ROCm older than 6.0 does not report it; upgrade ROCm")
        gpus.append(Gpu(index=int(item.get("gpu", n)), name=str(asic.get("market_name", "AMD GPU")),
                        compute_capability=arch, memory_total_mib=_size_mib(vram.get("size")),
                        memory_free_mib=None, driver=str((item.get("driver") or {}).get("version", "-"))))
    return gpus


def parse_rocm_smi(doc) -> list[Gpu]:
    if not isinstance(doc, dict):
        raise GpuProbeError("rocm-smi answered no object of cards")
    gpus = []
    for key in sorted((k for k in doc if re.fullmatch(r"card\d+", k)), key=lambda k: int(k[4:])):
        card = doc[key]
        arch = str(card.get("GFX Version", "")).lower()
        if not arch.startswith("gfx"):
            raise GpuProbeError(f"rocm-smi: {key} has no GFX Version", hint="a ROCm older than 6.0 does not report it")
        total, used = _bytes_mib(card.get("VRAM Total Memory (B)")), _bytes_mib(card.get("VRAM Total Used Memory (B)"))
        gpus.append(Gpu(index=int(key[4:]), name=str(card.get("Card Series") or card.get("Device Name") or "AMD GPU"),
                        compute_capability=arch, memory_total_mib=total,
                        memory_free_mib=None if total is None or used is None else total - used,
                        driver=str((doc.get("system") or {}).get("Driver version", "-"))))
    return gpus


def parse_mem_usage(text: str) -> dict[int, tuple[int, int]]:
    """``amd-smi metric --mem-usage --json`` -> {GPU index: (MiB in use, MiB in all)}; GPUs
    whose figures are 'N/A' are left out."""
    try:
        doc = json.loads(text)
    except ValueError:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")
        raise GpuProbeError(f"amd-smi metric did not answer JSON: {first[:100]!r}",
                            hint="run on the host: " + " ".join(AMD_SMI_MEM)) from None
    items = doc.get("gpu_data") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise GpuProbeError("amd-smi metric answered neither a list of GPUs nor {'gpu_data': [...]}")
    out: dict[int, tuple[int, int]] = {}
    for n, item in enumerate(items):
        mem = item.get("mem_usage") if isinstance(item, dict) else None
        if not isinstance(mem, dict):
            continue
        used, total = _size_mib(mem.get("used_vram")), _size_mib(mem.get("total_vram"))
        if used is not None and total:
            out[int(item.get("gpu", n))] = (used, total)
    return out


def _size_mib(size) -> int | None:
    if isinstance(size, dict):
        value, unit = size.get("value"), str(size.get("unit", "MB")).upper()
    else:
        value, unit = size, "MB"
    if not isinstance(value, (int, float)) or unit not in _UNIT_MIB:
        return None
    return int(value * _UNIT_MIB[unit])


def _bytes_mib(value) -> int | None:
    return int(int(value) / 2**20) if isinstance(value, str) and value.isdigit() else None


def not_found() -> GpuProbeError:
    return GpuProbeError("neither amd-smi nor rocm-smi found",
                         hint="install ROCm's amd-smi on the host, or put it on the SSH user's PATH")
