"""The accelerators inkctl knows by name, and how any other one is declared.

A recipe names its accelerator (``hardware.accelerator``, case-insensitive). A known name
brings its vendor, architecture (CUDA compute capability or AMD gfx target), memory per
GPU and whether memory is unified; a recipe may restate these, and validate checks they
agree. Any other GPU is declared by its properties: ``vendor`` and ``compute_capability``
(NVIDIA) or ``gfx_target`` (AMD).

Figures are the vendors' published ones: compute capabilities from NVIDIA's CUDA GPU
list, gfx targets from the ROCm hardware table; memory as the board's nominal GiB (what
``nvidia-smi``/``amd-smi`` report is a little less: preflight allows 5%).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Vendor = Literal["nvidia", "amd"]


@dataclass(frozen=True)
class Accelerator:
    name: str  # canonical, lower case
    vendor: Vendor
    arch: str  # "9.0" (NVIDIA compute capability) or "gfx942" (AMD gfx target)
    memory_gib: float  # per GPU; the unified pool per host where unified
    unified: bool = False
    aliases: tuple[str, ...] = ()
    what: str = ""

    @property
    def arch_field(self) -> str:
        return "compute_capability" if self.vendor == "nvidia" else "gfx_target"


KNOWN: tuple[Accelerator, ...] = (
    Accelerator("a100", "nvidia", "8.0", 80, aliases=("a100-80gb", "a100-sxm4-80gb"), what="NVIDIA A100 80GB"),
    Accelerator("a100-40gb", "nvidia", "8.0", 40, aliases=("a100-sxm4-40gb",), what="NVIDIA A100 40GB"),
    Accelerator("a10g", "nvidia", "8.6", 24, aliases=("a10g-24gb",), what="NVIDIA A10G (AWS G5)"),
    Accelerator("rtx-3090", "nvidia", "8.6", 24, aliases=("geforce-rtx-3090",), what="NVIDIA GeForce RTX 3090"),
    Accelerator("rtx-a6000", "nvidia", "8.6", 48, aliases=("a6000",), what="NVIDIA RTX A6000"),
    Accelerator("l4", "nvidia", "8.9", 24, what="NVIDIA L4"),
    Accelerator("l40", "nvidia", "8.9", 48, what="NVIDIA L40"),
    Accelerator("l40s", "nvidia", "8.9", 48, what="NVIDIA L40S"),
    Accelerator("rtx-4090", "nvidia", "8.9", 24, aliases=("geforce-rtx-4090",), what="NVIDIA GeForce RTX 4090"),
    Accelerator("h100", "nvidia", "9.0", 80, aliases=("h100-80gb", "h100-sxm"), what="NVIDIA H100 80GB"),
    Accelerator("h200", "nvidia", "9.0", 141, what="NVIDIA H200 141GB"),
    Accelerator("h20", "nvidia", "9.0", 96, what="NVIDIA H20 96GB"),
    Accelerator("b200", "nvidia", "10.0", 180, what="NVIDIA B200"),
    Accelerator("gb200", "nvidia", "10.0", 186, what="NVIDIA GB200 (per Blackwell GPU)"),
    Accelerator("dgx-spark-gb10", "nvidia", "12.1", 128, unified=True, aliases=("gb10", "dgx-spark"),
                what="NVIDIA GB10 (DGX Spark), unified memory"),
    Accelerator("rtx-5090", "nvidia", "12.0", 32, aliases=("geforce-rtx-5090",), what="NVIDIA GeForce RTX 5090"),
    Accelerator("rtx-pro-6000-blackwell", "nvidia", "12.0", 96, aliases=("rtx-pro-6000",),
                what="NVIDIA RTX PRO 6000 Blackwell"),
    Accelerator("mi300x", "amd", "gfx942", 192, aliases=("instinct-mi300x",), what="AMD Instinct MI300X"),
    Accelerator("mi325x", "amd", "gfx942", 256, aliases=("instinct-mi325x",), what="AMD Instinct MI325X"),
    Accelerator("mi355x", "amd", "gfx950", 288, aliases=("instinct-mi355x",), what="AMD Instinct MI355X"),
)

_BY_NAME: dict[str, Accelerator] = {}
for _a in KNOWN:
    for _n in (_a.name, *_a.aliases):
        _BY_NAME[_n] = _a


def normalize(name: str) -> str:
    """Lower case, spaces and underscores as dashes; a known alias becomes its canonical name."""
    key = "-".join(name.strip().lower().replace("_", "-").split())
    a = _BY_NAME.get(key)
    return a.name if a else key


def lookup(name: str) -> Accelerator | None:
    return _BY_NAME.get(normalize(name))


def known_names() -> list[str]:
    return [a.name for a in KNOWN]


def table_markdown() -> str:
    """The table for the recipe reference."""
    rows = ["| name | vendor | architecture | memory (GiB) | unified | also accepted |",
            "| --- | --- | --- | --- | --- | --- |"]
    for a in KNOWN:
        rows.append(f"| `{a.name}` | {a.vendor} | {a.arch} | {a.memory_gib:g} | {'yes' if a.unified else 'no'} | "
                    f"{', '.join(f'`{x}`' for x in a.aliases) or '-'} |")
    return "\n".join(rows)
