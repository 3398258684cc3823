"""``up --slurm``'s boot phases: the job's output (every rank's lines, prefixed ``R: `` by
``srun --label``) read as it grows, each rank's lines fed to the reader ``up`` uses over SSH
(``execute.supervise.bootphases``), and inkctl's milestones (the head's container started, port
open, health answering, first token) timed from the moment the job was seen running."""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass

from inkctl.execute.supervise.bootphases import PhaseReader, boot_record

log = logging.getLogger(__name__)
READ_EVERY_S = 0.2
_LABELED = re.compile(r"^(\d+): ?(.*)$")
# export/slurm_rank.py's lines once a rank's engine runs: a container started, or the engine
# started in the task's foreground (pyxis, apptainer)
_STARTED = re.compile(r"^inkctl: rank (\d+) (?:started \S+|starts the engine) on (\S+)")


@dataclass(frozen=True)
class _Rank:
    host: str
    rank: int


class JobLog:
    """Follows one job's output file in a thread of its own until ``stop``."""

    def __init__(self, path: str, nodes: tuple[str, ...], engine: str, t0: float):
        self.path, self.engine, self.t0 = path, engine, t0
        self.nodes = dict(enumerate(nodes))
        self.reader = PhaseReader(engine)
        self.marks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slurm-bootlog", daemon=True)

    def start(self) -> "JobLog":
        self._thread.start()
        return self

    def mark(self, key: str, at: float | None = None) -> None:
        self.marks.setdefault(key, (time.monotonic() if at is None else at) - self.t0)

    def line(self, text: str) -> None:
        m = _LABELED.match(text)
        if not m:
            return
        rank, rest = int(m.group(1)), m.group(2)
        started = _STARTED.match(rest)
        if started and int(started.group(1)) == rank:
            self.nodes[rank] = started.group(2)
            if rank == 0:
                self.mark("container")
        self.reader(_Rank(self.nodes.get(rank, "?"), rank), rest)

    def _run(self) -> None:
        f = None
        partial = ""
        try:
            while True:
                stopping = self._stop.is_set()  # one last read after stop: what was written before it
                if f is None:
                    try:
                        f = open(self.path, errors="replace")
                    except OSError:
                        f = None
                if f is not None:
                    chunk = f.read()
                    if chunk:
                        lines = (partial + chunk).split("\n")
                        partial = lines.pop()
                        for ln in lines:
                            self.line(ln)
                if stopping:
                    return
                self._stop.wait(READ_EVERY_S)
        except OSError as e:  # the output went away: the phases read so far stay
            log.debug("reading %s: %s", self.path, e)
        finally:
            if f is not None:
                f.close()

    def stop(self) -> dict:
        """Stop reading; the boot record (``bootphases.boot_record``)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        return boot_record(self.engine, self.reader.phases(), self.marks)
