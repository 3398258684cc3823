"""The memory check: MemAvailable against the watchdog floor and the weights (unified memory)."""

from __future__ import annotations

from inkctl.execute.deploy.preflight.report import FAIL, OK, WARN, Host, last_line
from inkctl.execute.state import gpu as gpu_probe
from inkctl.execute.state.probe import Sections
from inkctl.recipe.model import Recipe


def meminfo(s: Sections) -> gpu_probe.MemInfo | None:
    out, _, rc = s.get("meminfo")
    try:
        return gpu_probe.parse_meminfo(out) if rc == 0 else None
    except gpu_probe.GpuProbeError:
        return None


def check_memory(h: Host, s: Sections) -> None:
    out, err, rc = s.get("meminfo")
    try:
        mem = gpu_probe.parse_meminfo(out)
    except gpu_probe.GpuProbeError as e:
        h.put("memory", FAIL, e.message if rc == 0 else f"cannot read /proc/meminfo: {last_line(err) or e.message}", e.hint)
        return
    r = h.recipe
    text = f"MemAvailable {mem.available_gib:.1f} of {mem.total_gib:.1f} GiB"
    if not r.hardware.unified_memory:
        h.put("memory", OK, text)
        return
    floor = r.watchdog.mem_available_min_gib
    if mem.available_gib < floor:
        h.put("memory", WARN, f"{text}: below the watchdog threshold of {floor:g} GiB (unified memory); "
              "the watchdog would stop the boot" + _drop_note(r), "free memory on the host (stop other workloads, drop caches)")
        return
    if r.model.weights_gb:
        per_host = r.model.weights_gb * 1e9 / 2**30 / r.hardware.nodes
        if mem.available_gib < per_host + floor:
            h.put("memory", WARN, f"{text}: about {per_host:.1f} GiB of weights per host plus the {floor:g} GiB "
                  "watchdog floor do not fit (unified memory)")
            return
    h.put("memory", OK, f"{text} (unified memory; watchdog floor {floor:g} GiB)" + _drop_note(r))


def _drop_note(r: Recipe) -> str:
    from inkctl.plan import pagecache

    return "; the page cache is dropped before the engines start" if pagecache.wanted(r) else ""
