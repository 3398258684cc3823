"""The boot memory watchdog's rule and report, with the readings of the failed boot in "Inkling on Two DGX Sparks"."""

from __future__ import annotations

import time

from inkctl.execute.supervise.watchdog import MemoryWatch, Trip, mem_available_gib, parse_meminfo

MEMINFO = "MemTotal:       131981020 kB\nMemFree:        1000 kB\nMemAvailable:   131466512 kB\n"


def test_parse_real_meminfo():
    assert parse_meminfo(MEMINFO)["MemTotal"] == 131981020
    assert round(mem_available_gib(MEMINFO), 1) == 125.4


def test_seed_000_boot_trips_on_the_second_low_read():
    # v8 boot, 2 s poller: 117 -> 113 (init), 107 -> 46 in one tick, fill to 4-5 GiB
    w = MemoryWatch(threshold_gib=8, consecutive=2)
    series = [117, 113, 107, 46, 30, 12, 7.9, 4.1]
    tripped = [w.observe(g) for g in series]
    assert tripped == [False] * 7 + [True]


def test_one_low_read_is_not_enough():
    w = MemoryWatch(threshold_gib=8, consecutive=2)
    assert [w.observe(g) for g in (7, 9, 7, 9)] == [False] * 4


def test_report_names_host_rank_and_readings():
    t = Trip(host="spark-5bc3", ranks=(1,), threshold_gib=8, consecutive=2, series=(46.0, 7.5, 4.1),
             killed=("inkctl-x-r1",))
    assert t.message.splitlines()[0] == (
        "watchdog: MemAvailable 4.1 GiB < 8 GiB for 2 reads on spark-5bc3 (rank 1); killed inkctl-x-r1")
    assert "46.0 -> 7.5 -> 4.1" in t.message


def test_a_trip_before_the_ranks_container_exists_still_kills_it_when_it_appears():
    """Under load the readings can trip before the launch has created the container: the kill
    then fails ("No such container"). The trip stands: the kill is tried again at each reading
    until the container is there, and the trip is reported once, naming what it killed (before,
    the watchdog gave up and the boot went on to answer)."""
    import threading
    from types import SimpleNamespace

    from inkctl.execute.supervise.watchdog import Watchdog

    class Host:  # the host's answers, at the transport boundary
        def __init__(self):
            self.kills, self.created = [], threading.Event()

        def run(self, argv, timeout=None):
            if tuple(argv) == ("cat", "/proc/meminfo"):
                return SimpleNamespace(ok=True, text=lambda: "MemAvailable:   1048576 kB\n")
            self.kills.append(list(argv))
            return SimpleNamespace(ok=self.created.is_set(), text=lambda: "")

    host = Host()
    plan = SimpleNamespace(hosts=(SimpleNamespace(name="h1", runtime="docker"),),
                           containers=(SimpleNamespace(host="h1", rank=0, name="inkctl-x-r0"),),
                           host=lambda n: SimpleNamespace(name=n, runtime="docker"))
    trips = []
    dog = Watchdog(plan, {"h1": host}, threshold_gib=8, consecutive=2, interval_s=0.01, on_trip=trips.append)
    dog.start()
    try:
        deadline = time.monotonic() + 10
        while len(host.kills) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(host.kills) >= 3 and not trips  # tried, failed, tried again; nothing reported yet
        host.created.set()  # the launch has made the container
        while not trips and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        dog.stop()
    assert len(trips) == 1 and trips[0].killed == ("inkctl-x-r0",) and trips[0].ranks == (0,)
    assert all(k[-1] == "inkctl-x-r0" and "kill" in k for k in host.kills)
