"""Compare runs: two saved runs point by point, or a run against the ``results:`` a recipe records."""

from __future__ import annotations

from inkctl.bench.metrics import METRICS, PERCENTILES, p_word

# (field, higher is better)
COMPARED = [("request_throughput", True), ("output_throughput", True), ("total_token_throughput", True)]
COMPARED += [(f"{stat}_{m}_ms", False) for m in METRICS for stat in ("mean", "median", *(p_word(p) for p in PERCENTILES))]
COMPARED += [("failed", False)]


def point_key(p: dict) -> tuple:
    return (p.get("max_concurrency"), p.get("request_rate"))


def key_label(key: tuple) -> str:
    c, r = key
    return f"c={c}" if r in (None, "inf") else f"rate={r}" + (f" c={c}" if c else "")


def delta_pct(a, b) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a == 0:
        return None
    return (b - a) / abs(a) * 100.0


def compare_runs(a_points: list[dict], b_points: list[dict]) -> list[dict]:
    """Rows for the points both runs measured: point, metric, A, B, delta %, better (True/False/None)."""
    b_by = {point_key(p): p for p in b_points}
    rows = []
    for pa in a_points:
        pb = b_by.get(point_key(pa))
        if pb is None:
            continue
        for name, higher in COMPARED:
            va, vb = pa.get(name), pb.get(name)
            d = delta_pct(va, vb)
            better = None if d is None or abs(d) < 1e-9 else (d > 0) == higher
            rows.append({"point": key_label(point_key(pa)), "metric": name, "a": va, "b": vb,
                         "delta_pct": d, "better": better})
    return rows


def _from_run(metric: str, concurrency: int | None, points: list[dict]) -> tuple[float | None, str]:
    """The run's value for a recipe measurement name, and how it was derived."""
    candidates = [p for p in points if concurrency is None or p.get("max_concurrency") == concurrency]
    if not candidates:
        return None, f"no point at concurrency {concurrency}"
    p = candidates[0]
    if metric == "decode_tok_s":
        tpot = p.get("median_tpot_ms")
        return (1000.0 / tpot if tpot else None), "1000 / median TPOT (per stream)"
    if metric in ("aggregate_tok_s", "output_tok_s"):
        return p.get("output_throughput"), "output_throughput"
    if metric in ("ttft_ms", "ttft"):
        return p.get("median_ttft_ms"), "median_ttft_ms"
    if metric in p and isinstance(p[metric], (int, float)):
        return p[metric], metric
    return None, "not measured by inkctl bench"


def compare_recipe(results, points: list[dict]) -> list[dict]:
    """Rows for each recipe measurement: what the recipe says, what the run measured, delta %."""
    rows = []
    for m in results:
        got, how = _from_run(m.metric, m.concurrency, points)
        rows.append({"metric": m.metric, "concurrency": m.concurrency, "recipe": m.value, "unit": m.unit,
                     "run": got, "delta_pct": delta_pct(m.value, got) if got is not None else None, "how": how})
    return rows
