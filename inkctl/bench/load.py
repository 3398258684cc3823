"""The load generator: prompts, then a sweep of points (a max concurrency or a request rate each).

One process, one event loop, one connection per in-flight stream. At a fixed concurrency C,
C workers each send their next request as soon as the last one finished; at a request rate R,
arrivals are a Poisson process (exponential gaps, mean 1/R), optionally capped at C in flight.
Each point starts with a warm-up (one request per concurrent slot, at least one) that opens the
connections and is left out of the numbers.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from inkctl.client.stream import (CHAT_PATH, COMPLETIONS_PATH, Output, auth_headers, chat_body, completion_body, new_pool,
                                 stream)
from inkctl.errors import InkctlError

# ordinary words: with most tokenizers about one token each (plus the space)
VOCAB = ("time people way year day thing world life hand part child eye place work week case point number "
         "group problem fact water room mother area money story month lot right study book job word issue "
         "side kind head house service friend father power hour game line end member law car city name team "
         "minute idea kid body back parent face others level office door health person art war history party").split()


@dataclass(frozen=True)
class Prompt:
    text: str | None  # completions prompt, or the user message
    messages: tuple | None  # chat messages from a JSONL file (raw dicts)
    max_tokens: int
    input_len: int | None = None  # exact when a tokenizer made it, else None (the server's usage counts)


@dataclass
class Point:
    """One measured point: its settings and every request's output."""

    max_concurrency: int | None
    request_rate: float | None  # None: as fast as the concurrency allows (vLLM's "inf")
    outputs: list[Output] = field(default_factory=list)
    duration: float = 0.0
    cpu_s: float = 0.0  # this process's CPU time during the point (the client's cost)
    peak_in_flight: int = 0


def random_prompts(n: int, input_len: int, output_len: int, seed: int = 0, tokenizer=None) -> list[Prompt]:
    """``n`` prompts of ``input_len`` tokens (exact with a tokenizer, else ~one token per word)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        # a distinct head per prompt, so that prefix caching does not turn the sweep into a cache test
        words = [f"{i}:"] + [rng.choice(VOCAB) for _ in range(max(0, input_len - 1))]
        text = " ".join(words)
        exact = None
        if tokenizer is not None:
            ids = tokenizer.encode(text, add_special_tokens=False)[:input_len]
            text = tokenizer.decode(ids)
            exact = len(ids)
        out.append(Prompt(text=text, messages=None, max_tokens=output_len, input_len=exact))
    return out


def file_prompts(path: Path, output_len: int) -> list[Prompt]:
    """JSONL: one object per line with ``prompt`` (a string) or ``messages`` (chat), and optionally
    ``max_tokens``/``output_len``."""
    prompts = []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise InkctlError(f"{path}: cannot read the prompts file: {e.strerror}")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise InkctlError(f"{path}:{n}: not a JSON object: {e}", hint="one JSON object per line")
        if not isinstance(obj, dict) or not (isinstance(obj.get("prompt"), str) or isinstance(obj.get("messages"), list)):
            raise InkctlError(f"{path}:{n}: needs \"prompt\" (a string) or \"messages\" (a list)",
                              hint='e.g. {"prompt": "Explain NCCL in one line", "max_tokens": 64}')
        limit = obj.get("max_tokens", obj.get("output_len", output_len))
        if not isinstance(limit, int) or limit < 1:
            raise InkctlError(f"{path}:{n}: max_tokens must be a positive integer, not {limit!r}")
        msgs = obj.get("messages")
        prompts.append(Prompt(text=obj.get("prompt"), messages=tuple(msgs) if msgs else None, max_tokens=limit))
    if not prompts:
        raise InkctlError(f"{path}: no prompts in the file")
    return prompts


def load_tokenizer(name: str):
    try:
        from transformers import AutoTokenizer  # the 'tokenizer' extra
    except ImportError:
        raise InkctlError(f"--tokenizer {name}: the transformers package is not installed",
                          hint="pip install transformers, or leave --tokenizer out (the server's usage numbers count tokens)")
    try:
        return AutoTokenizer.from_pretrained(name)
    except Exception as e:  # noqa: BLE001 - any failure to load is the user's to fix
        raise InkctlError(f"--tokenizer {name}: cannot load it: {e}")


@dataclass(frozen=True)
class Target:
    base_url: str  # http://host:port
    model: str
    api: str = "chat"  # chat | completions
    api_key: str | None = None
    timeout_s: float = 600.0
    ignore_eos: bool = True

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + (CHAT_PATH if self.api == "chat" else COMPLETIONS_PATH)

    def body(self, p: Prompt) -> dict:
        extra = {"ignore_eos": True} if self.ignore_eos else {}
        if self.api == "chat":
            msgs = list(p.messages) if p.messages else [{"role": "user", "content": p.text or ""}]
            return chat_body(self.model, msgs, p.max_tokens, **extra)
        text = p.text if p.text is not None else "\n".join(str(m.get("content", "")) for m in p.messages or ())
        return completion_body(self.model, text, p.max_tokens, **extra)


async def run_point(target: Target, prompts: list[Prompt], *, concurrency: int | None, rate: float | None,
                    num_prompts: int | None, duration_s: float | None, seed: int = 0, warmup: bool = True,
                    on_request: Callable[[int, int], None] | None = None) -> Point:
    """Measure one point. Stops after ``num_prompts`` requests or, with ``duration_s``, at the
    first request that would start after the duration (requests in flight finish).
    ``on_request(done, failed)`` after each request (progress inside a point)."""
    slots = concurrency or 256
    point = Point(max_concurrency=concurrency, request_rate=rate)
    bodies = [target.body(p) for p in prompts]
    pool = new_pool(target.url)
    headers = auth_headers(target.api_key)
    timeout = target.timeout_s
    try:
        if warmup:
            await asyncio.gather(*(stream(pool, bodies[i % len(bodies)], headers=headers, keep_text=False, timeout_s=timeout)
                                   for i in range(min(slots, concurrency or 1))))
        in_flight = 0
        next_index = 0
        outputs = point.outputs
        rng = random.Random(seed)

        def take() -> int | None:
            nonlocal next_index
            now = time.perf_counter()
            if duration_s is not None and now - t0 >= duration_s:
                return None
            if num_prompts is not None and next_index >= num_prompts:
                return None
            i = next_index
            next_index += 1
            return i

        async def one(i: int) -> None:
            nonlocal in_flight
            in_flight += 1
            point.peak_in_flight = max(point.peak_in_flight, in_flight)
            try:
                outputs.append(await stream(pool, bodies[i % len(bodies)], headers=headers, keep_text=False,
                                            timeout_s=timeout))
            finally:
                in_flight -= 1
            if on_request is not None:
                on_request(len(outputs), sum(1 for o in outputs if not o.ok))

        cpu0 = time.process_time()
        t0 = time.perf_counter()
        if rate is None:
            async def worker() -> None:
                while (i := take()) is not None:
                    await one(i)

            await asyncio.gather(*(worker() for _ in range(slots)))
        else:
            gate = asyncio.Semaphore(slots)
            tasks = []

            async def gated(i: int) -> None:
                async with gate:
                    await one(i)

            while (i := take()) is not None:
                tasks.append(asyncio.ensure_future(gated(i)))
                await asyncio.sleep(rng.expovariate(rate))
            await asyncio.gather(*tasks)
        point.duration = time.perf_counter() - t0
        point.cpu_s = time.process_time() - cpu0
    finally:
        pool.close()
    return point


def sweep(target: Target, prompts: list[Prompt], *, concurrencies: list[int] | None, rates: list[float] | None,
          num_prompts: int | None, duration_s: float | None, on_point=None, seed: int = 0,
          on_request: Callable[[int | None, float | None, int, int], None] | None = None) -> list[Point]:
    """Every point in order; ``on_point(point)`` after each (to print and save as it goes);
    ``on_request(concurrency, rate, done, failed)`` after each request inside a point."""
    points = []
    settings: list[tuple[int | None, float | None]]
    if rates:
        cap = concurrencies[0] if concurrencies else None
        settings = [(cap, r) for r in rates]
    else:
        settings = [(c, None) for c in (concurrencies or [1])]
    for c, r in settings:
        tick = None if on_request is None else (lambda done, failed, c=c, r=r: on_request(c, r, done, failed))
        p = asyncio.run(run_point(target, prompts, concurrency=c, rate=r, num_prompts=num_prompts,
                                  duration_s=duration_s, seed=seed, on_request=tick))
        points.append(p)
        if on_point:
            on_point(p)
    return points
