"""Per-point metrics under ``vllm bench serve``'s result names, so its tools load our files.

Names: ``mean_/median_/std_/p{P}_{ttft,tpot,itl,e2el}_ms`` (P as vLLM writes it: 90, 99, 99.9),
``request_throughput``, ``output_throughput``, ``total_token_throughput``, ``request_goodput``.
TPOT is (latency - TTFT) / (output tokens - 1) per request, as vLLM computes it; ITL values are
pooled over all requests. Failed requests count in ``failed`` and in nothing else.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from inkctl.client.stream import Output

METRICS = ("ttft", "tpot", "itl", "e2el")
PERCENTILES = (90.0, 99.0)
SLO_NAMES = ("ttft", "tpot", "e2el")


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_values:
        return 0.0
    k = (len(sorted_values) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def summary(values: Iterable[float]) -> dict[str, float]:
    """mean, median, std (population, like numpy), and the percentiles, of values in seconds -> ms."""
    v = sorted(x * 1000.0 for x in values)
    if not v:
        return {"mean": 0.0, "median": 0.0, "std": 0.0, **{p_word(p): 0.0 for p in PERCENTILES}}
    mean = sum(v) / len(v)
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / len(v))
    return {"mean": mean, "median": percentile(v, 50), "std": std, **{p_word(p): percentile(v, p) for p in PERCENTILES}}


def p_word(p: float) -> str:
    return "p" + (str(int(p)) if int(p) == p else str(p))


def compute(outputs: Sequence[Output], duration_s: float, slos_ms: dict[str, float] | None = None) -> dict:
    """The metric fields of one point. ``slos_ms``: e.g. {"ttft": 500, "tpot": 50} for goodput."""
    good = [o for o in outputs if o.ok]
    ttfts = [o.ttft for o in good]
    tpots = [t for t in (o.tpot for o in good) if t is not None]
    itls = [x for o in good for x in o.itl]
    e2els = [o.latency for o in good]
    total_in = sum(o.prompt_tokens or 0 for o in good)
    total_out = sum(o.output_tokens or 0 for o in good)
    d = max(duration_s, 1e-9)
    result: dict = {
        "duration": duration_s,
        "completed": len(good),
        "failed": len(outputs) - len(good),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(good) / d,
        "request_goodput": None,
        "output_throughput": total_out / d,
        "total_token_throughput": (total_in + total_out) / d,
    }
    if slos_ms:
        result["request_goodput"] = sum(1 for o in good if _meets(o, slos_ms)) / d
    for name, values in zip(METRICS, (ttfts, tpots, itls, e2els)):
        s = summary(values)
        for k, v in s.items():
            result[f"{k}_{name}_ms"] = v
    return result


def _meets(o: Output, slos_ms: dict[str, float]) -> bool:
    got = {"ttft": o.ttft, "tpot": o.tpot or 0.0, "e2el": o.latency}
    return all(got[k] * 1000.0 <= v for k, v in slos_ms.items())


def parse_slos(items: Sequence[str]) -> dict[str, float]:
    """``ttft:500 tpot:50`` (milliseconds), vLLM's --goodput syntax."""
    from inkctl.errors import InkctlError

    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or name not in SLO_NAMES:
            raise InkctlError(f"--goodput {item!r}: expected NAME:MILLISECONDS with NAME one of {', '.join(SLO_NAMES)}",
                              hint="e.g. --goodput ttft:500 --goodput tpot:50")
        try:
            ms = float(value)
        except ValueError:
            ms = -1.0
        if not ms > 0:
            raise InkctlError(f"--goodput {item!r}: {value!r} is not a positive number of milliseconds")
        out[name] = ms
    return out
