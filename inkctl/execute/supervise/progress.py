"""Liveness by progress: an engine whose HTTP server answers while its core is stuck or dead
(vllm#39863: engine dead, /version 200; vllm#11996: /health misses a dead worker).

Read from the head's ``/metrics`` (Prometheus text format): requests waiting or running, and
the generated-token counter. Requests there and no token generated for ``stuck_after_s`` is a
stuck engine. The names are the engines' own (``EngineSpec.metrics``: waiting, running,
generated), every registered engine's, summed (labels such as ``model_name`` or ``engine`` too).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from inkctl.client.prometheus import MetricsError, parse

log = logging.getLogger(__name__)



@functools.cache
def names() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(waiting, running, generated): every registered engine's names, in the registry's order."""
    from inkctl.recipe.engine_registry import specs

    ms = [s.metrics for s in specs()]
    return (tuple(n for m in ms for n in m.waiting), tuple(n for m in ms for n in m.running),
            tuple(n for m in ms for n in m.generated))


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
    waiting, running, generated = names()
    return Reading(waiting=s.total(waiting) or 0.0, running=s.total(running) or 0.0, generated=s.total(generated))


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
