"""Where a boot's time went: the phases each rank's engine reports in its own log, and
inkctl's own milestones (containers started, port open, health answering, first token).

Each engine prints one line per phase with its duration; the patterns are the engine's own
(``EngineSpec.boot``, in ``inkctl/engines/<kind>.py``), matched as written. Any other line
costs one substring test.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime

from inkctl.recipe.engine_registry import spec_of

LABELS = {
    "container": "container started", "port_open": "port open", "dist_init": "distributed init",
    "weights": "weights loaded", "model_load": "model loaded", "profile": "memory profiling",
    "compile": "torch.compile", "graphs": "CUDA graphs", "init_engine": "engine init (total)",
    "health": "health answering", "first_token": "first token",
}
ORDER = ("container", "port_open", "dist_init", "weights", "model_load", "profile", "compile", "graphs",
         "init_engine", "health", "first_token")
INKCTL_PHASES = ("container", "port_open", "health", "first_token")  # measured by inkctl, not one rank


@dataclass
class RankPhases:
    """What one rank's engine said about its boot."""

    host: str
    rank: int
    seconds: dict[str, float] = field(default_factory=dict)
    compile_cache: str | None = None  # "warm" (loaded from the cache) | "cold" (compiled) | None
    kv_cache_gib: float | None = None
    _weights_begin: datetime | None = None

    def feed(self, line: str, engine: str) -> None:
        boot = spec_of(engine).boot
        if not any(k in line for k in boot.keywords):
            return
        for key, rx in boot.phases:
            m = re.search(rx, line)  # a compiled pattern, or its text (re keeps it compiled)
            if m:
                self.seconds[key] = float(m.group(1))
                return
        boot.feed(self, line)

    def as_dict(self) -> dict:
        return {"host": self.host, "rank": self.rank, "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
                "compile_cache": self.compile_cache, "kv_cache_gib": self.kv_cache_gib}


def read_log(lines, engine: str, host: str = "", rank: int = 0) -> RankPhases:
    p = RankPhases(host, rank)
    for line in lines:
        p.feed(line, engine)
    return p


@dataclass
class PhaseReader:
    """Fed every followed log line of the boot (beside the NCCL transport check): per rank phases."""

    engine: str
    ranks: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, watched, line: str) -> None:
        with self._lock:
            p = self.ranks.get((watched.host, watched.rank))
            if p is None:
                p = self.ranks[(watched.host, watched.rank)] = RankPhases(watched.host, watched.rank)
            p.feed(line, self.engine)
        return None

    def phases(self) -> list[RankPhases]:
        """Each rank's phases as they are now: copies, taken under the lock the followers feed
        under (a log line can still arrive from a stream that has not seen its stop yet)."""
        with self._lock:
            return [replace(self.ranks[k], seconds=dict(self.ranks[k].seconds))
                    for k in sorted(self.ranks, key=lambda k: k[1])]


def boot_record(engine: str, ranks: list[RankPhases], inkctl: dict[str, float]) -> dict:
    """One boot, as JSON: inkctl's milestones (seconds) and each rank's engine phases."""
    return {"engine": engine, "inkctl": {k: round(v, 3) for k, v in inkctl.items() if v is not None},
            "ranks": [r.as_dict() for r in ranks]}


def slowest(record: dict) -> dict[str, float]:
    """Per phase, the slowest rank's seconds (what the boot waited for); inkctl's as they are.
    A record of another shape (an older inkctl, a file edited by hand) gives what it can."""
    def numbers(d) -> dict[str, float]:
        if not isinstance(d, dict):
            return {}
        return {k: float(v) for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}

    out = numbers(record.get("inkctl")) if isinstance(record, dict) else {}
    ranks = record.get("ranks") if isinstance(record, dict) else None
    for r in ranks if isinstance(ranks, list) else []:
        for k, v in numbers(r.get("seconds") if isinstance(r, dict) else None).items():
            out[k] = max(out.get(k, 0.0), v)
    return out


SLOWER_BY = 1.25  # a phase is named as slower than the previous boot beyond this ratio ...
SLOWER_MIN_S = 2.0  # ... and this many seconds


def slower_than(record: dict, previous: dict) -> list[str]:
    """Phases that took longer than in the previous boot of the recipe, in words."""
    now, before = slowest(record), slowest(previous)
    out = []
    for k in ORDER:
        if k in now and k in before and now[k] > before[k] * SLOWER_BY and now[k] - before[k] >= SLOWER_MIN_S:
            out.append(f"{LABELS[k]} took {now[k]:.1f} s, {before[k]:.1f} s in the previous boot")
    return out
