"""Every rank, all the time: what the health wait and ``inkctl watch`` share.

A deployment is healthy only when its head answers AND every rank's container is verified
running; a host whose connection stops answering is lost (the SSH keepalive and
TCP_USER_TIMEOUT in ``execute.hosts.ssh`` make that take at most ``LOST_AFTER_S``). When a host is
lost, its ranks cannot be asked anything, so the failure is told from what the other ranks did:
their state, exit codes and last log lines, read over the connections that still stand.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime

from inkctl.execute.state.deployed import parse_inspect_lines
from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import HostError
from inkctl import runtimes

log = logging.getLogger(__name__)
QUICK_S = 5.0  # a question to a host that should answer at once (states, last lines)


def alive(transport) -> bool:
    """Whether a host's connection stands (``Transport.alive``: keepalives acknowledged)."""
    return transport.alive()


def lost_hosts(transports: dict, hosts) -> list[str]:
    return [h for h in hosts if h in transports and not alive(transports[h])]


@dataclass
class RankSeen:
    """One rank as last read: its container's state and exit code, and its last log lines."""

    host: str
    rank: int
    container: str
    state: str = "unknown"  # running | exited | missing | unreachable | unread (a read failed) | ...
    exit_code: int | None = None
    lines: tuple[str, ...] = ()
    finished: datetime | None = None  # the runtime's FinishedAt: the first rank to die is the cause
    error: str = ""  # why the read failed (state unread)

    def describe(self) -> str:
        if self.state == "unreachable":
            return "unknown (its host is unreachable)"
        if self.state == "unread":
            return f"unknown (reading it failed: {self.error})"
        if self.state == "exited":
            return f"exited with code {self.exit_code}" if self.exit_code is not None else "exited"
        if self.state == "missing":
            return "container gone"
        return self.state


def read_ranks(plan, transports: dict, *, lines: int = 0, timeout: float = QUICK_S) -> list[RankSeen]:
    """Every rank's state (one ``inspect`` per host, in parallel) and, with ``lines``, the last
    lines of the logs of ranks that are not running. A lost host's ranks read as unreachable."""
    by_host: dict[str, list] = {}
    for c in plan.containers:
        by_host.setdefault(c.host, []).append(c)

    def one(host: str) -> list[RankSeen]:
        cs = by_host[host]
        out = [RankSeen(c.host, c.rank, c.name) for c in cs]
        t = transports.get(host)
        if t is None or not alive(t):
            for r in out:
                r.state = "unreachable"
            return out
        runtime = plan.host(host).runtime
        try:
            res = t.run(runtimes.get(runtime).inspect(*[c.name for c in cs]), timeout=timeout)
        except HostError as e:
            # a connection that stands is not a lost host: one question failed (a channel refused, a
            # command killed, a runtime busy for a moment); the caller asks again next turn
            lost = not alive(t)
            for r in out:
                r.state = "unreachable" if lost else "unread"
                r.error = "" if lost else e.message
            return out
        seen = parse_inspect_lines(host, res.text())
        for r in out:
            c = seen.get(r.container)
            status = c.state if c is not None else "missing"
            r.finished = c.finished_at if c is not None else None
            r.state = {"dead": "exited", "stopped": "exited"}.get(status, status)
            r.exit_code = c.exit_code if c is not None and r.state == "exited" else None
            if lines and r.state != "running":
                try:
                    lg = t.run(runtimes.get(runtime).logs(r.container, tail=lines), timeout=timeout)
                    r.lines = tuple((lg.text() + lg.err_text()).splitlines()[-lines:])
                except HostError as e:  # the state is reported; the lines are a bonus
                    log.debug("%s: the last lines of %s: %s", e.host, r.container, e.reason)
        return out

    hosts = list(by_host)
    found = each(one, hosts, name="ranks")
    return sorted((r for rs in found for r in rs), key=lambda r: r.rank)


def others_text(ranks: list[RankSeen], skip_host: str, last: int = 5) -> str:
    """What the ranks on other hosts did: one line each, and the last lines of those that ended."""
    parts = []
    for r in ranks:
        if r.host == skip_host:
            continue
        parts.append(f"\n  rank {r.rank} ({r.host}, {r.container}): {r.describe()}")
        for line in r.lines[-last:]:
            parts.append(f"\n    | {line}")
    return "".join(parts)


class HostLost(HostError):
    """A host stopped answering; names its ranks and what the others did."""

    def __init__(self, host: str, ranks: list[int], why: str, others: str, when: str = ""):
        which = ", ".join(f"rank {r}" for r in ranks) or "no rank"
        super().__init__(host, "unreachable", f"host lost{when} ({which}): {why}{others}",
                         hint="check the host and its network; its containers could not be told to stop")
        self.ranks = ranks


def lost_error(plan, transports: dict, host: str, why: str, *, when: str = "") -> HostLost:
    ranks = [c.rank for c in plan.containers if c.host == host]
    seen = read_ranks(plan, {h: t for h, t in transports.items() if h != host}, lines=10)
    others = others_text(seen, host)
    return HostLost(host, ranks, why, ("\n  the other ranks:" + others) if others else "", when)


# ------------------------------------------------------------------ fatal engine lines

FATAL_LINES = (
    ("NCCL error", re.compile(r"NCCL (?:error|WARN .*(?:timeout|Timeout|failed|abort))|ncclInternalError|"
                              r"ncclSystemError|ncclRemoteError|DistBackendError|Watchdog caught collective operation timeout")),
    ("CUDA error", re.compile(r"CUDA error|cudaErrorIllegalAddress|CUBLAS_STATUS_\w+|an illegal memory access")),
    ("out of memory", re.compile(r"CUDA out of memory|OutOfMemoryError|torch\.OutOfMemoryError|Killed process \d+|oom-kill")),
    ("engine died", re.compile(r"EngineCore encountered a fatal error|EngineDeadError|Scheduler hit an exception")),
)


def fatal_line(line: str) -> str | None:
    """The kind of fatal engine condition a log line reports (None for an ordinary line)."""
    for kind, rx in FATAL_LINES:
        if rx.search(line):
            return kind
    return None


def first_down(ranks: list[RankSeen]) -> RankSeen | None:
    """Of the ranks not running, the one that stopped first (its peers die of its death)."""
    def when(r: RankSeen) -> float:
        return r.finished.timestamp() if r.finished is not None else float("inf")

    down = [r for r in ranks if r.state not in ("running", "unread")]
    return min(down, key=lambda r: (r.state == "missing", when(r), r.rank)) if down else None
