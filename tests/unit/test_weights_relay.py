"""``weights/relay.py`` on the one chain (``execute/hosts/chain.py``), its hosts played by
stand-in transports (the process boundary): each relay is pointed at the hosts before it,
nearest first; a relay host cut mid-copy is named by the next, which reattaches and finishes;
the outcome names the dead host with what had arrived; the clean-up leaves the dead host alone."""

from __future__ import annotations

import json
import threading
import time

from inkctl.execute.hosts.transport import Result
from inkctl.recipe.manifest import FileEntry, Manifest
from inkctl.weights.distribute import Site, WeightsHostDone, WeightsReattached
from inkctl.weights.relay import distribute

SIZE = 20
M = Manifest("test/model", "c" * 40, "main", (FileEntry("model.safetensors", SIZE, sha256="a" * 64),))


class Host:
    """A host whose relay says what ``lines(sources)`` gives once its sources arrive, then
    serves until its session ends (``cut``: it never says done either)."""

    def __init__(self, name: str, lines):
        self.name, self.lines = name, lines
        self.files: dict[str, bytes] = {}
        self.ran: list[list[str]] = []
        self.sources: dict = {}

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self.files[path] = data

    def run(self, argv, timeout=None, **kw) -> Result:
        self.ran.append(list(argv))
        return Result(tuple(argv), 1, b"", b"", 0.0)

    def stream(self, argv, on_line, stop: threading.Event) -> int:
        on_line(json.dumps({"ev": "listening", "address": "x", "port": 7000 + int(self.name[1:])}))
        deadline = time.monotonic() + 10
        while not any(p.endswith(".sources") for p in self.files) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.sources = json.loads(next(v for p, v in self.files.items() if p.endswith(".sources")))
        for ev in self.lines(self.sources):
            on_line(json.dumps(ev))
        stop.wait(30)
        return -1


def site(h: Host, i: int, has: bool) -> Site:
    return Site(h.name, h, "docker", "img", "/cache", "/state/weights", f"192.0.2.{i}",  # type: ignore[arg-type]
                scan={"free": 10**9, "python": True,
                      "files": {"model.safetensors": {"state": "ok" if has else "missing"}}})


def test_a_relay_host_cut_mid_copy_is_named_and_the_next_finishes_from_the_one_before():
    h1 = Host("h1", lambda src: [{"ev": "done", "bytes": 0}])
    h2 = Host("h2", lambda src: [{"ev": "progress", "bytes": 10, "read_s": 1.0, "write_s": 0.1}])  # then cut off
    h3 = Host("h3", lambda src: [{"ev": "progress", "bytes": 5}, {"ev": "dead", "host": "h2", "why": "timed out"},
                                 {"ev": "file", "path": "model.safetensors", "bytes": SIZE, "source": "h1"},
                                 {"ev": "done", "bytes": SIZE, "read_s": 1.0, "write_s": 0.1}])
    events: list = []
    sink = type("Sink", (), {"emit": lambda self, e: events.append(e)})()
    sites = [site(h1, 1, True), site(h2, 2, False), site(h3, 3, False)]
    out = distribute(M, sites, sites[0], hub_url="http://192.0.2.9", hub_env={}, sink=sink)
    assert h3.sources == {"sources": [{"name": "h2", "kind": "peer", "url": "http://192.0.2.2:7002"},
                                      {"name": "h1", "kind": "peer", "url": "http://192.0.2.1:7001"}]}
    assert h2.sources["sources"] == [{"name": "h1", "kind": "peer", "url": "http://192.0.2.1:7001"}]
    assert out.moved == {"h3": SIZE}
    assert out.failed == {"h2": f"went away during the copy (timed out); 10 of {SIZE} bytes arrived, "
                                "partial files are kept for a rerun"}
    assert out.reattached == [("h3", "h2")]
    assert any(isinstance(e, WeightsReattached) and (e.host, e.dead) == ("h3", "h2") for e in events)
    assert [(e.host, e.ok) for e in events if isinstance(e, WeightsHostDone)] == [("h2", False), ("h3", True)]
    removed = [a for a in h1.ran + h3.ran if a[:2] == ["rm", "-f"]]
    assert len(removed) == 2 and not [a for a in h2.ran if a[:2] == ["rm", "-f"]], \
        "the clean-up reaches the hosts it can: not the one named dead"
    assert all("INKCTL_WEIGHTS_TOKEN" not in " ".join(a) for h in (h1, h2, h3) for a in h.ran)
