"""``inkctl images push-to-hosts``: the recipe's image from the host that has it (or from this
machine's docker daemon, when no host has it) to every host that lacks it, along a chain (host
to host over the cluster network, each host loading and forwarding at once: the image crosses
each link once, all links at once), docker or podman on either end (``save`` writes a docker
archive, both ``load`` it).

Each host runs ``relay_host.py`` with its own python3 (the image is not there yet, so it
cannot run in it); the chain itself (start, listen, sources, reattach) is
``execute/hosts/chain.py``. Hosts that already have the image (same id) are left alone.

Layers: every receiver says which layers it has; the first host leaves out of the stream the
layers every receiver has, and each receiver empties in its archive the layers it has before
its ``load`` (see relay_host.py for what each runtime's load accepts). docker's containerd image
store loads only whole archives: a host that uses it gets the whole image, and the run says so.

A relay host that dies mid-stream is named; the hosts after it reattach to the host before it
and finish from the byte they have. From this machine's daemon the stream cannot be replayed:
the first receiver is the chain's source, and the hosts after it fail with it.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from inkctl import runtimes
from inkctl.errors import InkctlError
from inkctl.execute.events import EVENT_NAMES, Event
from inkctl.execute.hosts.chain import Chain, Member, Unstarted, safely
from inkctl.execute.hosts.fanout import background, each
from inkctl.execute.hosts.program import program
from inkctl.execute.hosts.transport import HostError, Transport
from inkctl.execute.state.images import HostImages, normal_id


log = logging.getLogger(__name__)


class NoSource(InkctlError):
    """No host has the image: there is nothing to relay."""


PROGRAM = Path(__file__).with_name("relay_host.py")
LISTEN_TIMEOUT_S = 60
LOCAL = "local"  # the name of this machine's daemon as a source


@dataclass(frozen=True)
class ImageStarted(Event):
    host: str
    source: str  # the host it receives from


@dataclass(frozen=True)
class ImageLayers(Event):
    """What a receiver has of the image: ``have`` of ``of`` layers; ``whole``: why it gets the
    whole image anyway."""
    host: str
    have: int
    of: int
    whole: str = ""


@dataclass(frozen=True)
class ImageProgress(Event):
    host: str
    bytes: int
    rate: float = 0.0  # bytes/s since its first byte


@dataclass(frozen=True)
class ImageReattached(Event):
    """A relay host died mid-stream: ``host`` goes on from the host before it."""
    host: str
    dead: str
    why: str = ""


@dataclass(frozen=True)
class ImageHostDone(Event):
    host: str
    ok: bool
    bytes: int
    seconds: float
    error: str = ""
    rate: float = 0.0


EVENT_NAMES.update({ImageStarted: "image_started", ImageLayers: "image_layers", ImageProgress: "image_progress",
                    ImageReattached: "image_reattached", ImageHostDone: "image_host_done"})


@dataclass
class Node:
    name: str
    transport: Transport
    runtime: str
    work: str
    address: str
    image_id: str | None = None
    have: set = field(default_factory=set)  # the keys of its layers (chain ids, or diff ids: see ``by``)
    by: str = "chain"
    whole: str = ""  # why it cannot take a partial archive


@dataclass
class Pushed:
    image: str
    image_id: str
    source: str
    had: list[str] = field(default_factory=list)  # hosts that had it already
    sent: dict[str, int] = field(default_factory=dict)  # host -> bytes received
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # host -> layers of the image it had
    whole: dict[str, str] = field(default_factory=dict)  # host -> why it got the whole image
    layers: int = 0
    source_bytes: int = 0  # bytes the source sent into the chain
    reattached: list = field(default_factory=list)  # (host, dead host)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"event": "images", "image": self.image, "id": self.image_id, "source": self.source, "had": self.had,
                "sent": self.sent, "failed": self.failed, "layers": self.layers, "skipped": self.skipped,
                "whole": self.whole, "source_bytes": self.source_bytes,
                "reattached": [{"host": h, "dead": d} for h, d in self.reattached],
                "seconds": round(self.seconds, 3), "ok": not self.failed}


def nodes_for(loaded, plan, transports) -> list[Node]:
    return [Node(h.name, transports[h.name], plan.host(h.name).runtime, f"{plan.host(h.name).state_dir}/images",
                 h.rank_address) for h in loaded.hosts]


def push_to_hosts(nodes: list[Node], image: str, *, source: str | None, sink, stop: threading.Event | None = None,
                  local=None) -> Pushed:
    """Put ``image`` on every node that lacks it, from ``source`` (default: the first that has
    it; when none has it, ``local()``: this machine's daemon, or None)."""
    t0 = time.monotonic()
    failed = _look(nodes, image)
    src, daemon = _source(nodes, image, source, failed, local)
    out = Pushed(image, src.image_id or "", src.name, failed=failed)
    lacking = [n for n in nodes if n is not src and n.name not in failed and n.image_id != src.image_id]
    out.had = [n.name for n in nodes if n.name not in failed and n not in lacking]
    if lacking:
        loaded = _Push(src, lacking, image, sink, out, stop, daemon).go()
        _check_arrived(src, [n for n in lacking if n.name not in out.failed], loaded, image, out)
    out.seconds = time.monotonic() - t0
    return out


def _look(nodes: list[Node], image: str) -> dict[str, str]:
    """Which image each node has (``image_id``); host -> why for those that did not answer."""
    return {n.name: err for n, err in zip(nodes, each(safely(_look_one(image)), nodes, name="images")) if err}


def _source(nodes: list[Node], image: str, source: str | None, failed: dict[str, str], local) -> tuple[Node, object]:
    """The node the image comes from, and this machine's daemon when that is the source."""
    if source is not None:
        src = next((n for n in nodes if n.name == source), None)
        if src is None:
            raise InkctlError(f"--from {source}: not a host of the inventory", exit_code=2)
        if not src.image_id:
            raise InkctlError(f"{source} does not have {image}", hint="pick a host that has it (--from HOST)", exit_code=1)
        return src, None
    have = [n for n in nodes if n.image_id and n.name not in failed]
    if have:
        return have[0], None
    daemon = local() if local is not None else None
    info = daemon.inspect(image) if daemon is not None else None
    if daemon is None or info is None:
        raise NoSource(f"no host has {image}" + (", nor this machine's docker daemon" if local is not None else ""),
                       exit_code=1, hint="pull or build it on one host (inkctl build), then run this again")
    return Node(LOCAL, None, daemon.runtime, "", "", image_id=info.id), daemon  # type: ignore[arg-type]


def _check_arrived(src: Node, arrived: list[Node], loaded: dict[str, str], image: str, out: Pushed) -> None:
    """Each host that received the image has the source's image id (its relay said which it
    loaded; where it did not say, look)."""
    for n in arrived:
        n.image_id = normal_id(loaded[n.name]) if loaded.get(n.name) else None
    unsaid = [n for n in arrived if not n.image_id]
    wrong = {n.name: err for n, err in zip(unsaid, each(safely(_look_one(image)), unsaid, name="images")) if err}
    for n in arrived:
        if n.name not in wrong and n.image_id != src.image_id:
            wrong[n.name] = f"{image} arrived as {n.image_id}, not {src.image_id}"
    for name, why in wrong.items():
        out.failed[name] = why
        out.sent.pop(name, None)


def _look_one(image: str) -> Callable[[Node], None]:
    def look(n: Node) -> None:
        info = HostImages(n.transport, n.runtime).inspect(image)
        n.image_id = info.id if info else None
    return look


class _Push:
    """One run of the chain: start a relay on every host of it; each says where it listens
    and which layers it has; then each gets its plan (sources, what to leave out) and the bytes
    move."""

    def __init__(self, src: Node, receivers: list[Node], image: str, sink, out: Pushed, stop: threading.Event | None,
                 daemon):
        self.src, self.receivers, self.image, self.sink, self.out = src, receivers, image, sink, out
        self.stop, self.daemon = stop, daemon
        self.token = secrets.token_hex(32)
        self.run = secrets.token_hex(4)  # this run's file names
        self.code = program(PROGRAM)  # one file: the shared host-side part inlined
        self.hosts = ([src] if daemon is None else []) + receivers
        self.first = receivers[0]
        self.nodes = {n.name: n for n in self.hosts}
        self.members = {n.name: Member(n.name, n.transport, n.address) for n in self.hosts}
        self.sent = 0  # bytes the source host sent into the chain
        self.loaded: dict[str, str] = {}  # host -> the image id its runtime reports after the load
        self.chain = Chain(list(self.members.values()), on_event=self.seen)

    def seen(self, m: Member, ev: dict) -> None:
        kind = ev.get("ev")
        if kind == "done" and ev.get("id"):
            self.loaded[m.name] = str(ev["id"])
        elif kind == "progress" and m.name == self.src.name:
            self.sent = int(ev.get("sent", self.sent))
        elif kind == "progress":
            self.sink.emit(ImageProgress(m.name, m.bytes, round(m.rate, 1)))
        elif kind == "dead":
            self.sink.emit(ImageReattached(m.name, str(ev.get("host")), str(ev.get("why", ""))))

    def prepare(self, m: Member) -> None:
        """On the relay's own thread, before it starts: the program and its job (0600: the
        token, never on a command line)."""
        n = self.nodes[m.name]
        job = {"image": self.image, "runtime": runtimes.get(n.runtime).relay(), "bind": n.address, "token": self.token,
               "input": "save" if n is self.src else ("fifo" if self.fed(n) else "peer"),
               "forward": n is not self.receivers[-1], "spool_dir": n.work, "fifo": f"{n.work}/feed-{self.run}",
               "sources_file": f"{n.work}/plan-{self.run}.json"}
        n.transport.put(f"{n.work}/relay.py", self.code, 0o644)
        n.transport.put(f"{n.work}/job-{self.run}.json", json.dumps(job).encode(), 0o600)

    def argv(self, m: Member) -> list[str]:
        # -I -S: the standard library only, whatever the host's site-packages hold (and a faster start)
        work = self.nodes[m.name].work
        return ["python3", "-I", "-S", f"{work}/relay.py", f"{work}/job-{self.run}.json"]

    def fed(self, n: Node) -> bool:
        """``n`` reads this machine's daemon's stream (through a FIFO), not a host's."""
        return self.daemon is not None and n is self.first

    def go(self) -> dict[str, str]:
        feeding = None
        try:
            self.chain.start(self.argv, prepare=self.prepare)
            self.chain.wait_listening(LISTEN_TIMEOUT_S, self.stop)
            self._check_head()
            diff_ids = (self.daemon.layers(self.image) if self.daemon is not None
                        else self.members[self.src.name].listening.get("image")) or []
            skip, dropped = self._layers(diff_ids)
            self._plan_all([d.removeprefix("sha256:") for d in diff_ids], skip, dropped)
            self._announce()
            if self.daemon is not None:
                feeding = background(lambda n: _feed(n, self.daemon, self.image,
                                                     [d.removeprefix("sha256:") for d in diff_ids], dropped,
                                                     f"{n.work}/feed-{self.run}", self.out),
                                     [self.first], name="images-feed", label=lambda n: n.name)
            self.chain.wait_ended([self.members[n.name] for n in self.receivers], self.stop)
        finally:
            self._end(feeding)
        self.out.reattached = [(r.host, r.dead) for r in self.chain.reattached]
        if self.daemon is None:
            self.out.source_bytes = self.sent
        _outcome(self.receivers, self.members, self.out, self.sink)
        return self.loaded

    def _check_head(self) -> None:
        head = self.members[self.hosts[0].name]
        if not head.listening:
            raise InkctlError(f"the image relay on {head.name} did not start {Unstarted(head).detail}",
                              hint=f"it runs with python3 on the host: is python3 on {head.name}'s PATH?")

    def _layers(self, diff_ids: list[str]) -> tuple[dict[str, set[str]], list[str]]:
        """What each receiver has of the image (host -> its layers to leave out of its load),
        and what the source leaves out of the stream (what every receiver has)."""
        up = [n for n in self.receivers if self.members[n.name].listening]
        for n in up:
            said = self.members[n.name].listening
            n.have, n.by, n.whole = set(said.get("have") or ()), said.get("by", "chain"), said.get("whole", "")
        self.out.layers = len(diff_ids)
        skip = {n.name: _skip(n, diff_ids) for n in up}
        drop = set.intersection(*skip.values()) if skip else set()
        for n in up:
            self.out.skipped[n.name] = len(skip[n.name])
            if n.whole:
                self.out.whole[n.name] = n.whole
            self.sink.emit(ImageLayers(n.name, len(skip[n.name]), self.out.layers, n.whole))
        return skip, sorted(d.removeprefix("sha256:") for d in drop)

    def _plan_all(self, hexes: list[str], skip: dict[str, set[str]], dropped: list[str]) -> None:
        """Each relay that listens gets its plan; one whose plan cannot be written would wait
        for it: not part of this run."""
        order = [self.members[n.name] for n in self.hosts]

        def plan(n: Node) -> None:
            doc: dict = {"layers": hexes, "drop": dropped if n is self.src else [],
                         "skip": sorted(d.removeprefix("sha256:") for d in skip.get(n.name, ()))}
            if n is not self.src and not self.fed(n):
                doc.update(self.chain.sources(self.members[n.name], order[:self.hosts.index(n)]))
            n.transport.put(f"{n.work}/plan-{self.run}.json", json.dumps(doc).encode(), 0o600)

        planned = [n for n in self.hosts if self.members[n.name].listening]
        for n, err in zip(planned, each(safely(plan), planned, name="images")):
            if err:
                with self.chain.heard:
                    self.members[n.name].errors.append(f"its plan could not be written: {err}")
                    self.members[n.name].ended.set()

    def _announce(self) -> None:
        order = [self.members[n.name] for n in self.hosts]
        for i, n in enumerate(self.hosts):
            m = self.members[n.name]
            if n is not self.src and m.listening and not m.ended.is_set():
                nearest = self.chain.sources(m, order[:i])["sources"]
                self.sink.emit(ImageStarted(n.name, nearest[0]["name"] if nearest else LOCAL))

    def _end(self, feeding) -> None:
        """Stop following; a relay removes its job and its plan once read, one that did not
        end well may not have: remove them where the host can still be reached."""
        self.chain.stop()
        left = [n for n in self.hosts if not self.members[n.name].ok and not self.members[n.name].dead]
        run = self.run
        each(safely(lambda n: n.transport.run(["rm", "-f", f"{n.work}/job-{run}.json", f"{n.work}/plan-{run}.json",
                                               f"{n.work}/feed-{run}"], timeout=30)), left, name="images")
        if feeding is not None:
            feeding.join(timeout=10)


def _skip(n: Node, diff_ids: list[str]) -> set[str]:
    """The image's layers this host has (none where its runtime takes only whole archives)."""
    if n.whole:
        return set()
    keys = _chain_ids(diff_ids) if n.by == "chain" else diff_ids
    return {d for d, k in zip(diff_ids, keys) if k in n.have}


def _chain_ids(diff_ids: list[str]) -> list[str]:
    from inkctl.execute.image.relay_host import chain_ids

    return chain_ids(diff_ids)


def _feed(n: Node, daemon, image: str, diff_ids: list[str], drop: list[str], fifo: str, out: Pushed) -> None:
    """This machine's ``docker save`` (the SDK), without the layers every receiver has, into the
    first receiver's relay (a FIFO there, over the SSH channel)."""
    import tempfile

    from inkctl.execute.image.relay_host import TarFilter

    with tempfile.TemporaryDirectory(prefix="inkctl-image-") as tmp:
        def chunks() -> Iterator[bytes]:
            ready: list[bytes] = []
            f = TarFilter(diff_ids, drop, ready.append, spool_dir=tmp if drop else None)
            for block in daemon.save(image):
                f.feed(block)
                while ready:
                    part = ready.pop(0)
                    out.source_bytes += len(part)
                    yield part
        try:
            n.transport.run(["python3", "-I", "-S", f"{n.work}/relay.py", "feed", fifo], stdin=chunks())
        except HostError as e:  # the receiver's own events say what happened to it
            log.debug("%s: feeding the image: %s", n.name, e.reason)


def _outcome(receivers: list[Node], members: dict[str, Member], out: Pushed, sink) -> None:
    names = [n.name for n in receivers]
    for n in receivers:
        m = members[n.name]
        if m.ok:
            out.sent[n.name] = m.bytes
            sink.emit(ImageHostDone(n.name, True, m.bytes, round((m.last or 0) - (m.first or 0), 3), rate=round(m.rate, 1)))
            continue
        gone = [x for x in names[:names.index(n.name)] if members[x].dead or (not members[x].ok and members[x].code == -1)]
        why = _why(m, gone)
        out.failed[n.name] = why
        sink.emit(ImageHostDone(n.name, False, m.bytes, 0.0, why))


def _why(m: Member, gone: list[str]) -> str:
    """Why a host did not get the image; ``gone``: the hosts before it that went away."""
    if m.dead:
        return f"went away during the copy ({m.dead}) after {m.bytes} bytes"
    if m.ok is None and m.code == -1:
        return "went away during the copy" + (f" ({m.other[-1]})" if m.other else "")
    why = "; ".join(dict.fromkeys(m.errors)) or f"exit {m.code}: " + (" | ".join(m.other[-3:]) or "no output")
    if gone and not m.errors:
        why = f"{gone[-1]} (before it in the chain) went away: {why}"
    return why
