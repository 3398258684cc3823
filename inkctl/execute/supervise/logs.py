"""Every rank's container log, merged: by timestamp for a snapshot, as it arrives when following.

A failure on one host shows next to the others' lines: following only the head hides the
worker that died first. ``--tail``/``--since`` map to ``<runtime> logs --tail/--since``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from inkctl.execute.state.deployed import parse_time
from inkctl.execute.hosts.fanout import Background, background, each
from inkctl.execute.hosts.transport import HostError, Transport
from inkctl import runtimes
from inkctl.plan.step import Plan

SNAPSHOT_TIMEOUT_S = 120


@dataclass(frozen=True)
class Source:
    """One rank's container on its host."""

    host: str
    rank: int
    container: str
    runtime: str

    @property
    def prefix(self) -> str:
        return f"{self.host}/{self.rank}"


@dataclass(frozen=True)
class LogLine:
    host: str
    rank: int
    line: str
    ts: datetime | None = None  # the runtime's timestamp (snapshots only)

    def as_dict(self) -> dict:
        return {"host": self.host, "rank": self.rank, "line": self.line}


@dataclass(frozen=True)
class SourceEnded:
    """A followed log ended (the container exited or the host went away)."""

    source: Source
    exit_code: int
    error: str = ""


def sources(plan: Plan, *, rank: int | None = None, host: str | None = None) -> list[Source]:
    runtimes = {h.name: h.runtime for h in plan.hosts}
    out = [Source(c.host, c.rank, c.name, runtimes[c.host]) for c in plan.containers
           if (rank is None or c.rank == rank) and (host is None or c.host == host)]
    return out


def logs_argv(s: Source, *, tail: str | None = None, since: str | None = None, follow: bool = False,
              timestamps: bool = False) -> list[str]:
    return list(runtimes.get(s.runtime).logs(s.container, follow=follow, timestamps=timestamps, tail=tail, since=since))


def split_timestamp(line: str) -> tuple[datetime | None, str]:
    """'2026-11-29T16:31:41.028658581Z text' -> (time, 'text'); a line without one is kept whole."""
    head, sep, rest = line.partition(" ")
    if sep and len(head) >= 20 and head[:4].isdigit() and head[4] == "-" and "T" in head:
        ts = parse_time(head)
        if ts is not None:
            return ts, rest
    return None, line


def _lines(s: Source, data: bytes) -> list[LogLine]:
    out = []
    for raw in data.decode("utf-8", "replace").splitlines():
        ts, text = split_timestamp(raw.rstrip("\r"))
        out.append(LogLine(s.host, s.rank, text, ts))
    return out


def snapshot(transports: dict[str, Transport], srcs: list[Source], *, tail: str | None = None,
             since: str | None = None) -> tuple[list[LogLine], list[str]]:
    """Every source's log at once, merged by the runtime's timestamps; and a message per source that failed."""
    errors: list[str] = []
    per_source: list[list[LogLine]] = []

    def one(s: Source) -> tuple[list[LogLine], str | None]:
        t = transports.get(s.host)
        if t is None:
            return [], f"{s.prefix}: {s.host} is not connected"
        try:
            res = t.run(logs_argv(s, tail=tail, since=since, timestamps=True), timeout=SNAPSHOT_TIMEOUT_S)
        except HostError as e:
            return [], f"{s.prefix}: {e.reason}"
        if not res.ok:
            why = (res.err_text().strip().splitlines() or [f"exit {res.exit_code}"])[-1]
            if "no such container" in why.lower():
                why = f"no container {s.container} (not deployed, or removed)"
            return [], f"{s.prefix}: {why}"
        # stdout and stderr of the container come back apart; the timestamps put them together again
        return _lines(s, res.stdout) + _lines(s, res.stderr), None

    for lines, err in each(one, srcs, name="logs"):
        per_source.append(lines)
        if err:
            errors.append(err)
    return merge(per_source), errors


def merge(per_source: list[list[LogLine]]) -> list[LogLine]:
    """Order by timestamp; a line without one keeps its place after the line before it."""
    keyed = []
    for i, lines in enumerate(per_source):
        last = None
        for j, ln in enumerate(lines):
            last = ln.ts or last
            keyed.append(((last.timestamp() if last else float("-inf")), i, j, ln))
    # lines of one source that carry a timestamp were split into stdout then stderr: sort by time,
    # then by source and position, which keeps each stream's own order
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    return [k[3] for k in keyed]


class Follow:
    """Follow every source at once: a thread per source (Transport.stream), lines merged as they arrive.

    Iterate to get LogLine and SourceEnded items; iteration ends when every source has ended.
    ``stop()`` (e.g. on Ctrl-C) ends every stream and returns once the threads are done.
    """

    def __init__(self, transports: dict[str, Transport], srcs: list[Source], *, tail: str | None = None,
                 since: str | None = None):
        self.transports, self.srcs = transports, srcs
        self.tail, self.since = tail, since
        self.items: queue.Queue = queue.Queue()
        self.stop_event = threading.Event()
        self.threads: Background | None = None

    def start(self) -> "Follow":
        self.threads = background(self._run, self.srcs, name="logs", label=lambda s: s.prefix)
        return self

    def _run(self, s: Source) -> None:
        t = self.transports.get(s.host)
        if t is None:
            self.items.put(SourceEnded(s, -1, f"{s.host} is not connected"))
            return
        argv = logs_argv(s, tail=self.tail, since=self.since, follow=True)
        try:
            code = t.stream(argv, lambda line: self.items.put(LogLine(s.host, s.rank, line)), self.stop_event)
        except HostError as e:
            self.items.put(SourceEnded(s, -1, e.reason))
            return
        except Exception as e:  # a transport bug must not hang the others
            self.items.put(SourceEnded(s, -1, f"{type(e).__name__}: {e}"))
            return
        self.items.put(SourceEnded(s, code))

    def __iter__(self) -> Iterator[LogLine | SourceEnded]:
        return self.until(None)

    def until(self, cancel: threading.Event | None) -> Iterator[LogLine | SourceEnded]:
        """The items as they come, until every source has ended or ``cancel`` is set."""
        left = len(self.srcs)
        while left and not (cancel is not None and cancel.is_set()):
            try:
                item = self.items.get(timeout=0.2)  # short waits keep Ctrl-C responsive
            except queue.Empty:
                continue
            if isinstance(item, SourceEnded):
                left -= 1
            yield item

    def stop(self, timeout: float = 0.8) -> None:
        """Every stream sees the stop at once; all of them together get ``timeout`` seconds (not each:
        Ctrl-C must end ``logs -f`` within a second however many ranks it follows). A stream still
        busy after that is a daemon thread and dies with the process."""
        self.stop_event.set()
        if self.threads is not None:
            self.threads.join(timeout)
