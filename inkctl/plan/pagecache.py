"""Free the page cache on unified-memory hosts before the engines start.

On a GB10 (DGX Spark) the GPU allocates from the same memory as the page cache; the kernel does
not hand cached pages back fast enough while a model loads, so a boot that would fit dies short
of memory. Writing 1 to /proc/sys/vm/drop_caches after a ``sync`` frees clean cached pages
(never dirty data). It needs root: without it the step says so and the launch goes on.

One fixed script per host (no value is interpolated): MemAvailable before, sync, the drop,
MemAvailable after. Its answer is read by ``parse`` into what the deploy reports.
"""

from __future__ import annotations

from dataclasses import dataclass

from inkctl.plan.step import Run, Stage
from inkctl.recipe.model import Recipe

SCRIPT = "; ".join([  # one line: the plan prints it as it runs
    "grep '^MemAvailable:' /proc/meminfo",
    "sync",
    "if { echo 1 > /proc/sys/vm/drop_caches; } 2>/dev/null; then echo dropped; else echo denied; fi",
    "grep '^MemAvailable:' /proc/meminfo",
])
NAME = "inkctl-drop-page-cache"
KIND = "page-cache"


def wanted(recipe: Recipe) -> bool:
    return recipe.hardware.unified_memory and recipe.watchdog.drop_page_cache


def stage(recipe: Recipe, hosts) -> Stage | None:
    """The stage that frees the page cache on every host ((name, rank) pairs), or None."""
    if not wanted(recipe):
        return None
    return Stage(KIND, "free the page cache on every unified-memory host before the engines load",
                 tuple(Run(host=name, rank=rank, purpose="drop the page cache (sync; vm.drop_caches=1)",
                           argv=("sh", "-c", SCRIPT, NAME), kind=KIND) for name, rank in hosts))


@dataclass(frozen=True)
class Dropped:
    """What one host's drop did: MemAvailable before and after (KiB), and whether it was allowed."""

    before_kib: int | None
    after_kib: int | None
    allowed: bool

    @property
    def freed_gib(self) -> float | None:
        if self.before_kib is None or self.after_kib is None:
            return None
        return max(0, self.after_kib - self.before_kib) / 2**20

    def describe(self, host: str) -> str:
        if not self.allowed:
            return (f"{host}: could not drop the page cache (writing /proc/sys/vm/drop_caches needs root); "
                    "the engines load with it in place")
        if self.before_kib is None or self.after_kib is None or self.freed_gib is None:
            return f"{host}: page cache dropped"
        return (f"{host}: page cache dropped: MemAvailable {self.before_kib / 2**20:.1f} -> "
                f"{self.after_kib / 2**20:.1f} GiB (freed {self.freed_gib:.1f} GiB)")


def parse(text: str) -> Dropped:
    mem = [int(line.split()[1]) for line in text.splitlines()
           if line.startswith("MemAvailable:") and len(line.split()) > 1 and line.split()[1].isdigit()]
    return Dropped(mem[0] if mem else None, mem[1] if len(mem) > 1 else None, "dropped" in text.split())
