"""A chain of relays, one program per host, each serving what it receives to the host after it:
what the image relay (``execute/image/relay.py``) and the weights relay (``weights/relay.py``)
both run on.

    source -> h2 -> h3 -> ... -> hN

- every member's program starts at once (the fan-out's ``background``), each on its own thread
  as soon as its host is ready (``start(argv, prepare=...)``: what the member needs on its host
  is put there on that thread, so hosts do not wait for each other); it answers JSON lines
  (``{"ev": ...}``): ``listening`` (its port), ``progress`` (bytes), ``error``, ``done`` or
  ``failed`` (its fetch is over), and ``dead`` (the host it read from went away; it now reads
  from the next one of its list);
- start-up is two steps because a sender's port is known only once it listens: every member
  says where it listens, then each gets its sources, the members before it, nearest first
  (``sources``), so that a member whose upstream dies asks the one before that. Either all at
  once (``wait_listening``, then the caller writes every member's plan) or each member as soon
  as the members it reads from listen (``point_as_ready``);
- a member named dead by another counts as ended: the run does not wait for its SSH session
  (a host cut off the network answers nothing until its keepalive gives up), and the clean-up
  leaves it alone (``reachable``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from inkctl.execute.hosts.fanout import Background, background, each
from inkctl.execute.hosts.transport import HostError, Transport

log = logging.getLogger(__name__)


@dataclass
class Member:
    name: str
    transport: Transport
    address: str  # where the others reach it (the cluster network)
    listening: dict = field(default_factory=dict)
    ended: threading.Event = field(default_factory=threading.Event)
    code: int | None = None  # its program's exit (-1: stopped, or its host went away)
    other: list[str] = field(default_factory=list)  # what it printed that was not an event
    errors: list[str] = field(default_factory=list)
    ok: bool | None = None
    bytes: int = 0
    first: float | None = None  # its first and its latest byte (monotonic)
    last: float | None = None
    dead: str = ""  # why another member named it dead

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.listening['port']}"

    @property
    def rate(self) -> float:
        if self.first is None or self.last is None or self.last <= self.first:
            return 0.0
        return self.bytes / (self.last - self.first)


M = TypeVar("M", bound=Member)


@dataclass
class Reattached:
    host: str
    dead: str
    why: str = ""


class Unstarted(Exception):
    """The chain's first member (its source) did not listen: nothing can move."""

    def __init__(self, member: Member):
        super().__init__(member.name)
        self.member = member

    @property
    def detail(self) -> str:
        m = self.member
        return f"(exit {m.code}): " + (" | ".join(m.other[-3:]) or "no answer")


def safely(fn: Callable[[Any], object]) -> Callable[[Any], str]:
    """``fn(item)`` on the fan-out, a HostError turned into its reason ("" when it went well)."""
    def run(item: Any) -> str:
        try:
            fn(item)
            return ""
        except HostError as e:
            return e.message.removeprefix(f"{item.name}: ")
    return run


class Chain:
    """The members' programs, followed: ``start``, ``wait_listening`` or ``point_as_ready``,
    ``sources``, ``wait_ended``, ``stop``. ``on_event(member, event)`` sees every event after
    the chain recorded it, under the chain's lock (what it records on the member, the waits
    see together with the event)."""

    def __init__(self, members: Sequence[Member], on_event: Callable[[Any, dict], None] | None = None,
                 name: str = "chain"):
        self.members = list(members)
        self.on_event = on_event
        self.name = name
        self.heard = threading.Condition()
        self.halt = threading.Event()
        self.reattached: list[Reattached] = []
        self._followers: Background | None = None

    def member(self, name: str) -> Member | None:
        return next((m for m in self.members if m.name == name), None)

    # -- following the programs

    def start(self, argv: Callable[[Any], Sequence[str]], prepare: Callable[[Any], None] | None = None) -> None:
        """Every member not ended yet: ``prepare(member)`` (its files on its host), then its
        program, followed until it ends; each on a thread of its own."""
        def follow(m: Member) -> None:
            try:
                if prepare is not None:
                    prepare(m)
                m.code = m.transport.stream(list(argv(m)), lambda text: self._line(m, text), self.halt)
            except HostError as e:
                m.code, m.other = -1, [e.message.removeprefix(f"{m.name}: ")]
            with self.heard:
                m.ended.set()
                self.heard.notify_all()

        self._followers = background(follow, [m for m in self.members if not m.ended.is_set()], name=self.name,
                                     label=lambda m: m.name)

    def _line(self, m: Member, text: str) -> None:
        ev = _event(m, text)
        if ev is None:
            return
        with self.heard:
            self._record(m, ev)
            if self.on_event is not None:
                self.on_event(m, ev)
            self.heard.notify_all()

    def _record(self, m: Member, ev: dict) -> None:
        kind = ev.get("ev")
        if kind == "listening":
            m.listening = ev
        elif kind == "progress":
            _arrived(m, ev)
        elif kind in ("done", "failed"):
            if "bytes" in ev:
                _arrived(m, ev)
            m.ok = kind == "done"
            m.ended.set()
        elif kind == "error":
            m.errors.append(str(ev.get("why", "")))
        elif kind == "dead":
            self._dead(m, str(ev.get("host")), str(ev.get("why", "")))

    def _dead(self, m: Member, host: str, why: str) -> None:
        self.reattached.append(Reattached(m.name, host, why))
        gone = self.member(host)
        if gone is not None and not gone.ended.is_set():
            gone.dead = why or "it stopped answering"
            gone.ended.set()

    def out(self, m: Member, why: str) -> None:
        """``m`` takes no further part in this run (its program never learns its sources)."""
        with self.heard:
            m.code, m.other = -1, [why]
            m.ended.set()
            self.heard.notify_all()

    # -- start-up: all at once

    def wait_listening(self, timeout: float, stop: threading.Event | None = None) -> None:
        with self.heard:
            self.heard.wait_for(lambda: all(m.listening or m.ended.is_set() for m in self.members) or
                                (stop is not None and stop.is_set()), timeout)

    def sources(self, m: Member, before: Sequence[Member]) -> dict:
        """Where ``m`` reads from: ``before`` (the members before it in the chain) that listen,
        nearest first."""
        return {"sources": [{"name": x.name, "url": x.url} for x in reversed(before) if x.listening]}

    # -- start-up: each member as soon as the ones it reads from listen

    def point_as_ready(self, point: Callable[[Any], None], *, upstream: Callable[[Any], Sequence[Member]],
                       until: Sequence[Member], timeout: float, stop: threading.Event | None = None) -> None:
        """``point(m)`` (on the fan-out) for each member once it listens and every member it
        reads from (``upstream(m)``) listens or ended; until every member of ``until`` ended,
        or ``stop``. Past ``timeout`` a member that has not listened is out of the run; the
        first member not listening raises ``Unstarted``. A member whose ``point`` fails is out."""
        deadline, pointed = time.monotonic() + timeout, set[str]()
        while True:
            now = self._ready(pointed, upstream, until, deadline, timeout)
            if now is None:
                return
            if now:
                pointed.update(m.name for m in now)
                for m, err in zip(now, each(safely(point), now, name=self.name)):
                    if err:
                        self.out(m, err)
            if stop is not None and stop.is_set():
                return

    def _ready(self, pointed: set[str], upstream: Callable[[Any], Sequence[Member]], until: Sequence[Member],
               deadline: float, timeout: float) -> list[Member] | None:
        """The members to point now (waiting a moment for one); None once ``until`` ended."""
        with self.heard:
            late = time.monotonic() > deadline
            head = self.members[0]
            if not head.listening and (head.ended.is_set() or late):
                raise Unstarted(head)
            if late:
                self._unstarted_out(timeout)
            if all(m.ended.is_set() for m in until):
                return None
            now = [m for m in self.members if m.name not in pointed and m.listening and not m.ended.is_set()
                   and _heard_from(upstream(m), m, late)]
            if not now:
                self.heard.wait(0.2)
            return now

    def _unstarted_out(self, timeout: float) -> None:
        """Past the wait: a member that has not said where it listens is out of the run."""
        for m in self.members:
            if not m.listening and not m.ended.is_set():
                m.code, m.other = -1, [f"its relay did not start within {timeout:g} s"]
                m.ended.set()

    # -- the end

    def wait_ended(self, members: Sequence[Member], stop: threading.Event | None = None) -> None:
        while True:
            with self.heard:
                if all(m.ended.is_set() for m in members):
                    return
                self.heard.wait(0.2)
            if stop is not None and stop.is_set():
                return

    def stop(self) -> None:
        """Stop following (each program's SSH session ends, and the program with it)."""
        self.halt.set()
        if self._followers is not None:
            self._followers.join(timeout=10)

    def reachable(self, members: Sequence[M] | None = None) -> list[M]:
        """The members no other named dead (those the clean-up can still reach)."""
        return [m for m in (self.members if members is None else members) if not m.dead]  # type: ignore[misc]


def _event(m: Member, text: str) -> dict | None:
    """A JSON line's event; any other line is kept for the error message."""
    if text.startswith("{"):
        try:
            ev = json.loads(text)
            if isinstance(ev, dict):
                return ev
        except ValueError as e:  # a line that only looks like an event: kept as output
            log.debug("%s: not an event (%s): %.200s", m.name, e, text)
    if text.strip():
        m.other.append(text.strip())
    return None


def _heard_from(upstream: Sequence[Member], m: Member, late: bool) -> bool:
    """Every member ``m`` reads from has said where it listens or is gone (``late``: past the
    wait, one that has said nothing is left out)."""
    return all(x.listening or x.ended.is_set() or late for x in upstream if x is not m)


def _arrived(m: Member, ev: dict) -> None:
    now = time.monotonic()
    n = int(ev.get("bytes", 0))
    if n > m.bytes:
        m.first = m.first or now
        m.last = now
    m.bytes = max(m.bytes, n)
