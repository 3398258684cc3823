"""One directory per run of a command that changes hosts, as ansible-runner leaves one per job.

``up``, ``down``, ``build``, ``weights``, ``watch`` and ``bench`` each leave
``$XDG_STATE_HOME/inkctl/runs/<time>-<command>/`` (``~/.local/state`` without XDG_STATE_HOME,
``INKCTL_RUNS_DIR`` to put them elsewhere) with:

- ``run.json``: the argv, the working directory, the inkctl version and pid, when it started;
  once known the recipe, its plan's recipe hash and the deployment; at the end the exit status,
  the error and the seconds it took (``"status": "running"`` until then);
- ``events.jsonl``: every event the command emitted, one JSON object per line;
- ``debug.log``: the debug log (every ``inkctl.*`` logger at DEBUG), whether or not ``--debug``
  showed it on the terminal.

Everything written passes the one scrubber (``scrub.active()``), and at the end every file is
scrubbed again with the secrets the command knew by then. Nothing here may fail a command: a
record that cannot be written is a warning, once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inkctl.scrub import active

RECORDED = ("up", "down", "build", "weights", "watch", "bench")
KEEP = 200  # records kept; the oldest beyond that are removed when a new one starts
FILES = ("run.json", "events.jsonl", "debug.log")

log = logging.getLogger(__name__)


def runs_dir() -> Path:
    """Where records live: INKCTL_RUNS_DIR, or the XDG state directory's inkctl/runs."""
    if os.environ.get("INKCTL_RUNS_DIR"):
        return Path(os.environ["INKCTL_RUNS_DIR"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "inkctl" / "runs"


class _Scrubbed(logging.Formatter):
    """The debug log's lines, with every known secret value masked."""

    def format(self, record: logging.LogRecord) -> str:
        return active().text(super().format(record))


class Record:
    """The directory of one run; every method is thread-safe and never raises."""

    def __init__(self, path: Path, command: str, argv: list[str]):
        self.path, self.command = path, command
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._failed = False
        self._level = logging.NOTSET  # the inkctl logger's level before this record (restored)
        self.info: dict[str, Any] = {
            "id": path.name, "command": command, "argv": ["inkctl", *argv], "cwd": os.getcwd(),
            "pid": os.getpid(), "version": _version(), "started": _now(), "status": "running"}
        self._events = open(path / "events.jsonl", "a", encoding="utf-8")  # closed by finish
        self._handler = logging.FileHandler(path / "debug.log", encoding="utf-8")
        self._handler.setLevel(logging.DEBUG)
        self._handler.setFormatter(_Scrubbed("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
        self._write_info()

    # -- what the command tells ---------------------------------------------------------------
    def note(self, **fields: Any) -> None:
        with self._lock:
            self.info.update({k: v for k, v in fields.items() if v is not None})
            self._write_info()

    def event(self, data: dict) -> None:
        data = dict(data)
        data.setdefault("ts", round(time.time(), 3))
        line = json.dumps(active()(data), default=str)
        def write() -> None:
            self._events.write(line + "\n")
            self._events.flush()

        with self._lock:
            self._guard("events", write)

    def finish(self, exit_code: int, error: str | None = None, hint: str | None = None) -> None:
        with self._lock:
            self.info.update(status="ok" if exit_code == 0 else "failed", exit_code=exit_code,
                             finished=_now(), seconds=round(time.monotonic() - self._t0, 3))
            if error:
                self.info["error"] = error
            if hint:
                self.info["hint"] = hint
            self._guard("events", self._events.close)
            root = logging.getLogger("inkctl")
            root.removeHandler(self._handler)
            root.setLevel(self._level)
            self._handler.close()
            self._write_info()
            self._scrub_files()

    # -- writing ------------------------------------------------------------------------------
    def _write_info(self) -> None:
        def write() -> None:
            tmp = self.path / "run.json.tmp"
            tmp.write_text(json.dumps(active()(self.info), indent=2, default=str) + "\n", encoding="utf-8")
            tmp.replace(self.path / "run.json")

        self._guard("run.json", write)

    def _scrub_files(self) -> None:
        """Secrets armed after a line was written (they rarely are) are masked in it now."""
        scrub = active()
        if not scrub.values:
            return
        for name in ("events.jsonl", "debug.log"):
            p = self.path / name

            def rewrite(p: Path = p) -> None:
                text = p.read_text(encoding="utf-8", errors="replace")
                clean = scrub.text(text)
                if clean != text:  # whole or not at all: `inkctl runs` may be reading it
                    tmp = p.with_name(p.name + ".scrubbed")
                    tmp.write_text(clean, encoding="utf-8")
                    tmp.replace(p)

            self._guard(name, rewrite)

    def _guard(self, what: str, fn) -> None:
        try:
            fn()
        except (OSError, ValueError) as e:  # a full disk, a closed file: the command goes on
            if not self._failed:
                self._failed = True
                log.warning("the run record %s is incomplete: cannot write %s: %s", self.path, what, e)


_CURRENT: Record | None = None


def current() -> Record | None:
    """The record of the running command, or None (a command that leaves none)."""
    return _CURRENT


def start(command: str, argv: list[str], base: Path | None = None) -> Record | None:
    """Open the record of this run (None when the directory cannot be made: said once, as a
    warning) and send the ``inkctl`` loggers' debug output to its debug.log."""
    global _CURRENT
    base = base or runs_dir()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    try:
        base.mkdir(parents=True, exist_ok=True)
        _prune(base)
        for n in range(1, 1000):
            path = base / (f"{stamp}-{command}" + (f"-{n}" if n > 1 else ""))
            try:
                path.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        else:
            raise OSError(f"no free name for {stamp}-{command} in {base}")
        record = Record(path, command, argv)
    except OSError as e:
        log.warning("no run record for this %s: %s", command, e)
        return None
    root = logging.getLogger("inkctl")
    record._level = root.level
    root.addHandler(record._handler)
    root.setLevel(logging.DEBUG)
    _CURRENT = record
    return record


def finish(exit_code: int, error: str | None = None, hint: str | None = None) -> None:
    global _CURRENT
    if _CURRENT is not None:
        _CURRENT.finish(exit_code, error, hint)
        _CURRENT = None


def note(**fields: Any) -> None:
    if _CURRENT is not None:
        _CURRENT.note(**fields)


def note_plan(plan: Any, recipe: Any = None) -> None:
    """The plan this run acts on: its deployment, recipe hash and hosts."""
    if _CURRENT is not None:
        _CURRENT.note(deployment=plan.deployment, recipe_hash=plan.recipe_hash,
                      hosts=[h.name for h in plan.hosts], recipe=None if recipe is None else str(recipe))


def event(kind: str, **fields: Any) -> None:
    """One event of a command that has no event stream of its own (down's report, a bench point)."""
    if _CURRENT is not None:
        _CURRENT.event({"event": kind, **fields})


class Recording:
    """A sink that records every event (``as_dict()``, as ``-o json`` prints it), then passes
    it on to the sink it wraps (None: record only)."""

    def __init__(self, record: Record, inner: Any = None):
        self.record, self.inner = record, inner

    def emit(self, ev: Any) -> None:
        self.record.event(ev.as_dict())
        if self.inner is not None:
            self.inner.emit(ev)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()

    def __getattr__(self, name: str) -> Any:  # what else a renderer offers (LiveDisplay's helpers)
        if self.inner is None:
            raise AttributeError(name)
        return getattr(self.inner, name)


def recording(sink: Any) -> Any:
    """``sink`` recorded into this run's events.jsonl (unchanged when there is no record)."""
    return sink if _CURRENT is None else Recording(_CURRENT, sink)


# ------------------------------------------------------------------------- reading records

def listing(base: Path | None = None) -> list[dict]:
    """Every record, newest first: its run.json (a record without one: what its name says)."""
    base = base or runs_dir()
    if not base.is_dir():
        return []
    out = []
    for d in sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: p.name, reverse=True):
        out.append(read(d))
    return out


def read(path: Path) -> dict:
    try:
        info = json.loads((path / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        log.debug("%s: no readable run.json: %s", path, e)
        info = {"id": path.name, "command": path.name.split("-", 1)[-1], "status": "unreadable"}
    info["path"] = str(path)
    if info.get("status") == "running" and not _alive(info.get("pid")):
        info["status"] = "killed"  # it never finished: killed, or the machine went down
    return info


def find(ident: str, base: Path | None = None) -> Path | None:
    """A record by its id, a unique prefix of it, or ``last``."""
    base = base or runs_dir()
    if not base.is_dir():
        return None
    names = sorted(p.name for p in base.iterdir() if p.is_dir())
    if ident == "last":
        return base / names[-1] if names else None
    if ident in names:
        return base / ident
    hits = [n for n in names if n.startswith(ident)]
    return base / hits[0] if len(hits) == 1 else None


def events(path: Path) -> list[dict]:
    out: list[dict] = []
    try:
        lines = (path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError as e:
        log.debug("%s: no events: %s", path, e)
        return out
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError as e:  # a line cut by a kill
            log.debug("%s: an unreadable event line: %s", path, e)
    return out


def _prune(base: Path) -> None:
    """The oldest records beyond KEEP go; never one whose command still runs (a watch started
    days ago, another up started this second): its record is still being written."""
    import shutil

    dirs = sorted((p for p in base.iterdir() if p.is_dir()), key=lambda p: p.name)
    for d in dirs[:max(0, len(dirs) - (KEEP - 1))]:
        if read(d).get("status") == "running":
            continue
        shutil.rmtree(d, ignore_errors=True)


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _version() -> str:
    from inkctl import __version__

    return __version__
