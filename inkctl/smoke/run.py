"""Send the smoke checks to an OpenAI-compatible server, one at a time, streaming.

Each check is one streamed chat completion, so it also measures time to first token and the
decode rate (generated tokens after the first over the time after the first)."""

from __future__ import annotations

import asyncio
import json

from inkctl.client.stream import Output, auth_headers, chat_body, new_pool, stream
from inkctl.smoke.result import SmokeResult
from inkctl.plan.smoke import SmokeCheck
from inkctl.smoke.verdict import verdict


def body_for(check: SmokeCheck, model: str) -> dict:
    extra: dict = {"temperature": 0}
    if check.tool:
        extra.update(tools=[json.loads(check.tool)], tool_choice="auto")
    return chat_body(model, [{"role": "user", "content": check.prompt}], check.max_tokens, **extra)


def result_of(check: SmokeCheck, out: Output) -> SmokeResult:
    why = verdict(check, out)
    n = out.output_tokens or 0
    decode = out.latency - out.ttft
    # a tool call comes back in one or two chunks: no decode rate to speak of
    tps = round((n - 1) / decode, 1) if out.ok and n > 1 and decode > 0.01 and check.kind != "tools" else None
    answer = out.text.strip()
    if check.kind == "tools" and out.tool_calls:
        fn = out.tool_calls[0].get("function") or {}
        answer = f"{fn.get('name')}({fn.get('arguments', '')})"
    elif check.kind == "reasoning":
        answer = (out.reasoning_field + ": " if out.reasoning_field else "") + " ".join(out.reasoning.split())
    return SmokeResult(prompt=check.prompt, ok=not why, answer=answer[:200], latency_s=round(out.latency, 3),
                       ttft_s=round(out.ttft, 3) if out.ok else None, tokens=n, tokens_per_s=tps, error=why,
                       kind=check.kind, expect=check.expectation)


async def _run(url: str, model: str, checks, timeout_s: float, api_key: str | None) -> list[SmokeResult]:
    pool = new_pool(url)
    try:
        results = []
        for check in checks:
            out = await stream(pool, body_for(check, model), headers=auth_headers(api_key), timeout_s=timeout_s)
            results.append(result_of(check, out))
        return results
    finally:
        pool.close()


def run_checks(url: str, model: str, checks, *, timeout_s: float, api_key: str | None = None) -> list[SmokeResult]:
    """``url``: the chat completions URL. Never raises for what the server answers."""
    return asyncio.run(_run(url, model, checks, timeout_s, api_key))
