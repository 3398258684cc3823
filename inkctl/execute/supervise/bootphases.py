"""Where a boot's time went: the phases each rank's engine reports in its own log, and
inkctl's own milestones (containers started, port open, health answering, first token).

The engines print one line per phase with its duration; these are their format strings
(vLLM v0.11-v0.28 worker/engine code, SGLang v0.5 model runner), matched as written:

    vLLM    Loading weights took %.2f seconds
            Model loading took %s GiB memory and %.6f seconds   (older: "GiB and")
            Memory profiling takes %.2f seconds
            Compiling a graph for compile range %s takes %.2f s            (a cold compile)
            Directly load the compiled graph(s) for %s from the cache, took %.3f s   (warm)
            torch.compile takes %.2f s in total                  (newer: "took")
            Available KV cache memory: %s GiB
            Graph capturing finished in %.0f secs, took %.2f GiB
            init engine (profile, create kv cache, warmup model) took %.2f seconds
                                                    (newer: "%.2f s (compilation: %.2f s)")
    SGLang  Init torch distributed ends. [elapsed=%.2f s, ]mem usage=%.2f GB
            Load weight begin. avail mem=%.2f GB
            Load weight end. [elapsed=%.2f s, ]type=%s, ...
            Capture cuda graph end. Time elapsed: %.2f s. ...   (nightlies: "Capture ... CUDA
                                                                 graph end. elapsed=%.2f s")
            The server is fired up and ready to roll!

SGLang v0.5.0 prints no elapsed time on "Load weight end."; its log lines carry a timestamp
(``[2026-11-29 16:21:24 TP0]``), and the phase is the time between begin and end. Any other
line costs one substring test.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime

_NUM = r"(\d+(?:\.\d+)?)"

# (key, regex, where the seconds are): in the order a boot goes through them
VLLM = (
    ("weights", re.compile(r"Loading weights took " + _NUM + r" seconds")),
    ("model_load", re.compile(r"Model loading took [\d.]+ GiB (?:memory )?and " + _NUM + r" seconds")),
    ("profile", re.compile(r"Memory profiling takes " + _NUM + r" seconds")),
    ("compile", re.compile(r"torch\.compile (?:takes|took) " + _NUM + r" s in total")),
    ("graphs", re.compile(r"Graph capturing finished in " + _NUM + r" secs")),
    ("init_engine", re.compile(r"init engine \(profile, create kv cache, warmup model\) took " + _NUM
                               + r" (?:s|seconds)")),
)
SGLANG = (
    ("dist_init", re.compile(r"Init torch distributed ends\. elapsed=" + _NUM + r" s")),
    ("weights", re.compile(r"Load weight end\. elapsed=" + _NUM + r" s")),
    ("graphs", re.compile(r"Capture (?:[\w ]+ )?(?:cuda|CUDA) graph end\. (?:Time elapsed: |elapsed=)" + _NUM + r" s")),
)
_VLLM_COMPILED = re.compile(r"Compiling a graph for .* takes " + _NUM + r" s")
_VLLM_CACHED = re.compile(r"Directly load the compiled graph\(s\) for .* from the cache, took " + _NUM + r" s")
_VLLM_KV = re.compile(r"Available KV cache memory: " + _NUM + r" GiB")
_SG_BEGIN = "Load weight begin."
_SG_END = "Load weight end."
_SG_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_KEYWORDS = ("took", "takes", "elapsed", "Load weight", "Available KV", "Compiling a graph", "Directly load")

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
        if not any(k in line for k in _KEYWORDS):
            return
        for key, rx in (VLLM if engine == "vllm" else SGLANG):
            m = rx.search(line)
            if m:
                self.seconds[key] = float(m.group(1))
                return
        if engine == "vllm":
            if _VLLM_CACHED.search(line):
                self.compile_cache = "warm"
            elif _VLLM_COMPILED.search(line):
                self.compile_cache = self.compile_cache or "cold"
            elif m := _VLLM_KV.search(line):
                self.kv_cache_gib = float(m.group(1))
        elif _SG_BEGIN in line:
            self._weights_begin = _stamp(line)
        elif _SG_END in line and "weights" not in self.seconds:
            end = _stamp(line)
            if end is not None and self._weights_begin is not None:
                self.seconds["weights"] = (end - self._weights_begin).total_seconds()

    def as_dict(self) -> dict:
        return {"host": self.host, "rank": self.rank, "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
                "compile_cache": self.compile_cache, "kv_cache_gib": self.kv_cache_gib}


def _stamp(line: str) -> datetime | None:
    m = _SG_STAMP.search(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S") if m else None


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
