"""Liveness by progress: an engine whose HTTP server answers while its core is stuck or dead
(vllm#39863: engine dead, /version 200; vllm#11996: /health misses a dead worker).

Read from the head's ``/metrics`` (Prometheus text format): requests waiting or running, and
the generated-token counter. Requests there and no token generated for ``stuck_after_s`` is a
stuck engine. The engines' own metric names:

    vLLM    vllm:num_requests_waiting  vllm:num_requests_running  vllm:generation_tokens_total
    SGLang  sglang:num_queue_reqs      sglang:num_running_reqs    sglang:generation_tokens_total

(labels such as ``model_name`` or ``engine`` are summed over).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from inkctl.client.prometheus import MetricsError, parse

log = logging.getLogger(__name__)

WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "sglang:num_requests_waiting")
RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs", "sglang:num_requests_running")
GENERATED = ("vllm:generation_tokens_total", "sglang:generation_tokens_total")

@dataclass(frozen=True)
class Reading:
    waiting: float
    running: float
    generated: float | None  # None: the engine exports no token counter


def reading(text: str) -> Reading:
    """What one /metrics answer says of progress, read with the one Prometheus parser
    (inkctl/client/prometheus.py); an answer that does not parse says nothing (generated None)."""
    try:
        s = parse(text)
    except MetricsError as e:
        log.debug("metrics not readable for the progress check: %s", e)
        return Reading(waiting=0.0, running=0.0, generated=None)
    return Reading(waiting=s.total(WAITING) or 0.0, running=s.total(RUNNING) or 0.0,
                   generated=s.total(GENERATED))


@dataclass
class ProgressCheck:
    """Fed one Reading per turn; ``stuck`` says since when requests have waited with no token."""

    stuck_after_s: float
    _since: float | None = None
    _last: float | None = None

    def feed(self, r: Reading, now: float) -> str | None:
        """The failure text once requests have been there with no new token for stuck_after_s."""
        if r.generated is None:
            return None
        busy = r.waiting + r.running > 0
        moved = self._last is None or r.generated != self._last
        self._last = r.generated
        if not busy:
            self._since = None
            return None
        if moved or self._since is None:  # the clock starts at the last token seen (or now)
            self._since = now
            return None
        if now - self._since >= self.stuck_after_s:
            return (f"no token generated for {now - self._since:.0f} s while {r.waiting:g} request(s) wait and "
                    f"{r.running:g} run (generation_tokens_total stays at {r.generated:g}): the engine core is "
                    "stuck or dead although its HTTP server answers")
        return None
