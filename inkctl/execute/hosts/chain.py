"""A chain of relays, one program per host, each serving what it receives to the host after it:
what the image relay runs (``execute/image/relay.py``) and what the weights relay does the same
way (``weights/relay.py``, still with its own copy of this: to move).

    source -> h2 -> h3 -> ... -> hN

- every member's program starts at once (the fan-out's ``background``); it answers JSON lines
  (``{"ev": ...}``): ``listening`` (its port), ``progress`` (bytes), ``error``, ``done``, and
  ``dead`` (the host it read from went away; it now reads from the next one of its list);
- start-up is two steps because a sender's port is known only once it listens: every member
  says where it listens, then each gets its sources, the members before it, nearest first
  (``sources``), so that a member whose upstream dies asks the one before that;
- a member named dead by another counts as ended: the run does not wait for its SSH session
  (a host cut off the network answers nothing until its keepalive gives up).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from inkctl.execute.hosts.fanout import Background, background
from inkctl.execute.hosts.transport import HostError, Transport


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


@dataclass
class Reattached:
    host: str
    dead: str
    why: str = ""


class Chain:
    """The members' programs, followed: ``start``, ``wait_listening``, ``sources``,
    ``wait_ended``, ``stop``. ``on_event(member, event)`` sees every event after the chain
    recorded it (outside the lock)."""

    def __init__(self, members: Sequence[Member], on_event: Callable[[Member, dict], None] | None = None):
        self.members = list(members)
        self.on_event = on_event
        self.heard = threading.Condition()
        self.halt = threading.Event()
        self.reattached: list[Reattached] = []
        self._followers: Background | None = None

    def member(self, name: str) -> Member | None:
        return next((m for m in self.members if m.name == name), None)

    def start(self, argv: Callable[[Member], list[str]]) -> None:
        def follow(m: Member) -> None:
            try:
                m.code = m.transport.stream(argv(m), lambda text: self._line(m, text), self.halt)
            except HostError as e:
                m.code, m.other = -1, [e.message.removeprefix(f"{m.name}: ")]
            with self.heard:
                m.ended.set()
                self.heard.notify_all()

        self._followers = background(follow, [m for m in self.members if not m.ended.is_set()], name="chain",
                                     label=lambda m: m.name)

    def _line(self, m: Member, text: str) -> None:
        if not text.startswith("{"):
            if text.strip():
                m.other.append(text.strip())
            return
        try:
            ev = json.loads(text)
        except ValueError:
            return
        kind = ev.get("ev")
        with self.heard:
            if kind == "listening":
                m.listening = ev
            elif kind == "progress":
                now = time.monotonic()
                n = int(ev.get("bytes", 0))
                if n > m.bytes:
                    m.first = m.first or now
                    m.last = now
                m.bytes = max(m.bytes, n)
            elif kind == "error":
                m.errors.append(str(ev.get("why", "")))
            elif kind == "done":
                m.ok = True
                m.ended.set()
            elif kind == "dead":
                self.reattached.append(Reattached(m.name, str(ev.get("host")), str(ev.get("why", ""))))
                gone = self.member(str(ev.get("host")))
                if gone is not None and not gone.ended.is_set():
                    gone.dead = str(ev.get("why", "")) or "it stopped answering"
                    gone.ended.set()
            self.heard.notify_all()
        if self.on_event is not None:
            self.on_event(m, ev)

    def wait_listening(self, timeout: float, stop: threading.Event | None = None) -> None:
        with self.heard:
            self.heard.wait_for(lambda: all(m.listening or m.ended.is_set() for m in self.members) or
                                (stop is not None and stop.is_set()), timeout)

    def sources(self, m: Member, before: Sequence[Member]) -> dict:
        """Where ``m`` reads from: ``before`` (the members before it in the chain) that listen,
        nearest first."""
        return {"sources": [{"name": x.name, "url": x.url} for x in reversed(before) if x.listening]}

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

    def reachable(self) -> list[Member]:
        """The members no other named dead (those the clean-up can still reach)."""
        return [m for m in self.members if not m.dead]
