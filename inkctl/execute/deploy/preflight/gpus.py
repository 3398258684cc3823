"""The gpus check (count, architecture, memory per GPU) and the gpu-free check (no other process
holds memory on a GPU the plan gives this host), NVIDIA and AMD."""

from __future__ import annotations

from inkctl.execute.deploy.preflight.memory import meminfo
from inkctl.execute.deploy.preflight.planned import planned_gpus
from inkctl.execute.deploy.preflight.report import FAIL, NOT_RUN, OK, WARN, Host, last_line
from inkctl.execute.state import gpu as gpu_probe
from inkctl.execute.state.probe import Sections


def read_gpus(h: Host, s: Sections) -> list[gpu_probe.Gpu]:
    """The host's GPUs, by the vendor's tool: nvidia-smi, or amd-smi/rocm-smi for AMD."""
    if h.recipe.hardware.vendor == "amd":
        from inkctl.execute.state import gpu_amd

        out, err, rc = s.get("amdgpus")
        tool, _, body = out.partition("\n")
        if rc == 127 and tool.strip() not in ("amd-smi", "rocm-smi"):
            raise gpu_amd.not_found()
        if rc != 0:
            raise gpu_probe.GpuProbeError(f"{tool.strip()} failed (exit {rc}): {last_line(err, body) or 'no output'}",
                                          hint="run on the host: " + " ".join(gpu_amd.AMD_SMI))
        return gpu_amd.parse(tool.strip(), body)
    out, err, rc = s.get("gpus")
    if rc != 0:
        raise gpu_probe.query_failure(rc, out + "\n" + err)
    return gpu_probe.parse_query_gpu(out)


def check_gpus(h: Host, s: Sections) -> None:
    hw = h.recipe.hardware
    try:
        gpus = read_gpus(h, s)
    except gpu_probe.GpuProbeError as e:
        h.put("gpus", FAIL, e.message, e.hint)
        return
    mem = meminfo(s)
    found = gpu_probe.describe(gpus, mem)
    if len(gpus) < hw.gpus_per_host:
        h.put("gpus", FAIL, f"found {found}; the recipe needs {hw.gpus_per_host} GPU(s) per host",
              "run on hosts with enough GPUs, or change hardware.gpus_per_host")
        return
    wrong = [g for g in gpus if g.compute_capability != hw.arch]
    if wrong:
        word = "gfx target" if hw.vendor == "amd" else "compute capability"
        seen = ", ".join(sorted({f"{g.compute_capability} ({g.name})" for g in wrong}))
        h.put("gpus", FAIL, f"found {word} {seen}; the recipe needs {hw.arch} ({hw.accelerator})",
              f"this recipe is for {hw.accelerator}: use one made for this host's GPUs")
        return
    unified = all(g.unified_memory for g in gpus)
    notes = []
    if unified != hw.unified_memory:
        notes.append("the recipe expects unified memory" if hw.unified_memory else "nvidia-smi reports no per-GPU memory ([N/A])")
    if not unified and hw.memory_gib:
        small = [g for g in gpus if (g.memory_total_mib or 0) / gpu_probe.MIB_PER_GIB < 0.95 * hw.memory_gib]
        if small:
            g = small[0]
            h.put("gpus", FAIL, f"GPU {g.index} has {(g.memory_total_mib or 0) / gpu_probe.MIB_PER_GIB:.1f} GiB; the recipe expects "
                  f"{hw.memory_gib:g} GiB per GPU (hardware.memory_gib); found {found}")
            return
    for g in gpus:
        total, free = g.memory_total_mib, g.memory_free_mib
        if total and free is not None and free < 0.9 * total:
            notes.append(f"GPU {g.index}: {(total - free) / gpu_probe.MIB_PER_GIB:.1f} GiB already in use")
    h.put("gpus", WARN if notes else OK, found + ("; " + "; ".join(notes) if notes else ""))


def check_gpu_free(h: Host, s: Sections) -> None:
    """No other process holds memory on a GPU the plan gives this host's ranks: a leftover
    engine or someone else's job makes the boot die of CUDA out-of-memory minutes later."""
    if h.recipe.hardware.vendor == "amd":
        _amd_gpu_free(h, s)
        return
    out, err, rc = s.get("gpuapps")
    if rc == 127:
        h.put("gpu-free", NOT_RUN, "nvidia-smi not found")
        return
    uuids, _, apps = out.partition("@@apps")
    if rc != 0 or not _:
        h.put("gpu-free", WARN, f"nvidia-smi --query-compute-apps failed: {last_line(err, out) or f'exit {rc}'}",
              "run on the host: " + " ".join(gpu_probe.APPS_QUERY))
        return
    holders = gpu_probe.parse_holders(uuids, apps)
    planned = planned_gpus(h.plan, h.name)
    ours = [x for x in holders if planned is None or x.gpu is None or x.gpu in planned]
    which = ("GPU " if len(planned) == 1 else "GPUs ") + ",".join(map(str, planned)) if planned is not None else "any GPU"
    if not ours:
        others = f" ({len(holders)} process(es) on GPUs this plan does not use)" if holders else ""
        h.put("gpu-free", OK, f"no other process holds memory on {which}{others}")
        return
    pids = " ".join(str(x.pid) for x in ours if x.pid is not None)
    h.put("gpu-free", FAIL, f"{len(ours)} process(es) hold GPU memory the plan needs on {h.name}: "
          + "; ".join(x.describe() for x in ours),
          f"stop them (on {h.name}: ps -o pid,user,cmd -p {pids or 'PID'}; a leftover inkctl deployment: "
          "inkctl down), choose free GPUs (the inventory's gpus), or --skip-check gpu-free to boot anyway")


# An AMD GPU with more than this share of its memory in use is taken: amd-smi and rocm-smi list
# no compute processes the way nvidia-smi does, so the memory is the evidence (an idle MI300X
# reports a few hundred MiB of its 192 GiB in use).
AMD_BUSY_SHARE = 0.1


def _amd_gpu_free(h: Host, s: Sections) -> None:
    """gpu-free for AMD hosts: the memory in use on the GPUs the plan gives this host's ranks,
    from ``amd-smi metric --mem-usage`` (or rocm-smi's used VRAM, where it answered instead)."""
    from inkctl.execute.state import gpu_amd

    out, _, rc = s.get("amdgpus")
    tool = out.partition("\n")[0].strip()
    try:
        if tool == "amd-smi":
            mout, merr, mrc = s.get("amdmem")
            if mrc != 0:
                h.put("gpu-free", WARN, f"amd-smi metric --mem-usage failed: {last_line(merr, mout) or f'exit {mrc}'}",
                      "run on the host: " + " ".join(gpu_amd.AMD_SMI_MEM))
                return
            used = gpu_amd.parse_mem_usage(mout)
            source = "amd-smi metric --mem-usage"
        elif tool == "rocm-smi" and rc == 0:
            used = {g.index: (g.memory_total_mib - g.memory_free_mib, g.memory_total_mib)
                    for g in gpu_amd.parse("rocm-smi", out.partition("\n")[2])
                    if g.memory_total_mib and g.memory_free_mib is not None}
            source = "rocm-smi --showmeminfo vram"
        else:
            h.put("gpu-free", NOT_RUN, "no answer from amd-smi or rocm-smi (see gpus)")
            return
    except gpu_probe.GpuProbeError as e:
        h.put("gpu-free", WARN, e.message, e.hint)
        return
    planned = planned_gpus(h.plan, h.name)
    which = ("GPU " if planned is not None and len(planned) == 1 else "GPUs ") + ",".join(map(str, planned)) \
        if planned is not None else "any GPU"
    busy = [(i, u, t) for i, (u, t) in sorted(used.items()) if (planned is None or i in planned) and u > AMD_BUSY_SHARE * t]
    if not busy:
        h.put("gpu-free", OK, f"no GPU memory in use on {which} ({source})")
        return
    gib = gpu_probe.MIB_PER_GIB
    h.put("gpu-free", FAIL, f"{len(busy)} GPU(s) the plan needs on {h.name} already hold memory: "
          + "; ".join(f"GPU {i} {u / gib:.1f} of {t / gib:.1f} GiB in use" for i, u, t in busy) + f" ({source})",
          f"stop what runs there (on {h.name}: amd-smi process), choose free GPUs (the inventory's gpus), "
          "or --skip-check gpu-free to boot anyway")
