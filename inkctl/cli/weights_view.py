"""The live view of ``inkctl weights``: one progress bar per host (bytes, rate, ETA, where its
bytes come from); at the end, what limited each host (the link, the disk, or the Hub)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.weights.distribute import (WeightsHostDone, WeightsProgress, WeightsReattached, WeightsScanned,
                                       WeightsStarted)

if TYPE_CHECKING:
    from rich.progress import TaskID


class WeightsView:
    def __init__(self, manifest):
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        from inkctl.cli.render import console

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
        if isinstance(event, WeightsScanned):
            what = "complete" if not event.bad else (
                f"{len(event.bad)} file(s) to fix: " + ", ".join(f"{p} {st}" for p, st in sorted(event.bad.items())[:4])
                + (" ..." if len(event.bad) > 4 else ""))
            self.out.print(f"{event.host}: {what}", markup=False, highlight=False)
        elif isinstance(event, WeightsStarted):
            self._start()
            src = "from Hub" if event.source == "hub" else f"from {event.source}"
            self.tasks[event.host] = self.progress.add_task("", total=event.total_bytes, host=event.host, source=src, note="")
        elif isinstance(event, WeightsProgress) and event.host in self.tasks:
            self.progress.update(self.tasks[event.host], completed=event.bytes)
        elif isinstance(event, WeightsReattached):
            if event.host in self.tasks:
                self.progress.update(self.tasks[event.host], source=f"{event.dead} died")
            self.out.print(f"{event.host}: {event.dead} went away; resuming from the host before it",
                           markup=False, highlight=False)
        elif isinstance(event, WeightsHostDone):
            if event.host in self.tasks:
                tid = self.tasks[event.host]
                if event.ok:
                    self.progress.update(tid, completed=self.progress.tasks[tid].total, note="done")
                else:
                    self.progress.update(tid, note="FAILED")
            elif not event.ok:
                self.out.print(f"{event.host}: {event.error}", markup=False, highlight=False)
        elif hasattr(event, "text"):
            self.out.print(event.text, markup=False, highlight=False)

    def close(self) -> None:
        if self.started:
            self.progress.stop()
