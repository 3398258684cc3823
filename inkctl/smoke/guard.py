"""An endpoint guarded by an API key refuses a request that does not carry it (401)."""

from __future__ import annotations

import asyncio

from inkctl.client.stream import chat_body, new_pool, stream


async def _status(url: str, model: str, timeout_s: float) -> tuple[int | None, str]:
    pool = new_pool(url)
    try:
        out = await stream(pool, chat_body(model, [{"role": "user", "content": "Say OK."}], 1), timeout_s=timeout_s)
    finally:
        pool.close()
    return (200 if out.ok else out.status), out.error


def status_without_key(url: str, model: str, timeout_s: float = 30.0) -> tuple[int | None, str]:
    """The HTTP status a completion sent without any Authorization header gets (None: no answer)."""
    return asyncio.run(_status(url, model, timeout_s))
