"""The Prometheus text exposition format (what vLLM's, SGLang's and the routers' /metrics say),
parsed into samples, and the few numbers inkctl reads from them. Pure: no I/O.

``top`` reads a table from two scrapes; a stuck-engine check can read the same numbers.
The names are the engine's own, handed in (``EngineNames``: an engine spec's ``metrics``,
inkctl/engines/<kind>.py); this module knows none.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Protocol

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')



class EngineNames(Protocol):
    """An engine's metric names (several where releases renamed one)."""

    @property
    def running(self) -> tuple[str, ...]: ...

    @property
    def waiting(self) -> tuple[str, ...]: ...

    @property
    def kv_usage(self) -> tuple[str, ...]: ...

    @property
    def generated(self) -> tuple[str, ...]: ...

    @property
    def ttft(self) -> tuple[str, ...]: ...

    @property
    def e2e(self) -> tuple[str, ...]: ...



class MetricsError(ValueError):
    pass


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


@dataclass
class Scrape:
    """One /metrics answer: every sample, and each metric family's declared type."""

    samples: list[Sample] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)

    def values(self, name: str) -> list[Sample]:
        return [s for s in self.samples if s.name == name]

    def total(self, names: tuple[str, ...]) -> float | None:
        """The sum over every label set of the first of ``names`` present (None: none is)."""
        for n in names:
            got = self.values(n)
            if got:
                return sum(s.value for s in got)
        return None

    def has(self, name: str) -> bool:
        return any(s.name == name for s in self.samples)

    def histogram(self, names: tuple[str, ...]) -> "Histogram | None":
        """The first of ``names`` present as a histogram, its label sets added together."""
        for n in names:
            buckets: dict[float, float] = {}
            for s in self.values(n + "_bucket"):
                le = s.label("le")
                if le is None:
                    continue
                b = math.inf if le in ("+Inf", "Inf") else float(le)
                buckets[b] = buckets.get(b, 0.0) + s.value
            if buckets:
                return Histogram(tuple(sorted(buckets.items())), self.total((n + "_sum",)) or 0.0,
                                 self.total((n + "_count",)) or 0.0)
        return None


@dataclass(frozen=True)
class Histogram:
    buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative count), ascending
    sum: float
    count: float

    def minus(self, earlier: "Histogram | None") -> "Histogram":
        """What was observed since ``earlier`` (a counter reset: all of this one)."""
        if earlier is None or earlier.count > self.count:
            return self
        before = dict(earlier.buckets)
        return Histogram(tuple((b, c - before.get(b, 0.0)) for b, c in self.buckets),
                         self.sum - earlier.sum, self.count - earlier.count)

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> float | None:
        """Prometheus's histogram_quantile: linear within the bucket that holds rank q."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        lower, prev = 0.0, 0.0
        for bound, cum in self.buckets:
            if cum >= rank:
                if math.isinf(bound):
                    return lower
                if cum == prev:
                    return bound
                return lower + (bound - lower) * (rank - prev) / (cum - prev)
            lower, prev = bound, cum
        return lower


def parse(text: str) -> Scrape:
    """Every sample of a Prometheus text exposition; a line that is not one raises MetricsError."""
    out = Scrape()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                out.types[parts[2]] = parts[3].strip()
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise MetricsError(f"line {n} is not a Prometheus sample: {line[:80]!r}")
        name, body, value = m.groups()
        labels: list[tuple[str, str]] = []
        if body:
            pos = 0
            while pos < len(body):
                lm = _LABEL.match(body, pos)
                if not lm:
                    raise MetricsError(f"line {n}: labels do not parse: {body[:80]!r}")
                labels.append((lm.group(1), lm.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")))
                pos = lm.end()
        try:
            v = float(value)
        except ValueError:
            raise MetricsError(f"line {n}: {value!r} is not a number") from None
        out.samples.append(Sample(name, tuple(labels), v))
    return out


@dataclass(frozen=True)
class EngineLoad:
    """What one engine says about itself now, and since the previous scrape."""

    running: float | None
    waiting: float | None
    kv_usage: float | None  # 0..1
    gen_tokens_per_s: float | None
    ttft_p50_s: float | None
    ttft_mean_s: float | None
    requests: float | None  # finished requests in all (the e2e latency histogram's count)


def engine_load(names: EngineNames, now: Scrape, earlier: Scrape | None = None, seconds: float = 0.0) -> EngineLoad:
    """The numbers of ``top`` under the engine's ``names``: gauges from ``now``; rates and TTFT
    over the interval since ``earlier`` (``seconds`` apart), or over the engine's life without one."""
    tps = None
    gen = now.total(names.generated)
    if earlier is not None and seconds > 0 and gen is not None:
        before = earlier.total(names.generated)
        if before is not None and gen >= before:
            tps = (gen - before) / seconds
    ttft = now.histogram(names.ttft)
    if ttft is not None and earlier is not None:
        window = ttft.minus(earlier.histogram(names.ttft))
        ttft = window if window.count > 0 else ttft
    e2e = now.histogram(names.e2e)
    return EngineLoad(running=now.total(names.running), waiting=now.total(names.waiting), kv_usage=now.total(names.kv_usage),
                      gen_tokens_per_s=tps, ttft_p50_s=ttft.quantile(0.5) if ttft else None,
                      ttft_mean_s=ttft.mean if ttft else None, requests=e2e.count if e2e else None)
