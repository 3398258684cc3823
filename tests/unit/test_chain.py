"""``execute/hosts/chain.py``: the relays of a chain, followed through their JSON lines (the
transport is the process boundary: a stand-in plays each host's program)."""

from __future__ import annotations

import json
import threading

from inkctl.execute.hosts.chain import Chain, Member


class Host:
    """A transport whose ``stream`` prints the given lines, then waits until stopped (a host
    cut off the network: its session never ends by itself) unless ``ends``."""

    def __init__(self, name: str, lines: list[dict], ends: bool = True):
        self.name, self.lines, self.ends = name, lines, ends
        self.go = threading.Event()

    def stream(self, argv, on_line, stop=None) -> int:
        on_line("some noise from python3")
        on_line(json.dumps(self.lines[0]))
        self.go.wait(5)
        for ev in self.lines[1:]:
            on_line(json.dumps(ev))
        if not self.ends:
            stop.wait(30)
            return -1
        return 0


def test_the_chain_waits_for_every_member_and_takes_one_named_dead_for_ended():
    h1 = Host("h1", [{"ev": "listening", "port": 1}, {"ev": "done"}])
    h2 = Host("h2", [{"ev": "listening", "port": 2}, {"ev": "progress", "bytes": 10}], ends=False)  # cut off
    h3 = Host("h3", [{"ev": "listening", "port": 3}, {"ev": "progress", "bytes": 5},
                     {"ev": "dead", "host": "h2", "why": "timed out", "next": "h1"},
                     {"ev": "progress", "bytes": 20}, {"ev": "done"}])
    members = [Member(h.name, h, f"192.0.2.{i}") for i, h in enumerate((h1, h2, h3), 1)]  # type: ignore[arg-type]
    seen: list[tuple[str, str]] = []
    chain = Chain(members, on_event=lambda m, ev: seen.append((m.name, ev["ev"])))
    chain.start(lambda m: ["relay"])
    chain.wait_listening(5)
    assert [m.listening["port"] for m in members] == [1, 2, 3]
    assert chain.sources(members[2], members[:2]) == {"sources": [
        {"name": "h2", "url": "http://192.0.2.2:2"}, {"name": "h1", "url": "http://192.0.2.1:1"}]}  # nearest first
    for h in (h1, h2, h3):
        h.go.set()
    chain.wait_ended(members[1:])  # returns although h2's session never ends
    chain.stop()
    assert members[2].ok and members[2].bytes == 20 and members[2].other == ["some noise from python3"]
    assert members[1].dead == "timed out" and members[1].ok is None
    assert [(r.host, r.dead) for r in chain.reattached] == [("h3", "h2")]
    assert [m.name for m in chain.reachable()] == ["h1", "h3"]
    assert ("h3", "dead") in seen
