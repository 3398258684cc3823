"""``inkctl runs``: the records that up, down, build, weights, watch and bench leave
(``inkctl.api.runs``, which reads ``inkctl.runlog``). Thin: flags -> the api -> print."""

from __future__ import annotations

import json
import shlex
import textwrap
from typing import Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import OutputOpt, output_format

WIDTH = 80
SHOWN_EVENTS = 12


@app.command()
def runs(
    run: Optional[str] = typer.Argument(None, metavar="[RUN]", help="A run's id (or a unique start of it, or 'last'): show that run."),
    output: str = OutputOpt,
) -> None:
    """List the runs recorded on this machine, newest first, or show one.

    Every up, down, build, weights, watch and bench leaves a directory under
    $XDG_STATE_HOME/inkctl/runs/ (~/.local/state without it): the argv, the recipe hash, every
    event (events.jsonl), the debug log and the exit status. Secrets are masked there too."""
    from inkctl.api import runs as api

    fmt = output_format(output)
    if run is None:
        _listing(api.runs(), fmt)
        return
    one = api.run(run)
    if fmt == "json":
        print(json.dumps({**one.info, "events": one.events}, indent=2, default=str))
        return
    for line in _show(one.info, one.events):
        print(line)


def _listing(found, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps({"dir": str(found.dir), "runs": found.runs}, indent=2))
        return
    if not found.runs:
        print(f"no runs recorded in {found.dir}")
        return
    print(f"{'RUN':<28} {'STATUS':<11} {'TIME':>7}  DEPLOYMENT")
    for r in found.runs:
        print(_row(r))


def _status(r: dict) -> str:
    if r.get("status") == "failed":
        return f"failed ({r.get('exit_code')})"
    return str(r.get("status", "?"))


def _row(r: dict) -> str:
    secs = r.get("seconds")
    took = f"{secs:.1f}s" if isinstance(secs, (int, float)) else "-"
    line = f"{r.get('id', '?'):<28} {_status(r):<11} {took:>7}  {r.get('deployment') or '-'}"
    return line if len(line) <= WIDTH else line[:WIDTH - 3] + "..."


def _field(name: str, value: str) -> list[str]:
    return textwrap.wrap(value, WIDTH, initial_indent=f"  {name:<10}", subsequent_indent=" " * 12,
                         break_long_words=True, break_on_hyphens=False) or [f"  {name}"]


def _show(info: dict, events: list[dict]) -> list[str]:
    lines = [f"run {info.get('id')}"]
    lines += _field("command", shlex.join(info.get("argv") or []))
    lines += _field("started", _started(info))
    status = _status(info) if info.get("status") != "ok" else f"ok, exit {info.get('exit_code', 0)}"
    lines += _field("status", status)
    lines += _said(info)
    lines += _acted_on(info)
    lines += _field("events", f"{len(events)} in events.jsonl" + (f"; the last {SHOWN_EVENTS}:" if len(events) > SHOWN_EVENTS else ":"))
    for ev in events[-SHOWN_EVENTS:]:
        lines.append(_event_line(ev))
    lines += _field("files", f"{info.get('path')}/ (run.json, events.jsonl, debug.log)")
    return lines


def _started(info: dict) -> str:
    started = str(info.get("started", "?"))
    if isinstance(info.get("seconds"), (int, float)):
        started += f" ({info['seconds']:.1f} s)"
    return started


def _said(info: dict) -> list[str]:
    """The error and the hint the run ended with, a field line per line."""
    lines = []
    for key in ("error", "hint"):
        for i, text in enumerate(str(info.get(key) or "").splitlines()):
            lines += _field(key if i == 0 else "", text)
    return lines


def _acted_on(info: dict) -> list[str]:
    """The recipe (and its hash) and the deployment (and its hosts) the run acted on."""
    lines = []
    if info.get("recipe") or info.get("recipe_hash"):
        lines += _field("recipe", " ".join(x for x in (info.get("recipe"), info.get("recipe_hash")) if x))
    if info.get("deployment"):
        where = f" on {', '.join(info['hosts'])}" if info.get("hosts") else ""
        lines += _field("deployment", f"{info['deployment']}{where}")
    return lines


def _event_line(ev: dict) -> str:
    """One event in a line: its kind and what it says."""
    kind = str(ev.get("event", "?"))
    said = ev.get("message") or ev.get("text") or ev.get("purpose") or ev.get("detail") or ""
    where = " ".join(str(ev[k]) for k in ("host", "rank") if ev.get(k) not in (None, ""))
    text = " ".join(str(x) for x in (kind, where, said) if x)
    text = " ".join(text.split())
    return "    " + (text if len(text) <= WIDTH - 4 else text[:WIDTH - 7] + "...")
