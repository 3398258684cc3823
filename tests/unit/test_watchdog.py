"""The boot memory watchdog's rule and report, with the readings of the failed boot in "Inkling on Two DGX Sparks"."""

from __future__ import annotations

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
