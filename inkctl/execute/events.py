"""Typed events: all the progress the api reports, one stream (a ``Sink``) per command.

The runner's (hosts, stages, steps, health, smoke, rollback, the boot record, how it ended),
a Slurm job's sentences (``Said``) and supervision's (``Supervision``: watch, up --watch,
restarts) alike.

The runner never prints. It emits these to a sink; the CLI picks the sink: the live display
(``inkctl.cli.show.live``) for people, or one JSON object per line for machines (``--output json``).
Every event passes through :class:`Scrubber` first: whatever a remote command printed, a
resolved secret value never leaves inkctl.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from inkctl.secret import MASK  # noqa: F401  (re-exported)
from inkctl.scrub import Scrubber  # noqa: F401  (the one scrubber; re-exported)
from inkctl.smoke.result import SmokeResult


@dataclass(frozen=True)
class Event:
    def as_dict(self) -> dict[str, Any]:
        d = {"event": EVENT_NAMES.get(type(self)) or type(self).__name__.lower()}
        d.update(dataclasses.asdict(self))
        return d


@dataclass(frozen=True)
class Info(Event):
    text: str
    level: str = "info"  # info | warning


@dataclass(frozen=True)
class HostConnected(Event):
    host: str
    seconds: float


@dataclass(frozen=True)
class HostKeyAccepted(Event):
    host: str
    name: str  # as written to known_hosts
    key_type: str
    fingerprint: str
    file: str


@dataclass(frozen=True)
class StageStarted(Event):
    index: int  # 1-based
    total: int
    name: str
    description: str
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class StageFinished(Event):
    index: int
    name: str
    seconds: float


@dataclass(frozen=True)
class StepStarted(Event):
    host: str
    rank: int | None
    kind: str
    purpose: str


@dataclass(frozen=True)
class StepFinished(Event):
    host: str
    rank: int | None
    kind: str
    purpose: str
    seconds: float
    detail: str = ""


@dataclass(frozen=True)
class StepFailed(Event):
    host: str
    rank: int | None
    kind: str
    purpose: str
    seconds: float
    message: str


@dataclass(frozen=True)
class RankState:
    """One rank during the health wait."""

    host: str
    rank: int
    container: str
    phase: str  # starting | loading | running | healthy | exited | unknown
    last_line: str = ""
    exit_code: int | None = None


@dataclass(frozen=True)
class HealthProgress(Event):
    url: str
    elapsed: float
    timeout: float
    ranks: tuple[RankState, ...]
    status: str = ""  # last HTTP answer: "connection refused", "503", "200"


@dataclass(frozen=True)
class SmokeFinished(Event):
    url: str
    results: tuple[SmokeResult, ...]


@dataclass(frozen=True)
class RollbackStarted(Event):
    reason: str
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class RollbackFinished(Event):
    removed: tuple[str, ...]  # hosts cleaned
    left: tuple[str, ...]  # "host: what" that could not be removed
    seconds: float


@dataclass(frozen=True)
class BootPhases(Event):
    """Where the boot's time went (execute.bootphases.boot_record), and the phases slower than
    the recipe's previous boot."""

    deployment: str
    record: dict
    slower: tuple[str, ...] = ()
    previous: str = ""  # the previous boot's record, when there was one


@dataclass(frozen=True)
class Finished(Event):
    ok: bool
    deployment: str
    seconds: float
    url: str = ""
    healthy_after_s: float | None = None
    ready_after_s: float | None = None  # from the head container's start to the first streamed answer
    first_ttft_s: float | None = None  # TTFT of that first answer
    message: str = ""
    hint: str = ""
    left_running: tuple[str, ...] = field(default=())  # with --keep-on-failure


@dataclass(frozen=True)
class Said(Event):
    """A line of progress from a backend that reports in sentences (a Slurm job: submitted,
    pending, running, cancelled): ``{"event": source, "text": ...}``, as ``-o json`` wrote it."""

    text: str
    source: str = "slurm"

    def as_dict(self) -> dict[str, Any]:
        return {"event": self.source, "text": self.text}


@dataclass(frozen=True)
class Supervision(Event):
    """What supervision (``watch``, ``up --watch``) saw or did. ``kind``: ok, failure, restart,
    restarted, restart_failed, restart_refused, hook_failed, stopped; ``fields``: cause, host,
    rank, replica. Flat as a dict: ``{"event": kind, "message": ..., **fields}``."""

    kind: str
    message: str
    fields: dict = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"event": self.kind, "message": self.message, **self.fields}


EVENT_NAMES = {
    Info: "info", HostConnected: "host_connected", HostKeyAccepted: "host_key_accepted",
    StageStarted: "stage_started", StageFinished: "stage_finished", StepStarted: "step_started",
    StepFinished: "step_finished", StepFailed: "step_failed", HealthProgress: "health_progress",
    SmokeFinished: "smoke_finished", RollbackStarted: "rollback_started",
    RollbackFinished: "rollback_finished", BootPhases: "boot_phases", Finished: "finished",
    Said: "said", Supervision: "supervision",
}


class Sink(Protocol):
    def emit(self, event: Event) -> None: ...

    def close(self) -> None: ...


class ScrubbingSink:
    """Wraps a sink; every event is scrubbed before the sink sees it. Thread-safe."""

    def __init__(self, inner: Sink, scrub: Scrubber):
        self.inner, self.scrub = inner, scrub
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        with self._lock:
            self.inner.emit(self.scrub(event))

    def close(self) -> None:
        self.inner.close()


class JsonLines:
    """``--output json``: one JSON object per event per line, with a wall-clock timestamp."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout

    def emit(self, event: Event) -> None:
        d = event.as_dict()
        d["ts"] = round(time.time(), 3)
        self.stream.write(json.dumps(d) + "\n")
        self.stream.flush()

    def close(self) -> None:
        self.stream.flush()


class Collect:
    """Keeps every event (a fleet's restart, which reports only how it ended; tests)."""

    def __init__(self):
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]
