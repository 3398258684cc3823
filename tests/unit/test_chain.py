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


class Quiet:
    """A transport whose program says nothing until ``go``, then its lines (a host slow to start)."""

    def __init__(self, name: str, lines: list[dict], stays: bool = False):
        self.name, self.lines, self.stays = name, lines, stays
        self.go = threading.Event()

    def stream(self, argv, on_line, stop=None) -> int:
        self.go.wait(10)
        for ev in self.lines:
            on_line(json.dumps(ev))
        if self.stays:  # a relay serves until its session ends
            stop.wait(30)
        return 0


def test_each_member_is_pointed_once_the_members_it_reads_from_listen_and_not_before():
    """The weights' start-up: h3 listens at once but reads from h2, which is slow to start; h3
    is pointed only once h2 listens. ``prepare`` runs on each member's own thread first."""
    hosts = [Quiet(f"h{i}", [{"ev": "listening", "port": i}], stays=True) for i in (1, 2, 3)]
    members = [Member(h.name, h, f"192.0.2.{i}") for i, h in enumerate(hosts, 1)]  # type: ignore[arg-type]
    chain = Chain(members)
    prepared: list[str] = []
    pointed: list[tuple[str, list[str]]] = []

    def point(m: Member) -> None:
        pointed.append((m.name, sorted(x.name for x in members if x.listening)))
        if m.name == "h3":  # the last one pointed: every program ends, as a fetch that is over
            for x in members:
                with chain.heard:
                    x.ended.set()
                    chain.heard.notify_all()

    chain.start(lambda m: ["relay"], prepare=lambda m: prepared.append(m.name))
    hosts[0].go.set()
    hosts[2].go.set()
    runner = threading.Thread(target=chain.point_as_ready, args=(point,), kwargs=dict(
        upstream=lambda m: members[:members.index(m)], until=members, timeout=10))
    runner.start()
    runner.join(1.0)
    assert runner.is_alive() and [p for p, _ in pointed] == ["h1"], "h3 waits for h2"
    hosts[1].go.set()
    runner.join(10)
    chain.stop()
    assert sorted(prepared) == ["h1", "h2", "h3"]
    assert [p for p, _ in pointed][-1] == "h3" and pointed[-1][1] == ["h1", "h2", "h3"]


def test_a_source_that_does_not_listen_stops_the_start_and_a_failed_prepare_leaves_a_member_out():
    from inkctl.execute.hosts.chain import Unstarted
    from inkctl.execute.hosts.transport import HostError

    h1 = Quiet("h1", [])
    h1.go.set()  # its program ends without a word
    members = [Member("h1", h1, "192.0.2.1")]  # type: ignore[arg-type]
    chain = Chain(members)
    chain.start(lambda m: ["relay"])
    try:
        chain.point_as_ready(lambda m: None, upstream=lambda m: [], until=members, timeout=10)
        raise AssertionError("no Unstarted")
    except Unstarted as e:
        assert e.member is members[0] and e.detail == "(exit 0): no answer"
    chain.stop()

    h2 = Quiet("h2", [{"ev": "listening", "port": 2}])
    h2.go.set()
    members = [Member("h2", h2, "192.0.2.2")]  # type: ignore[arg-type]
    chain = Chain(members)

    def prepare(m: Member) -> None:
        raise HostError(m.name, "command", "cannot write its job: disk full")

    chain.start(lambda m: ["relay"], prepare=prepare)
    chain.wait_ended(members)
    chain.stop()
    assert members[0].code == -1 and members[0].other == ["cannot write its job: disk full"]
    assert not members[0].listening


def test_done_and_failed_end_a_members_fetch_with_its_bytes_and_the_hook_sees_them_recorded():
    h1 = Quiet("h1", [{"ev": "listening", "port": 1}, {"ev": "progress", "bytes": 5},
                      {"ev": "failed", "bytes": 7}, {"ev": "error", "why": "x: not found"}])
    h2 = Quiet("h2", [{"ev": "listening", "port": 2}, {"ev": "done", "bytes": 9}])
    members = [Member(h.name, h, f"192.0.2.{i}") for i, h in enumerate((h1, h2), 1)]  # type: ignore[arg-type]
    at_done: list[tuple[str, bool, int]] = []
    chain = Chain(members, on_event=lambda m, ev: at_done.append((m.name, m.ended.is_set(), m.bytes))
                  if ev["ev"] in ("done", "failed") else None)
    chain.start(lambda m: ["relay"])
    h1.go.set()
    h2.go.set()
    chain.wait_ended(members)
    chain.stop()
    assert members[0].ok is False and members[0].bytes == 7 and members[0].errors == ["x: not found"]
    assert members[1].ok is True and members[1].bytes == 9
    assert sorted(at_done) == [("h1", True, 7), ("h2", True, 9)]


RELAYS = ("inkctl/execute/hosts/chain.py", "inkctl/weights/relay.py", "inkctl/execute/image/relay.py")


def test_the_relays_on_the_one_chain_stay_small():
    """Both relays run on ``chain.py`` and keep their own parts small (McCabe, as radon counts:
    ``test_thin.complexity``); neither grows its own chain loop again."""
    import ast
    from pathlib import Path

    from tests.unit.test_thin import complexity, functions

    root = Path(__file__).resolve().parents[2]
    heavy = [f"{rel}:{line} {name}: {c}" for rel in RELAYS for name, line, node in functions(root / rel)
             if (c := complexity(node)) > 15]
    assert not heavy, "\n".join(heavy)
    for rel in RELAYS[1:]:
        tree = ast.parse((root / rel).read_text())
        imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert {("inkctl.execute.hosts.chain", "Chain"), ("inkctl.execute.hosts.chain", "Member")} <= imported, \
            f"{rel} does not run on execute/hosts/chain.py"
    weights = ast.parse((root / RELAYS[1]).read_text())
    assert not [n for n in ast.walk(weights) if isinstance(n, ast.ImportFrom) and n.module == "inkctl.execute.hosts.fanout"
                and any(a.name == "background" for a in n.names)], "the weights relay follows its relays itself again"
