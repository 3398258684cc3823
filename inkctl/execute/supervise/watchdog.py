"""Boot memory watchdog ("Inkling on Two DGX Sparks", Wall 2).

On unified memory (GB10) the NVFP4 loader's transient workspace shows up in MemAvailable
and almost nowhere else: 107 -> 46 GiB in one tick, then 46 -> 4 GiB in 12 s, then a host
that needs a power cycle. The watchdog reads every host's MemAvailable at the recipe's
interval over the connection inkctl already holds; N consecutive readings below the
threshold kill that host's containers of the deployment, turning a lost host into a
recoverable failure with a message that says what happened.

``MemoryWatch`` is the pure rule (unit-tested); ``Watchdog`` runs one thread per host and
never blocks the health display.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from inkctl.execute.hosts.fanout import Background, background
from inkctl import runtimes
from inkctl.plan.step import Plan

log = logging.getLogger(__name__)

GIB_KIB = 1024 * 1024
MEMINFO = ("cat", "/proc/meminfo")


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo -> {field: kB}."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[name.strip()] = int(parts[0])
    return out


def mem_available_gib(text: str) -> float:
    info = parse_meminfo(text)
    if "MemAvailable" not in info:
        raise ValueError("no MemAvailable line in /proc/meminfo")
    return info["MemAvailable"] / GIB_KIB


@dataclass
class MemoryWatch:
    """Trips after ``consecutive`` readings in a row below ``threshold_gib``."""

    threshold_gib: float
    consecutive: int
    series: list[float] = field(default_factory=list)
    below: int = 0

    def observe(self, gib: float) -> bool:
        self.series.append(gib)
        self.below = self.below + 1 if gib < self.threshold_gib else 0
        return self.below >= self.consecutive


@dataclass(frozen=True)
class Trip:
    host: str
    ranks: tuple[int, ...]
    threshold_gib: float
    consecutive: int
    series: tuple[float, ...]  # every reading on that host, oldest first
    killed: tuple[str, ...]

    @property
    def message(self) -> str:
        ranks = ", ".join(f"rank {r}" for r in self.ranks)
        last = self.series[-1]
        readings = " -> ".join(f"{g:.1f}" for g in self.series[-12:])
        return (f"watchdog: MemAvailable {last:.1f} GiB < {self.threshold_gib:g} GiB for {self.consecutive} reads "
                f"on {self.host} ({ranks}); killed {', '.join(self.killed) or 'nothing'}\n"
                f"  MemAvailable readings (GiB): {readings}")


class Watchdog:
    """One thread per host: read, judge, and on a trip kill that host's containers and report."""

    def __init__(self, plan: Plan, transports: dict, *, threshold_gib: float, consecutive: int, interval_s: float,
                 on_trip: Callable[[Trip], None], on_reading: Callable[[str, float], None] | None = None):
        self.plan, self.transports = plan, transports
        self.threshold_gib, self.consecutive, self.interval_s = threshold_gib, consecutive, interval_s
        self.on_trip, self.on_reading = on_trip, on_reading
        self.stop_event = threading.Event()
        self.trips: list[Trip] = []
        self._threads: Background | None = None

    @classmethod
    def for_recipe(cls, recipe, plan: Plan, transports: dict, on_trip, on_reading=None) -> "Watchdog":
        w = recipe.watchdog
        return cls(plan, transports, threshold_gib=w.mem_available_min_gib, consecutive=w.consecutive,
                   interval_s=w.interval_s, on_trip=on_trip, on_reading=on_reading)

    def start(self) -> "Watchdog":
        self._threads = background(self._watch, [h.name for h in self.plan.hosts], name="watchdog")
        return self

    def stop(self) -> None:
        self.stop_event.set()
        if self._threads is not None:
            self._threads.join(timeout=self.interval_s + 5)

    def __enter__(self) -> "Watchdog":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _watch(self, host: str) -> None:
        tr = self.transports[host]
        watch = MemoryWatch(self.threshold_gib, self.consecutive)
        killed: set[str] = set()
        tripped = False
        while not self.stop_event.is_set():
            t0 = time.monotonic()
            try:
                res = tr.run(MEMINFO, timeout=max(5.0, self.interval_s * 2))
                gib = mem_available_gib(res.text()) if res.ok else None
            except Exception as e:  # a lost host is the runner's to report; the watchdog keeps quiet
                log.debug("watchdog: %s: no reading: %s", host, e)
                gib = None
            if gib is not None:
                if self.on_reading:
                    self.on_reading(host, gib)
                tripped = watch.observe(gib) or tripped
            if tripped and self._kill(host, killed):
                self._report(host, watch, killed)
                return
            # tripped, but a rank's container is not there yet (the launch is slower than the
            # readings): the trip stands; kill each one as it appears, report once all are killed
            self.stop_event.wait(max(0.0, self.interval_s - (time.monotonic() - t0)))
        if tripped:  # the run ended first (its own failure, or Ctrl-C): the cause still counts
            self._report(host, watch, killed)

    def _kill(self, host: str, killed: set[str]) -> bool:
        """Kill this host's ranks not killed yet, one by one; True once every one is."""
        runtime = self.plan.host(host).runtime
        for c in self.plan.containers:
            if c.host == host and c.name not in killed:
                try:
                    if self.transports[host].run(runtimes.get(runtime).kill(c.name), timeout=30).ok:
                        killed.add(c.name)
                except Exception as e:
                    log.debug("watchdog: %s: kill %s: %s", host, c.name, e)
        return all(c.name in killed for c in self.plan.containers if c.host == host)

    def _report(self, host: str, watch: MemoryWatch, killed: set[str]) -> None:
        mine = [c for c in self.plan.containers if c.host == host]
        trip = Trip(host=host, ranks=tuple(c.rank for c in mine), threshold_gib=self.threshold_gib,
                    consecutive=self.consecutive, series=tuple(watch.series),
                    killed=tuple(c.name for c in mine if c.name in killed))
        self.trips.append(trip)
        self.on_trip(trip)
