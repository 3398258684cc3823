"""The live display of ``up``: stage and step lines, and during the health wait a table of
ranks (phase, elapsed / timeout, last log line) redrawn a few times a second.

Without a terminal (CI, a pipe, ``| tee``) it falls back to plain lines: one per step, and
one per rank whenever its phase or last log line changes, so a log file tells the same story.
Progress goes to stderr; the summary of ``up`` goes to stdout.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from inkctl.execute.events import (Event, Finished, HealthProgress, HostConnected, HostKeyAccepted, Info,
                                   RollbackFinished, RollbackStarted, SmokeFinished, StageFinished, StageStarted,
                                   StepFailed, StepFinished, StepStarted)

PLAIN_HEARTBEAT_S = 10.0  # without a TTY, repeat the health state at least this often


class LiveDisplay:
    def __init__(self, console=None, *, force_plain: bool = False):
        if console is None:
            from rich.console import Console

            import sys

            # on a terminal rich wraps lines at its width; piped, a line stays whole
            console = Console(stderr=True, highlight=False, soft_wrap=not sys.stderr.isatty())
        self.out = console
        self.tty = console.is_terminal and not force_plain
        self._live: Any = None  # a rich Live while the health table shows
        self._health: HealthProgress | None = None
        self._plain_seen: dict[int, tuple[str, str]] = {}
        self._plain_last = 0.0
        self._lock = threading.Lock()

    # -- sink --------------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, HealthProgress):
                self._on_health(event)
                return
            if self._live is not None and not isinstance(event, (StepStarted,)):
                self._stop_live()
            line = self._line(event)
            if line is not None:
                from inkctl.cli.show.terminal import relative

                self.out.print(relative(line), markup=False, highlight=False)

    def close(self) -> None:
        with self._lock:
            self._stop_live()

    # -- lines -------------------------------------------------------------------------------
    def _line(self, e: Event) -> str | None:
        ok, bad = ("✓", "✗") if self.tty else ("ok", "FAILED")
        if isinstance(e, Info):
            return ("warning: " if e.level == "warning" else "") + e.text
        if isinstance(e, HostConnected):
            return None
        if isinstance(e, HostKeyAccepted):
            return f"trusted the new host key of {e.host}: {e.key_type} {e.fingerprint} (added {e.name} to {e.file})"
        if isinstance(e, StageStarted):
            return f"stage {e.index}/{e.total} {e.name}: {e.description}"
        if isinstance(e, StepStarted):
            return None
        if isinstance(e, StepFinished):
            if e.kind in ("health", "smoke"):
                return f"  {ok} {_who(e.host, e.rank)} {e.purpose} ({e.seconds:.1f} s)"
            return f"  {ok} {_who(e.host, e.rank)} {e.purpose} ({e.seconds:.2f} s)"
        if isinstance(e, StepFailed):
            return f"  {bad} {_who(e.host, e.rank)} {e.purpose}: {e.message.splitlines()[0]}"
        if isinstance(e, StageFinished):
            return None
        if isinstance(e, SmokeFinished):
            rows = []
            for r in e.results:
                speed = f", TTFT {r.ttft_s:.2f} s" if r.ttft_s is not None else ""
                speed += f", {r.tokens_per_s:g} tok/s" if r.tokens_per_s else ""
                rows.append(f"  smoke {r.prompt!r} -> {r.answer[:60]!r} ({r.latency_s:.2f} s{speed})" if r.ok
                            else f"  smoke {r.prompt!r} FAILED: {r.error}")
            return "\n".join(rows)
        if isinstance(e, RollbackStarted):
            return f"rolling back on {', '.join(e.hosts)}" if e.hosts else "nothing to roll back: nothing had started"
        if isinstance(e, RollbackFinished):
            text = f"rollback done in {e.seconds:.1f} s" + (f": removed on {', '.join(e.removed)}" if e.removed else "")
            if e.left:
                text += "\n  could not remove:\n" + "\n".join("    " + x for x in e.left)
            return text
        if isinstance(e, Finished):
            return None
        from inkctl.execute.deploy.preflight import PreflightReport

        if isinstance(e, PreflightReport):
            return self._preflight(e)
        return None

    def _preflight(self, e) -> str:
        results = list(e.results)
        hosts = sorted({r.host for r in results})
        notable = [r for r in results if r.status not in ("ok", "skipped", "not-run")]
        if e.ok and not notable:
            return f"preflight: {len(results)} checks passed on {len(hosts)} host{'s' if len(hosts) != 1 else ''}"
        lines = [f"preflight: {'passed' if e.ok else 'FAILED'}"]
        for r in (notable if e.ok else [r for r in results if r.status != "ok"]):
            lines.append(f"  {r.host} {r.check}: {r.status}: {r.detail}" + (f" (hint: {r.hint})" if r.hint else ""))
        return "\n".join(lines)

    # -- the health table --------------------------------------------------------------------
    def _on_health(self, e: HealthProgress) -> None:
        self._health = e
        if self.tty:
            if self._live is None:
                from rich.live import Live

                self._live = Live(self._table(), console=self.out, refresh_per_second=4, transient=False,
                                  get_renderable=self._table)
                self._live.start()
            return
        now = time.monotonic()
        heartbeat = now - self._plain_last > PLAIN_HEARTBEAT_S
        for r in e.ranks:
            key = (r.phase, r.last_line)
            if heartbeat or self._plain_seen.get(r.rank) != key:
                self._plain_seen[r.rank] = key
                line = f"  [{e.elapsed:5.1f}/{e.timeout:g} s] rank {r.rank} {r.host}: {r.phase}"
                if r.last_line:
                    line += f" | {r.last_line[:160]}"
                self.out.print(line, markup=False, highlight=False)
        if heartbeat:
            self._plain_last = now

    def _table(self):
        from rich.table import Table
        from rich.text import Text

        e = self._health
        t = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
        for col in ("rank", "host", "phase", "elapsed", "last log line"):
            t.add_column(col, no_wrap=True, overflow="ellipsis", max_width=None if col != "last log line" else 90)
        if e is None:
            return t
        for r in e.ranks:
            color = {"healthy": "green", "serving": "green", "exited": "red"}.get(r.phase, "yellow")
            t.add_row(str(r.rank), r.host, Text(r.phase, style=color), f"{e.elapsed:.0f}/{e.timeout:g} s",
                      Text(r.last_line[:200]))
        t.caption = f"GET {e.url}: {e.status}"
        return t

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def _who(host: str, rank: int | None) -> str:
    return f"{host}/r{rank}" if rank is not None else host
