"""One streaming request to an OpenAI-compatible server, timed chunk by chunk.

The same function serves the smoke checks and the load generator, so a smoke TTFT and a bench
TTFT mean the same thing: seconds from sending the request to the first chunk that carries
generated output (content, reasoning or a tool call). Every later such chunk adds one
inter-token latency (ITL), as ``vllm bench serve`` counts them.

The hot path is kept short on purpose (the client must not be what is measured): HTTP chunks
come from ``inkctl.client.wire`` (asyncio streams, not httpx: see there why), are framed into
events by ``inkctl.client.sse`` (the SSE standard's framing, LF first), one ``json.loads`` per
event, one clock read per chunk.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from inkctl.client.sse import Events
from inkctl.client.wire import Endpoint, Pool, WireError, body_pieces, read_head, request_bytes

try:  # optional: 3-5x faster per stream event where it is installed; the standard library otherwise
    from orjson import loads as _loads  # the 'fast' extra
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"


@dataclass
class Output:
    """What one request gave back, and when."""

    ok: bool = False
    start: float = 0.0  # perf_counter when the request was sent
    ttft: float = 0.0  # s to the first generated chunk
    latency: float = 0.0  # s to the end of the stream
    itl: list[float] = field(default_factory=list)  # s between generated chunks
    prompt_tokens: int | None = None  # from the server's usage
    output_tokens: int | None = None  # from the server's usage, else generated chunks
    chunks: int = 0
    text: str = ""
    reasoning: str = ""
    reasoning_field: str = ""  # which delta field carried it: reasoning_content or reasoning
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    status: int | None = None
    error: str = ""

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first (vLLM's TPOT)."""
        n = self.output_tokens or 0
        return (self.latency - self.ttft) / (n - 1) if self.ok and n > 1 else None


def chat_body(model: str, messages: list[dict], max_tokens: int, **extra: Any) -> dict:
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}}
    body.update(extra)
    return body


def completion_body(model: str, prompt: str, max_tokens: int, **extra: Any) -> dict:
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}}
    body.update(extra)
    return body


async def stream(pool, body: dict, *, headers: dict | None = None, keep_text: bool = True,
                 timeout_s: float = 600.0) -> Output:
    """POST ``body`` (with ``stream: true``) to the pool's endpoint and read the SSE stream to its end.

    Never raises for what a server does (HTTP errors, a dropped stream, a timeout): that is an
    ``Output`` with ``ok=False`` and ``error`` saying what happened.
    """
    out = Output()
    out.start = t0 = time.perf_counter()
    try:
        await asyncio.wait_for(_exchange(pool, body, headers, keep_text, out), timeout_s)
    except asyncio.TimeoutError:
        out.error = f"timed out after {timeout_s:g} s ({out.chunks} chunk(s) in)"
    except WireError as e:
        out.error = f"{e} after {out.chunks} chunk(s)" if out.chunks else str(e)
    out.latency = time.perf_counter() - t0
    if out.output_tokens is None:
        out.output_tokens = out.chunks
    if not out.error and out.chunks == 0:
        out.error = "the stream carried no generated output"
    out.ok = not out.error
    return out


async def _exchange(pool, body: dict, headers: dict | None, keep_text: bool, out: Output) -> None:
    reader, writer = await pool.get()
    reusable = False
    take = _Take(out, keep_text)
    try:
        writer.write(request_bytes(pool.endpoint, body, headers))
        status, head = await read_head(reader)
        out.status = status
        if status != 200:
            raw = b"".join([p async for p in body_pieces(reader, head)])
            out.error = f"HTTP {status}: {_excerpt(raw)}"
        else:
            await _read_events(reader, head, take)
        reusable = head.get("connection", "").lower() != "close"
    finally:
        take.close()
        if reusable:
            pool.put((reader, writer))
        else:
            writer.close()


async def _read_events(reader, head: dict[str, str], take: "_Take") -> None:
    """The stream's events, one clock read per HTTP chunk (the time every event in it arrived)."""
    clock, feed, event = time.perf_counter, Events().feed, take.event
    async for data in body_pieces(reader, head):
        now = clock()
        for payload in feed(data):
            event(payload, now)
    out = take.out
    if not take.done and not out.error:
        out.error = f"the stream ended without [DONE] after {out.chunks} chunk(s)"


class _Take:
    """What one stream's events add up to: text, reasoning, tool calls, usage and the timings."""

    __slots__ = ("out", "keep_text", "text", "reasoning", "tools", "last", "done")

    def __init__(self, out: Output, keep_text: bool):
        self.out, self.keep_text = out, keep_text
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.tools: dict[int, dict] = {}
        self.last = 0.0
        self.done = False

    def event(self, payload: bytes, now: float) -> None:
        out = self.out
        try:
            msg = _loads(payload)
        except ValueError:  # "[DONE]" lands here too: once a stream, never a test per event
            if payload.strip() == b"[DONE]":
                self.done = True
            else:
                out.error = f"a stream event is not JSON: {_excerpt(payload)}"
            return
        if msg.get("error"):
            out.error = f"error in stream: {_excerpt(json.dumps(msg['error']).encode())}"
            return
        usage = msg.get("usage")
        if usage:
            out.prompt_tokens = usage.get("prompt_tokens", out.prompt_tokens)
            out.output_tokens = usage.get("completion_tokens", out.output_tokens)
        choices = msg.get("choices")
        if choices and self.choice(choices[0]):
            if out.chunks == 0:
                out.ttft = now - out.start
            else:
                out.itl.append(now - self.last)
            self.last = now
            out.chunks += 1

    def choice(self, ch: dict) -> bool:
        """Takes in one choice; True when it carried generated output."""
        if ch.get("finish_reason"):
            self.out.finish_reason = ch["finish_reason"]
        delta = ch.get("delta")
        if delta is None:  # completions API
            piece = ch.get("text")
            if piece and self.keep_text:
                self.text.append(piece)
            return bool(piece)
        generated = False
        piece = delta.get("content")
        if piece:
            generated = True
            if self.keep_text:
                self.text.append(piece)
        for name in ("reasoning_content", "reasoning"):
            piece = delta.get(name)
            if piece:
                generated = True
                self.out.reasoning_field = name
                if self.keep_text:
                    self.reasoning.append(piece)
        calls = delta.get("tool_calls")
        if calls:
            generated = True
            _merge_tool_calls(self.tools, calls)
        return generated

    def close(self) -> None:
        out = self.out
        out.text, out.reasoning = "".join(self.text), "".join(self.reasoning)
        out.tool_calls = [self.tools[i] for i in sorted(self.tools)]


def _merge_tool_calls(tools: dict[int, dict], calls: list[dict]) -> None:
    """Tool calls stream in pieces: the name first, the arguments as string fragments."""
    for c in calls:
        i = c.get("index", 0)
        t = tools.setdefault(i, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        if c.get("id"):
            t["id"] = c["id"]
        fn = c.get("function") or {}
        if fn.get("name"):
            t["function"]["name"] += fn["name"]
        if fn.get("arguments"):
            t["function"]["arguments"] += fn["arguments"]


def _excerpt(raw: bytes, n: int = 200) -> str:
    s = raw.decode("utf-8", "replace").strip().replace("\n", " ")
    return s if len(s) <= n else s[:n] + "..."


def new_pool(url: str, connect_timeout_s: float = 30.0) -> Pool:
    return Pool(Endpoint.parse(url), connect_timeout_s)


def auth_headers(api_key: str | None) -> dict | None:
    return {"Authorization": f"Bearer {api_key}"} if api_key else None
