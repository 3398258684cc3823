"""The live view of ``inkctl weights``: one progress bar per host (bytes, rate, ETA, where its
bytes come from); at the end, what limited each host (the link, the disk, or the Hub)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from inkctl.api.weights import WeightsHostDone, WeightsProgress, WeightsReattached, WeightsScanned, WeightsStarted

if TYPE_CHECKING:
    from rich.progress import TaskID


class WeightsView:
    _SHOWN: dict[type, Callable[[WeightsView, Any], None]]
    def __init__(self, manifest):
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        from inkctl.cli.show.terminal import console

        self.out = console()
        self.progress = Progress(TextColumn("{task.fields[host]:<12}"), TextColumn("{task.fields[source]:<10}"),
                                 BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                                 TextColumn("{task.fields[note]}"), console=self.out, transient=False)
        self.tasks: dict[str, TaskID] = {}
        self.started = False

    def _start(self) -> None:
        if not self.started:
            self.progress.start()
            self.started = True

    def emit(self, event) -> None:
        shown = self._SHOWN.get(type(event))
        if shown is not None:
            shown(self, event)
        elif hasattr(event, "text"):
            self._say(event.text)

    def _say(self, text: str) -> None:
        self.out.print(text, markup=False, highlight=False)

    def _scanned(self, event: WeightsScanned) -> None:
        what = "complete" if not event.bad else (
            f"{len(event.bad)} file(s) to fix: " + ", ".join(f"{p} {st}" for p, st in sorted(event.bad.items())[:4])
            + (" ..." if len(event.bad) > 4 else ""))
        self._say(f"{event.host}: {what}")

    def _started(self, event: WeightsStarted) -> None:
        self._start()
        src = "from Hub" if event.source == "hub" else f"from {event.source}"
        self.tasks[event.host] = self.progress.add_task("", total=event.total_bytes, host=event.host, source=src, note="")

    def _progress(self, event: WeightsProgress) -> None:
        if event.host in self.tasks:
            self.progress.update(self.tasks[event.host], completed=event.bytes)

    def _reattached(self, event: WeightsReattached) -> None:
        if event.host in self.tasks:
            self.progress.update(self.tasks[event.host], source=f"{event.dead} died")
        self._say(f"{event.host}: {event.dead} went away; resuming from the host before it")

    def _host_done(self, event: WeightsHostDone) -> None:
        if event.host in self.tasks:
            tid = self.tasks[event.host]
            if event.ok:
                self.progress.update(tid, completed=self.progress.tasks[tid].total, note="done")
            else:
                self.progress.update(tid, note="FAILED")
        elif not event.ok:
            self._say(f"{event.host}: {event.error}")

    _SHOWN = {WeightsScanned: _scanned, WeightsStarted: _started, WeightsProgress: _progress,
              WeightsReattached: _reattached, WeightsHostDone: _host_done}

    def close(self) -> None:
        if self.started:
            self.progress.stop()
