"""One smoke check's outcome: what the server answered, whether that was right, how fast."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SmokeResult:
    prompt: str
    ok: bool
    answer: str
    latency_s: float
    ttft_s: float | None
    tokens: int
    tokens_per_s: float | None
    error: str = ""
    kind: str = "answer"  # answer | reasoning | tools (inkctl.plan.smoke.SmokeCheck.kind)
    expect: str = ""  # what the answer had to be, in words
