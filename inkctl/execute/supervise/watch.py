"""Supervise a deployment after boot: what ``inkctl watch`` (and ``up --watch``) runs.

Each turn (``interval``): every host's connection (keepalives: a lost host within
``ssh.LOST_AFTER_S``), every rank's container (one ``inspect`` per host), the head's health
endpoint, and on unified-memory hosts MemAvailable against the watchdog floor. Beside the
turns, one log stream per rank reads the engine's fatal lines (NCCL errors, CUDA errors,
OOM) as they are printed; a stream that ends (the container exited) wakes the loop at once.

The first failure ends ``Supervisor.run`` with a ``Failure`` (what, where, the other ranks);
the caller reports it, runs the hook, and restarts the whole deployment or exits.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from inkctl.execute.hosts.fanout import background
from inkctl.execute.supervise.ranks import alive, fatal_line, first_down, others_text, read_ranks
from inkctl.execute.hosts.transport import HostError
from inkctl import runtimes

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from inkctl.plan.step import Plan
    from inkctl.recipe.model import Recipe


FATAL_SETTLE_S = 0.5
UNREAD_TURNS = 3  # a host whose connection stands but whose container reads fail this often in a row


def _fatal_text(fatal: list) -> str:
    return "".join(f"\n  rank {rank} on {host} then logged a fatal {kind}: {text}" for host, rank, kind, text in fatal[:3])


@dataclass
class Failure:
    cause: str  # host-lost | host-unanswering | rank-exited | unhealthy | fatal-log | memory | stuck
    message: str
    host: str | None = None
    rank: int | None = None
    detected_s: float = 0.0  # monotonic time it was decided

    def as_dict(self) -> dict:
        return {"event": "failure", "cause": self.cause, "host": self.host, "rank": self.rank, "message": self.message}


@dataclass
class Supervisor:
    plan: Plan
    transports: dict
    recipe: Recipe
    interval: float = 2.0
    unhealthy_after: int = 3  # consecutive failed health probes
    stuck_after_s: float | None = None  # requests waiting and no token this long: stuck (None: not checked)
    stop: threading.Event = field(default_factory=threading.Event)
    on_state: Callable[[str], None] | None = None  # called with a line when the picture changes
    api_key: str | None = field(default=None, repr=False)  # the recipe's api_key: sent with /metrics reads

    def __post_init__(self):
        self.wake = threading.Event()
        self.fatal: list[tuple[str, int, str, str]] = []  # (host, rank, kind, line)
        self._lock = threading.Lock()
        self._bad_health = 0  # failed health probes in a row
        self._unread: dict[str, int] = {}  # failed reads of a host's containers in a row
        from inkctl.execute.supervise.progress import ProgressCheck

        self.progress = ProgressCheck(self.stuck_after_s) if self.stuck_after_s else None

    # -- log streams ------------------------------------------------------------------------
    def _follow(self, c) -> None:
        runtime = self.plan.host(c.host).runtime

        def line(text: str) -> None:
            try:
                kind = fatal_line(text)
            except Exception:  # a checker's bug must not stop following this rank's log
                log.exception("rank %s on %s: the log-line check failed on %r", c.rank, c.host, text[:200])
                return
            if kind:
                with self._lock:
                    self.fatal.append((c.host, c.rank, kind, text.strip()))
                self.wake.set()

        try:
            self.transports[c.host].stream(runtimes.get(runtime).logs(c.name, follow=True, tail=0), line, self.stop)
        except Exception as e:  # the turn reports the host or the container
            log.debug("rank %s on %s: following its log ended: %s", c.rank, c.host, e)
        self.wake.set()

    # -- one turn ---------------------------------------------------------------------------
    def _turn(self, below: dict) -> Failure | None:
        now = time.monotonic()
        for h in self.plan.hosts:
            if not alive(self.transports[h.name]):
                return self._lost(h.name, now)
        with self._lock:
            fatal = list(self.fatal)
        if fatal:
            self.stop.wait(FATAL_SETTLE_S)  # a peer's death makes the others log NCCL errors: see who died
        seen = read_ranks(self.plan, self.transports, lines=20)
        for r in seen:
            if r.state == "unreachable":
                return self._lost(r.host, now)
        unread = {r.host: r for r in seen if r.state == "unread"}
        for h in self.plan.hosts:
            self._unread[h.name] = self._unread.get(h.name, 0) + 1 if h.name in unread else 0
            if self._unread[h.name] >= UNREAD_TURNS:  # it answers keepalives, but not what it runs
                u = unread[h.name]
                return Failure("host-unanswering", f"{h.name} answers, but {self._unread[h.name]} reads in a row of "
                               f"its containers failed: {u.error}" + others_text(seen, h.name), h.name, None, now)
        down = first_down(seen)
        if down is not None:  # the first rank to exit is the cause; its peers' deaths and fatal lines follow
            body = "".join(f"\n    | {x}" for x in down.lines) or "\n    (no log output)"
            return Failure("rank-exited", f"rank {down.rank} on {down.host} ({down.container}) {down.describe()}; its last lines:{body}"
                           + others_text(seen, down.host) + _fatal_text(fatal), down.host, down.rank, now)
        if fatal:
            host, rank, kind, text = fatal[0]
            return Failure("fatal-log", f"rank {rank} on {host} logged a fatal {kind}:\n    | {text}"
                           + others_text(seen, host), host, rank, now)
        return self._memory(below, now) or self._health(now) or self._progress(now)

    def _lost(self, host: str, now: float) -> Failure:
        from inkctl.execute.hosts.ssh import LOST_AFTER_S

        seen = read_ranks(self.plan, {h: t for h, t in self.transports.items() if h != host}, lines=10)
        ranks = ", ".join(f"rank {c.rank}" for c in self.plan.containers if c.host == host)
        return Failure("host-lost", f"{host} lost ({ranks}): no answer for {LOST_AFTER_S:g} s (SSH keepalives "
                       f"unacknowledged)" + others_text(seen, host), host, None, now)

    def _health(self, now: float) -> Failure | None:
        from inkctl.execute.supervise.health import check_once

        url = self.plan.health_url
        if not url:
            return None
        ok, seen = check_once(url, timeout=max(2.0, self.interval))
        self._bad_health = 0 if ok else self._bad_health + 1
        if self._bad_health >= self.unhealthy_after:
            head = self.plan.containers[0]
            return Failure("unhealthy", f"{url} failed {self._bad_health} probes in a row (last: {seen})",
                           head.host, head.rank, now)
        return None

    def _progress(self, now: float) -> Failure | None:
        """The head's /metrics: requests there and no token generated for stuck_after_s."""
        url = self.plan.health_url
        if self.progress is None or not url:
            return None
        import httpx

        from inkctl.execute.supervise.health import tls_context
        from inkctl.execute.supervise.progress import reading

        from inkctl.recipe.engine_registry import spec_of

        metrics = url.rsplit("/", 1)[0] + spec_of(self.recipe.engine.kind).metrics.path
        try:
            r = httpx.get(metrics, timeout=max(2.0, self.interval), trust_env=False, verify=tls_context(),
                          headers={"Authorization": f"Bearer {self.api_key}"} if self.api_key else None)
        except httpx.HTTPError:
            return None  # the health probe reports a server that does not answer
        if r.status_code != 200:
            return None
        text = self.progress.feed(reading(r.text), now)
        if text is None:
            return None
        head = self.plan.containers[0]
        return Failure("stuck", f"rank {head.rank} on {head.host} ({head.name}): "
                       f"{text} ({metrics})", head.host, head.rank, now)

    def _memory(self, below: dict, now: float) -> Failure | None:
        """MemAvailable on unified-memory hosts, against the watchdog floor for N reads in a row."""
        r = self.recipe
        if not (r.hardware.unified_memory and r.watchdog_on):
            return None
        from inkctl.execute.supervise.watchdog import MEMINFO, mem_available_gib

        w = r.watchdog
        for h in self.plan.hosts:
            try:
                gib = mem_available_gib(self.transports[h.name].run(MEMINFO, timeout=5).text())
            except (HostError, ValueError):
                continue
            below[h.name] = below.get(h.name, 0) + 1 if gib < w.mem_available_min_gib else 0
            if below[h.name] >= w.consecutive:
                return Failure("memory", f"MemAvailable {gib:.1f} GiB < {w.mem_available_min_gib:g} GiB for "
                               f"{below[h.name]} reads on {h.name}", h.name, None, now)
        return None

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> Failure | None:
        """Until a failure (returned) or ``stop`` (None)."""
        background(self._follow, self.plan.containers, name="watch", label=lambda c: c.name)
        below: dict = {}
        said = None
        try:
            while not self.stop.is_set():
                failure = self._turn(below)
                if failure is not None:
                    return failure
                text = (f"{len(self.plan.containers)} rank(s) running on {', '.join(h.name for h in self.plan.hosts)}"
                        + (f", {self.plan.health_url} answers" if self.plan.health_url else ""))
                if text != said and self.on_state is not None:
                    self.on_state(text)
                said = text
                self.wake.wait(self.interval)
                self.wake.clear()
            return None
        finally:
            self.stop.set()


@dataclass
class RestartBudget:
    """Backoff between restarts (doubling from ``first_s`` to ``max_s``) and at most
    ``per_hour`` restarts in any hour."""

    per_hour: int = 3
    first_s: float = 5.0
    max_s: float = 300.0
    times: list = field(default_factory=list)

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before the next restart, or None when the hour's budget is spent."""
        self.times = [t for t in self.times if now - t < 3600]
        if len(self.times) >= self.per_hour:
            return None
        return min(self.max_s, self.first_s * 2 ** len(self.times))

    def spend(self, now: float) -> None:
        self.times.append(now)
