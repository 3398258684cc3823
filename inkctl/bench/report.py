"""Saved benchmark runs: one JSON per point in ``vllm bench serve``'s result format, a run
manifest, and llama-benchy's report format on request.

A run is a directory ``<results-dir>/<run-id>/`` holding ``point-c<C>.json`` (or
``point-r<R>.json`` for a request rate) per point and ``run.json`` (settings, provenance and
the list of points). Each point file loads wherever vLLM's results load; inkctl's own fields
sit under the key ``inkctl``.
"""

from __future__ import annotations

import json
import re
import statistics
from typing import Any
from datetime import datetime, timezone
from pathlib import Path

from inkctl import __version__
from inkctl.bench.load import Point
from inkctl.bench.metrics import compute
from inkctl.errors import InkctlError



def vllm_point(point: Point, *, model: str, api: str, num_prompts_asked: int | None, slos_ms: dict | None,
               provenance: dict, when: datetime) -> dict:
    """One point under vLLM's names (``vllm bench serve --save-result``)."""
    metrics = compute(point.outputs, point.duration, slos_ms)
    tokens = metrics["total_output_tokens"]
    result = {
        "date": when.strftime("%Y%m%d-%H%M%S"),
        "backend": "openai-chat" if api == "chat" else "openai",
        "endpoint_type": "openai-chat" if api == "chat" else "openai",
        "label": None,
        "model_id": model,
        "tokenizer_id": provenance.get("tokenizer") or model,
        "num_prompts": len(point.outputs) if num_prompts_asked is None else num_prompts_asked,
        "request_rate": "inf" if point.request_rate is None else point.request_rate,
        "burstiness": 1.0,
        "max_concurrency": point.max_concurrency,
        **metrics,
        "max_concurrent_requests": point.peak_in_flight,
        "inkctl": {
            "version": __version__,
            "client_cpu_s": point.cpu_s,
            "client_cpu_us_per_token": (point.cpu_s / tokens * 1e6) if tokens else None,
            "errors": _error_counts(point),
            **provenance,
        },
    }
    return result


def _error_counts(point: Point) -> dict[str, int]:
    counts: dict[str, int] = {}
    for o in point.outputs:
        if not o.ok:
            key = re.sub(r"[0-9.]+ (s|chunk)", r"N \1", o.error)[:120]
            counts[key] = counts.get(key, 0) + 1
    return counts


def point_name(point: Point) -> str:
    if point.request_rate is not None:
        return f"point-r{point.request_rate:g}" + (f"-c{point.max_concurrency}" if point.max_concurrency else "")
    return f"point-c{point.max_concurrency}"


def new_run_dir(base: Path, model: str, when: datetime) -> Path:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model.split("/")[-1])[:60]
    stem = f"{when.strftime('%Y%m%d-%H%M%S')}-{slug}"
    base.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10000):  # made, not looked for: two benches of one model in one second
        d = base / (stem if n == 1 else f"{stem}-{n}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise OSError(f"no free name for {stem} in {base}")


def write_json(path: Path, data: dict) -> None:
    """Written aside, then renamed: ``results`` run meanwhile reads the old file or the new one."""
    from inkctl.files import replace_text

    replace_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def llama_benchy(points: list[Point], *, model: str, prompt_size: int, response_size: int, when: datetime) -> dict:
    """llama-benchy's report schema: one benchmark per point; throughputs in tok/s, times in ms.

    pp_throughput: prompt tokens / TTFT per request; tg_throughput: tokens after the first /
    (latency - TTFT); ttfr: time to the first streamed response; e2e_ttft: time to the first
    generated token (the same event here: inkctl counts the first chunk that carries output)."""
    def metric(values: list[float]) -> dict:
        return {"mean": statistics.fmean(values) if values else 0.0,
                "std": statistics.pstdev(values) if len(values) > 1 else 0.0, "values": values}

    benchmarks: list[dict[str, Any]] = []
    for p in points:
        good = [o for o in p.outputs if o.ok]
        pp = [o.prompt_tokens / o.ttft for o in good if o.prompt_tokens and o.ttft > 0]
        tg = [((o.output_tokens or 0) - 1) / (o.latency - o.ttft) for o in good
              if (o.output_tokens or 0) > 1 and o.latency > o.ttft]
        ttft_ms = [o.ttft * 1000.0 for o in good]
        benchmarks.append({
            "concurrency": p.max_concurrency or p.peak_in_flight,  # an int either way
            "context_size": 0,
            "prompt_size": prompt_size,
            "response_size": response_size,
            "is_context_prefill_phase": False,
            "pp_throughput": metric(pp),
            "tg_throughput": metric(tg),
            "ttfr": metric(ttft_ms),
            "e2e_ttft": metric(ttft_ms),
        })
    return {"version": f"inkctl {__version__}", "timestamp": when.isoformat(timespec="seconds"),
            "latency_mode": "none", "latency_ms": 0.0, "model": model, "prefix_caching_enabled": False,
            "max_concurrency": max((int(b["concurrency"]) for b in benchmarks), default=0), "benchmarks": benchmarks}


def now() -> datetime:
    return datetime.now(timezone.utc)


# ----------------------------------------------------------------------------- reading runs

def list_runs(base: Path) -> list[dict]:
    """Every run under ``base``, oldest first: id, model, date, points."""
    runs: list[dict] = []
    if not base.is_dir():
        return runs
    for d in sorted(p for p in base.iterdir() if (p / "run.json").is_file()):
        try:
            meta = json.loads((d / "run.json").read_text())
        except ValueError:
            continue
        runs.append({"id": d.name, "path": str(d), "model": meta.get("model"), "date": meta.get("date"),
                     "points": meta.get("points", []), "url": meta.get("url")})
    return runs


def load_run(base: Path, ref: str) -> tuple[Path, dict, list[dict]]:
    """A run by id (or a unique prefix, or a path): its directory, manifest and point results."""
    d = Path(ref)
    if not (d / "run.json").is_file():
        ids = [r["id"] for r in list_runs(base)]
        matches = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
        if len(matches) != 1:
            what = "no run" if not matches else f"{len(matches)} runs ({', '.join(matches[:4])})"
            raise InkctlError(f"{ref!r}: {what} under {base} matches",
                              hint="inkctl results lists them; give a run id, a unique prefix or a directory")
        d = base / matches[0]
    meta = _read_json(d / "run.json")
    points = [_read_json(d / f"{name}.json") for name in meta.get("points", [])]
    return d, meta, points


def _read_json(path: Path) -> dict:
    """A saved result file, or one clear error naming it (cut short by a full disk, edited, gone)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InkctlError(f"{path}: missing from its run", hint="the run is incomplete; bench it again") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InkctlError(f"{path}: not a readable result file ({getattr(e, 'msg', e)}, at char "
                          f"{getattr(e, 'pos', '?')})", hint="the file was cut short or edited; bench the run again") from None
    if not isinstance(data, dict):
        raise InkctlError(f"{path}: not a result file (a JSON object expected)")
    return data
