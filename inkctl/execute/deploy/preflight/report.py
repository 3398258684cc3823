"""What a preflight check reports, and the host it checks: the check names, a result row, the
whole table as an event, the failure, and the stand-in for a host that could not be connected."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from inkctl.errors import InkctlError, UsageError
from inkctl.execute.events import Event
from inkctl.execute.hosts.transport import HostError, Result
from inkctl.plan.step import Plan
from inkctl.recipe.model import Recipe

CHECKS = ("ssh", "runtime", "gpus", "gpu-free", "image", "argv", "paths", "ports", "memory", "network", "fabric", "name", "weights")


OK, WARN, FAIL, SKIPPED, NOT_RUN = "ok", "warn", "fail", "skipped", "not-run"


@dataclass(frozen=True)
class CheckResult:
    host: str
    rank: int | None
    check: str  # one of CHECKS
    status: str  # ok | warn | fail | skipped | not-run
    detail: str
    hint: str | None = None
    data: dict | None = None  # what the check read, for machines (the fabric's rails)
    seconds: float | None = None  # what the check itself took on the host, where it is worth saying (argv)

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def as_dict(self) -> dict:
        out = {"host": self.host, "rank": self.rank, "check": self.check, "status": self.status,
               "detail": self.detail, "hint": self.hint}
        return out if self.data is None else {**out, "data": self.data}


@dataclass(frozen=True)
class PreflightReport(Event):
    """The whole table, emitted once to an event sink (pass or fail)."""

    ok: bool
    results: tuple[CheckResult, ...]

    def as_dict(self) -> dict:
        return {"event": "preflight", "ok": self.ok, "checks": [r.as_dict() for r in self.results]}


class Unreachable:
    """Stands in for a host that could not be connected: the ssh check reports its error."""

    def __init__(self, error: HostError):
        self.name = error.host
        self.error = error

    # every member of the Transport protocol (mypy checks it where one is used as a transport):
    # whatever is asked of the host, the answer is the error that kept it unconnected
    def run(self, argv: Sequence[str], *, timeout: float | None = None,
            stdin: bytes | Iterable[bytes] | None = None) -> Result:
        raise self.error

    def put(self, path: str, content: bytes, mode: int) -> None:
        raise self.error

    def read(self, path: str) -> bytes | None:
        raise self.error

    def remove_dir(self, path: str) -> None:
        raise self.error

    def stream(self, argv: Sequence[str], on_line: Callable[[str], None],
               stop: threading.Event | None = None) -> int:
        raise self.error

    def alive(self) -> bool:
        return False  # never reached

    def close(self) -> None:
        pass


class PreflightFailed(InkctlError):
    """At least one check failed; ``results`` holds every check of every host."""

    def __init__(self, message: str, results: list[CheckResult]):
        super().__init__(message, hint="fix what FAILed, or waive a check knowingly with --skip-check NAME")
        self.results = results


def check_names(skip) -> set[str]:
    skip = set(skip or ())
    unknown = sorted(skip - set(CHECKS))
    if unknown:
        raise UsageError(f"--skip-check {', '.join(unknown)}: no such check", hint="checks: " + ", ".join(CHECKS))
    if "ssh" in skip:
        raise UsageError("--skip-check ssh: every other check runs over ssh; it cannot be waived")
    return skip


@dataclass
class Host:
    recipe: Recipe
    plan: Plan
    name: str
    rank: int
    runtime: str
    skip: set[str]
    image: str
    built: bool  # the image is built by inkctl: no digest pin, no pull
    results: dict[str, CheckResult]
    image_id: str = ""  # the image as the host has it, once the image check found it
    proof_pins: dict[str, dict] = field(default_factory=dict)  # the lock file's argv-proof verdicts

    def put(self, check: str, status: str, detail: str, hint: str | None = None, seconds: float | None = None) -> None:
        if check in self.skip:
            status, detail, hint = SKIPPED, "skipped (--skip-check)" + (f"; would be: {detail}" if status == FAIL else ""), None
        self.results[check] = CheckResult(self.name, self.rank, check, status, detail, hint, seconds=seconds)


def ordered(h: Host) -> list[CheckResult]:
    return [h.results[c] for c in CHECKS if c in h.results]


def last_line(*texts: str) -> str:
    for text in texts:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if lines:
            return lines[-1]
    return ""
