"""Readiness means it answers: after health, one real completion must stream back.

Some engines answer /health before they can serve (SGLang's warm-up request, a vLLM API
server whose engine core is still compiling), so a 503 or a refused connection is retried
until the deadline; any other failure is final and says what came back."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from inkctl.client.stream import chat_body, new_pool, stream
from inkctl.errors import InkctlError

PROMPT = "Say OK."
RETRY_S = 0.5


@dataclass(frozen=True)
class FirstAnswer:
    after_s: float  # from the end of the health wait to the end of the first answer
    ttft_s: float  # TTFT of the request that answered
    tries: int
    first_token_s: float = 0.0  # from the end of the health wait to that request's first token


class NotAnswering(InkctlError):
    pass


def _retryable(status: int | None, error: str) -> bool:
    return status in (502, 503, 504) or (status is None and ("connect" in error or "closed" in error))


async def _first(url: str, model: str, timeout_s: float, api_key: str | None) -> FirstAnswer:
    t0 = time.monotonic()
    tries = 0
    pool = new_pool(url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    try:
        while True:
            tries += 1
            left = max(1.0, timeout_s - (time.monotonic() - t0))
            sent = time.monotonic()
            out = await stream(pool, chat_body(model, [{"role": "user", "content": PROMPT}], 8), headers=headers,
                               timeout_s=left)
            if out.ok:
                return FirstAnswer(after_s=time.monotonic() - t0, ttft_s=out.ttft, tries=tries,
                                   first_token_s=sent - t0 + out.ttft)
            if not _retryable(out.status, out.error) or time.monotonic() - t0 >= timeout_s:
                raise NotAnswering(f"{url}: health passed but the first completion failed after {tries} "
                                   f"attempt(s): {out.error}",
                                   hint="the server is up but does not answer chat requests: check the model "
                                        "name (--served-model-name) and the engine's log")
            await asyncio.sleep(RETRY_S)
    finally:
        pool.close()


def first_answer(url: str, model: str, timeout_s: float, api_key: str | None = None) -> FirstAnswer:
    return asyncio.run(_first(url, model, timeout_s, api_key))


# the stage that starts the head's container (docker/podman run --detach returns once it runs)
HEAD_START_STAGES = ("launch", "launch-head", "ray-head")


def ready_after_s(stage_order: list[str], stage_seconds: dict[str, float]) -> float | None:
    """Seconds from the head container's start to the first answer: every stage after the one that
    started it, up to and including the health wait (which ends with the first answer)."""
    try:
        start = next(i for i, n in enumerate(stage_order) if n in HEAD_START_STAGES)
        end = stage_order.index("health")
    except (StopIteration, ValueError):
        return None
    if any(n not in stage_seconds for n in stage_order[start + 1:end + 1]):
        return None
    return sum(stage_seconds[n] for n in stage_order[start + 1:end + 1])
