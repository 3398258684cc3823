"""This on every host, in parallel: the one fan-out every command uses.

``on_hosts`` runs a function per host and sorts the answers into ``ok`` (host -> value) and
``failed`` (host -> HostError), both in the order the hosts were given; ``each`` runs a
function per item and returns the values in order (an exception propagates). One host runs
on the calling thread: no thread hop when there is nothing to overlap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

from inkctl.execute.hosts.transport import HostError

T = TypeVar("T")
I = TypeVar("I")

MAX_THREADS = 64


@dataclass
class Fanout(Generic[T]):
    ok: dict[str, T] = field(default_factory=dict)
    failed: dict[str, HostError] = field(default_factory=dict)


def each(fn: Callable[[I], T], items: Iterable[I], *, name: str = "host") -> list[T]:
    """``fn`` of every item at once; the values in the items' order."""
    items = list(items)
    if len(items) <= 1:
        return [fn(i) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(MAX_THREADS, len(items)), thread_name_prefix=name) as pool:
        return list(pool.map(fn, items))


def on_hosts(fn: Callable[[str], T], hosts: Iterable[str], *, name: str = "host") -> Fanout[T]:
    """``fn(host)`` on every host at once; a HostError fails that host only."""
    def one(host: str) -> tuple[str, T | None, HostError | None]:
        try:
            return host, fn(host), None
        except HostError as e:
            return host, None, e

    out: Fanout[T] = Fanout()
    for host, value, error in each(one, hosts, name=name):
        if error is not None:
            out.failed[host] = error
        else:
            out.ok[host] = cast(T, value)
    return out
