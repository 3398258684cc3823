"""Smoke prompts: prove the healthy server really answers, and measure how fast.

Health says the HTTP server is up; it does not say the model produces text. Each prompt is
sent as a streaming chat completion, so one request yields latency, time to first token and
decode speed (from the server's usage numbers when it sends them, else from the chunks).
"""

from __future__ import annotations

import json
import time

from inkctl.errors import InkctlError
from inkctl.execute.events import SmokeResult
from inkctl.plan.step import Smoke


class SmokeFailed(InkctlError):
    pass


def run_smoke(step: Smoke) -> tuple[SmokeResult, ...]:
    import httpx

    from inkctl.execute.health import tls_context

    results = []
    with httpx.Client(trust_env=False, verify=tls_context(), timeout=httpx.Timeout(step.timeout_s, connect=10.0)) as http:
        for prompt in step.prompts:
            results.append(_one(http, step, prompt))
    bad = [r for r in results if not r.ok]
    if bad:
        lines = "\n".join(f"  {r.prompt!r}: {r.error}" for r in bad)
        raise SmokeFailed(f"{len(bad)} of {len(results)} smoke prompt(s) failed at {step.url}:\n{lines}",
                          hint="the server is healthy but does not answer chat requests; check model name and engine logs")
    return tuple(results)


def _one(http, step: Smoke, prompt: str) -> SmokeResult:
    import httpx

    body = {"model": step.model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": step.max_tokens, "stream": True, "stream_options": {"include_usage": True},
            "temperature": 0}
    t0 = time.monotonic()
    ttft = None
    parts: list[str] = []
    chunks = 0
    usage_tokens = None
    try:
        with http.stream("POST", step.url, json=body) as r:
            if r.status_code != 200:
                r.read()
                return _fail(prompt, t0, f"HTTP {r.status_code}: {r.text[:300]}")
            for line in r.iter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    msg = json.loads(data)
                except ValueError:
                    continue
                if msg.get("usage") and msg["usage"].get("completion_tokens") is not None:
                    usage_tokens = int(msg["usage"]["completion_tokens"])
                for ch in msg.get("choices") or []:
                    delta = ch.get("delta") or {}
                    text = delta.get("content") or delta.get("reasoning_content") or ""
                    if text:
                        if ttft is None:
                            ttft = time.monotonic() - t0
                        parts.append(text)
                        chunks += 1
    except httpx.HTTPError as e:
        return _fail(prompt, t0, f"{type(e).__name__}: {e}")
    latency = time.monotonic() - t0
    answer = "".join(parts).strip()
    tokens = usage_tokens if usage_tokens is not None else chunks
    decode = latency - (ttft or 0.0)
    tps = round(tokens / decode, 1) if tokens and decode > 0 else None
    if not answer:
        return SmokeResult(prompt=prompt, ok=False, answer="", latency_s=round(latency, 3), ttft_s=ttft,
                           tokens=tokens, tokens_per_s=tps, error="empty answer")
    return SmokeResult(prompt=prompt, ok=True, answer=answer[:200], latency_s=round(latency, 3),
                       ttft_s=None if ttft is None else round(ttft, 3), tokens=tokens, tokens_per_s=tps)


def _fail(prompt: str, t0: float, error: str) -> SmokeResult:
    return SmokeResult(prompt=prompt, ok=False, answer="", latency_s=round(time.monotonic() - t0, 3), ttft_s=None,
                       tokens=0, tokens_per_s=None, error=error)
