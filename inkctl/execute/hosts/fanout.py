"""This on every host, in parallel: the one fan-out every command uses.

``on_hosts`` runs a function per host and sorts the answers into ``ok`` (host -> value) and
``failed`` (host -> HostError), both in the order the hosts were given; ``each`` runs a
function per item and returns the values in order. One item runs on the calling thread: no
thread hop when there is nothing to overlap. At most ``MAX_THREADS`` run at once.

What a failure and Ctrl-C do is the same everywhere:

- a failure: by default every item still runs to its end and the first failure (in item
  order) is raised. With ``cancel`` (an Event the functions check), the first failure sets
  it, so the others stop early; they are waited for (``grace_s`` at most) before the failure
  is raised, so that nothing started here outlives the call (a ``docker run`` in flight must
  not recreate a container after its rollback). A real error wins over the ``Cancelled`` of
  the items that stopped because of it.
- Ctrl-C: the calling thread waits in short slices, so a KeyboardInterrupt reaches it at
  once. ``on_interrupt="wait"`` (the default): it sets ``cancel`` and waits for the items as
  after a failure; a second KeyboardInterrupt during that wait abandons them.
  ``on_interrupt="abandon"`` (a fan-out that already runs after a first Ctrl-C, such as a
  rollback): the KeyboardInterrupt abandons them at once. The threads are daemons: an
  abandoned item cannot keep the process alive.

``background`` starts one long-lived daemon thread per item (a log stream to follow) and
returns at once; ``Background.join`` waits for all of them against one deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

from inkctl.errors import Cancelled
from inkctl.execute.hosts.transport import HostError

T = TypeVar("T")
I = TypeVar("I")

MAX_THREADS = 64
SLICE_S = 0.25  # how long the calling thread waits at a time: the delay of a Ctrl-C at most


@dataclass
class Fanout(Generic[T]):
    ok: dict[str, T] = field(default_factory=dict)
    failed: dict[str, HostError] = field(default_factory=dict)


class _Run:
    """The items' outcomes, filled in by at most MAX_THREADS worker threads."""

    def __init__(self, fn: Callable, items: list, cancel: threading.Event | None):
        self.fn, self.items, self.cancel = fn, items, cancel
        self.values: list = [None] * len(items)
        self.errors: dict[int, BaseException] = {}
        self.left = len(items)
        self.next = 0
        self.lock = threading.Lock()
        self.done = threading.Event()

    def work(self) -> None:
        while True:
            with self.lock:
                if self.next >= len(self.items):
                    return
                i, self.next = self.next, self.next + 1
            try:
                self.values[i] = self.fn(self.items[i])
            except BaseException as e:  # noqa: BLE001 - handed to the calling thread
                with self.lock:
                    self.errors[i] = e
                if self.cancel is not None:
                    self.cancel.set()
            finally:
                with self.lock:
                    self.left -= 1
                    if self.left == 0:
                        self.done.set()

    def wait(self, until: float | None = None) -> bool:
        """Until every item is done (True) or ``until`` (a monotonic time) passed (False)."""
        while not self.done.is_set():
            if until is not None and time.monotonic() >= until:
                return False
            self.done.wait(SLICE_S if until is None else max(0.0, min(SLICE_S, until - time.monotonic())))
        return True

    def failure(self) -> BaseException | None:
        """The failure to raise: the first in item order; with ``cancel``, the first real one
        (the items that stopped because of it raise Cancelled)."""
        ordered = [self.errors[i] for i in sorted(self.errors)]
        if self.cancel is not None:
            real = [e for e in ordered if not isinstance(e, (Cancelled, KeyboardInterrupt))]
            if real:
                return real[0]
        return ordered[0] if ordered else None


def each(fn: Callable[[I], T], items: Iterable[I], *, name: str = "host", cancel: threading.Event | None = None,
         grace_s: float | None = None, on_interrupt: str = "wait") -> list[T]:
    """``fn`` of every item at once; the values in the items' order (see the module's
    docstring for what a failure and Ctrl-C do)."""
    items = list(items)
    if len(items) <= 1 and on_interrupt == "wait":
        return [fn(i) for i in items]
    run = _Run(fn, items, cancel)
    for n in range(min(MAX_THREADS, len(items))):
        threading.Thread(target=run.work, name=f"{name}-{n}", daemon=True).start()
    until = None
    try:
        if cancel is None:
            run.wait()
        else:
            while not run.wait(time.monotonic() + SLICE_S):
                if cancel.is_set():  # a failure here, or a stop from outside
                    break
            until = None if grace_s is None else time.monotonic() + grace_s
            run.wait(until)
    except KeyboardInterrupt:
        if on_interrupt == "abandon":
            raise
        if cancel is not None:
            cancel.set()
        run.wait(None if grace_s is None else time.monotonic() + grace_s)  # a second one abandons
        raise
    failure = run.failure()
    if failure is not None:
        raise failure
    return cast("list[T]", run.values)


def on_hosts(fn: Callable[[str], T], hosts: Iterable[str], *, name: str = "host", cancel: threading.Event | None = None,
             grace_s: float | None = None, on_interrupt: str = "wait") -> Fanout[T]:
    """``fn(host)`` on every host at once; a HostError fails that host only (any other
    exception is raised, as ``each`` raises it)."""
    def one(host: str) -> tuple[str, T | None, HostError | None]:
        try:
            return host, fn(host), None
        except HostError as e:
            return host, None, e

    out: Fanout[T] = Fanout()
    for host, value, error in each(one, hosts, name=name, cancel=cancel, grace_s=grace_s, on_interrupt=on_interrupt):
        if error is not None:
            out.failed[host] = error
        else:
            out.ok[host] = cast(T, value)
    return out


class Background:
    """Daemon threads, one per item, each running ``fn(item)`` for as long as it takes."""

    def __init__(self, fn: Callable[[I], object], items: Iterable[I], *, name: str = "follow",
                 label: Callable[[I], str] = str):
        self.threads = [threading.Thread(target=fn, args=(i,), daemon=True, name=f"{name}-{label(i)}") for i in items]
        for t in self.threads:
            t.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for all of them, ``timeout`` seconds for all together (not each); True when all
        ended. One still running after that is a daemon and dies with the process."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self.threads:
            while t.is_alive():
                left = SLICE_S if deadline is None else min(SLICE_S, deadline - time.monotonic())
                if left <= 0:
                    return False
                t.join(left)
        return True


def background(fn: Callable[[I], object], items: Iterable[I], *, name: str = "follow",
               label: Callable[[I], str] = str) -> Background:
    """Start ``fn(item)`` for every item on a daemon thread of its own and return at once
    (following log streams: they run until their stream ends or their stop event is set)."""
    return Background(fn, items, name=name, label=label)
