"""``runs`` below the command line: the records that up, down, build, weights, watch and bench
leave on this machine (``inkctl.runlog``), listed newest first, or one read back whole."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inkctl.errors import UsageError


@dataclass
class Runs:
    dir: Path  # where the records are
    runs: list[dict[str, Any]]  # newest first: id, status, seconds, deployment...


@dataclass
class Run:
    info: dict[str, Any]  # run.json: argv, started, status, exit code, error, recipe, deployment...
    events: list[dict[str, Any]]  # events.jsonl, in order


def runs() -> Runs:
    from inkctl import runlog

    return Runs(runlog.runs_dir(), runlog.listing())


def run(ident: str) -> Run:
    """The run ``ident`` names (its id, a unique start of it, or 'last')."""
    from inkctl import runlog

    path = runlog.find(ident)
    if path is None:
        known = [r["id"] for r in runlog.listing()[:3]]
        raise UsageError(f"no run {ident!r} in {runlog.runs_dir()}",
                         hint="inkctl runs lists them" + (f" (newest: {', '.join(known)})" if known else ""))
    return Run(runlog.read(path), runlog.events(path))
