"""Checks of hardware.accelerator against the known table (recipe/accelerators.py), and of the
container's GPU exposure against the vendor (ROCm devices for AMD, the NVIDIA runtime otherwise)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.errors import Problem

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe


def _err(path: str, message: str, hint: str | None = None) -> Problem:
    return Problem(message, path=path, hint=hint)


def accelerator_findings(r: "Recipe") -> list[Problem]:
    from inkctl.recipe.accelerators import known_names, lookup

    hw, out = r.hardware, []
    known = lookup(hw.accelerator)
    if known is None:
        if hw.arch is None:
            import difflib  # here: a known accelerator, the usual case, needs no suggestion (start-up)

            near = difflib.get_close_matches(hw.accelerator, known_names(), n=1)
            hint = (f"did you mean {near[0]!r}? " if near else "") + (
                f"Known: {', '.join(known_names())}; or declare this GPU: "
                "vendor and compute_capability (NVIDIA) or gfx_target (AMD)")
            out.append(_err("hardware.accelerator", f"unknown accelerator {hw.accelerator!r} with no "
                            f"{hw.arch_field} to say what it is", hint))
        if hw.vendor == "nvidia" and hw.gfx_target:
            out.append(_err("hardware.gfx_target", "a gfx target is for AMD GPUs", "set vendor: amd, or remove it"))
        if hw.vendor == "amd" and hw.compute_capability:
            out.append(_err("hardware.compute_capability", "a compute capability is for NVIDIA GPUs",
                            "give gfx_target instead (e.g. gfx942)"))
    else:
        if hw.vendor != known.vendor:
            out.append(_err("hardware.vendor", f"{known.name} is made by {known.vendor}, not {hw.vendor}",
                            f"set vendor: {known.vendor}, or remove it"))
        elif hw.arch != known.arch:
            word = "compute capability" if known.vendor == "nvidia" else "gfx target"
            out.append(_err(f"hardware.{known.arch_field}", f"{known.name} has {word} {known.arch}, not {hw.arch}",
                            f"set {known.arch_field}: '{known.arch}'"))
        other = "gfx_target" if known.vendor == "nvidia" else "compute_capability"
        if getattr(hw, other) is not None and hw.vendor == known.vendor:
            out.append(_err(f"hardware.{other}", f"{known.name} is a {known.vendor} GPU: {other} does not apply",
                            f"remove it; {known.arch_field} is '{known.arch}'"))
        if known.unified and not hw.unified_memory:
            out.append(_err("hardware.unified_memory", f"{known.name} has unified memory",
                            "set unified_memory: true (nvidia-smi reports its memory as [N/A])"))
        if not known.unified and hw.unified_memory:
            out.append(_err("hardware.unified_memory", f"{known.name} does not have unified memory",
                            "set unified_memory: false"))
    out += _runtime_findings(r)
    return out


def _runtime_findings(r: "Recipe") -> list[Problem]:
    hw, c = r.hardware, r.container
    if hw.vendor == "amd" and c.gpus in ("all", "cdi"):
        return [_err("container.gpus", f"{hw.accelerator} is an AMD GPU: the NVIDIA runtime's "
                     f"{'--gpus' if c.gpus == 'all' else 'CDI device'} does not reach it",
                     "set container.gpus: rocm (/dev/kfd, /dev/dri, group video)")]
    if hw.vendor == "nvidia" and c.gpus == "rocm":
        return [_err("container.gpus", f"{hw.accelerator} is an NVIDIA GPU: ROCm devices do not reach it",
                     "set container.gpus: all (docker) or cdi (podman)")]
    return []
