"""The one fan-out: values in order, at most MAX_THREADS at once, the first failure stops the
others (with ``cancel``) and is raised once they stopped, a real error wins over the Cancelled
it caused, the first Ctrl-C waits for the items, a second one abandons them."""

from __future__ import annotations

import _thread
import threading
import time

import pytest

from inkctl.errors import Cancelled
from inkctl.execute.hosts import fanout
from inkctl.execute.hosts.fanout import MAX_THREADS, background, each, on_hosts
from inkctl.execute.hosts.transport import HostError


def ctrl_c_after(seconds: float) -> None:
    """A Ctrl-C reaching the main thread ``seconds`` from now (as the CLI's second signal does)."""
    threading.Timer(seconds, _thread.interrupt_main).start()


def test_values_in_order_and_the_thread_cap():
    running, peak, lock = [0], [0], threading.Lock()

    def one(i: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return i * i

    assert each(one, range(150)) == [i * i for i in range(150)]
    assert 1 < peak[0] <= MAX_THREADS


def test_without_cancel_every_item_runs_and_the_first_failure_in_order_is_raised():
    done = []

    def one(i: int) -> int:
        if i == 2:
            raise ValueError("two")
        if i == 1:
            time.sleep(0.1)
            raise KeyError("one")
        done.append(i)
        return i

    with pytest.raises(KeyError):
        each(one, range(5))
    assert sorted(done) == [0, 3, 4]


def test_the_first_failure_stops_the_others_and_is_raised_after_they_stopped():
    cancel = threading.Event()
    stopped = []

    def one(i: int) -> None:
        if i == 2:
            time.sleep(0.05)
            raise RuntimeError("rank 2 failed")
        while not cancel.wait(0.01):
            pass
        time.sleep(0.05)  # a command in flight finishes before the fan-out returns
        stopped.append(i)
        raise Cancelled(started=True)

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="rank 2 failed"):  # not the Cancelled of hosts 0 and 1
        each(one, range(4), cancel=cancel, grace_s=5)
    assert time.monotonic() - t0 < 2
    assert cancel.is_set() and sorted(stopped) == [0, 1, 3]


def test_a_stop_from_outside_ends_the_wait():
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()

    def one(i: int) -> int:
        while not cancel.wait(0.01):
            pass
        return i

    assert each(one, range(3), cancel=cancel) == [0, 1, 2]  # the caller decides what a stop means


def test_a_host_error_fails_that_host_only():
    def one(h: str) -> str:
        if h == "b":
            raise HostError("b", "unreachable", "no route to host")
        return h.upper()

    res = on_hosts(one, ["a", "b", "c"])
    assert res.ok == {"a": "A", "c": "C"} and list(res.failed) == ["b"]


def test_the_first_ctrl_c_stops_and_waits_for_the_items():
    cancel = threading.Event()
    finished = []

    def one(i: int) -> None:
        while not cancel.wait(0.01):
            pass
        time.sleep(0.2)  # e.g. a docker run in flight
        finished.append(i)

    ctrl_c_after(0.1)
    with pytest.raises(KeyboardInterrupt):
        each(one, range(3), cancel=cancel, grace_s=5)
    assert cancel.is_set() and sorted(finished) == [0, 1, 2]


def test_a_second_ctrl_c_abandons_what_hangs():
    cancel = threading.Event()
    release = threading.Event()

    def one(i: int) -> None:
        release.wait(10)  # a host that hangs and ignores the stop

    ctrl_c_after(0.1)
    ctrl_c_after(0.5)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        each(one, range(3), cancel=cancel, grace_s=30)
    assert time.monotonic() - t0 < 3 and cancel.is_set()
    release.set()


def test_after_a_first_ctrl_c_the_next_one_abandons_at_once():
    release = threading.Event()
    ctrl_c_after(0.1)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        each(lambda i: release.wait(10), range(2), on_interrupt="abandon")
    assert time.monotonic() - t0 < 2
    release.set()


def test_one_item_runs_on_the_calling_thread():
    assert each(lambda i: threading.current_thread() is threading.main_thread(), [0]) == [True]


def test_background_returns_at_once_and_joins_against_one_deadline():
    stop = threading.Event()
    bg = background(lambda i: stop.wait(10), range(5), name="t")
    assert all(t.daemon and t.is_alive() for t in bg.threads)
    t0 = time.monotonic()
    assert bg.join(0.3) is False
    assert time.monotonic() - t0 < 1.0  # 0.3 s for all five, not each
    stop.set()
    assert bg.join(2) is True


def test_the_cap_is_written_once():
    import inspect

    from inkctl.execute.deploy import runner

    assert "64" not in inspect.getsource(runner) and fanout.MAX_THREADS == 64
