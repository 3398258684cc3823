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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from inkctl.errors import InkctlError
from inkctl.execute.events import EVENT_NAMES, Event
from inkctl.execute.hosts.chain import Chain, Member
from inkctl.execute.hosts.fanout import background, each
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
    have: set = field(default_factory=set)  # the keys of its layers (docker: chain ids; podman: diff ids)
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

    def look(n: Node) -> None:
        info = HostImages(n.transport, n.runtime).inspect(image)
        n.image_id = info.id if info else None

    failed = {}
    for n, err in zip(nodes, each(_safely(look), nodes, name="images")):
        if err:
            failed[n.name] = err
    have = [n for n in nodes if n.image_id and n.name not in failed]
    daemon = None
    if source is not None:
        src = next((n for n in nodes if n.name == source), None)
        if src is None:
            raise InkctlError(f"--from {source}: not a host of the inventory", exit_code=2)
        if not src.image_id:
            raise InkctlError(f"{source} does not have {image}", hint="pick a host that has it (--from HOST)", exit_code=1)
    elif have:
        src = have[0]
    else:
        daemon = local() if local is not None else None
        info = daemon.inspect(image) if daemon is not None else None
        if info is None:
            raise NoSource(f"no host has {image}" + (", nor this machine's docker daemon" if local is not None else ""),
                           exit_code=1, hint="pull or build it on one host (inkctl build), then run this again")
        src = Node(LOCAL, None, "docker", "", "", image_id=info.id)  # type: ignore[arg-type]
    out = Pushed(image, src.image_id or "", src.name, failed=failed)
    lacking = [n for n in nodes if n is not src and n.name not in failed and n.image_id != src.image_id]
    out.had = [n.name for n in nodes if n.name not in failed and n not in lacking]
    if lacking:
        loaded = _relay(src, lacking, image, sink, out, stop, daemon)
        arrived = [n for n in lacking if n.name not in out.failed]
        for n in arrived:
            n.image_id = normal_id(loaded[n.name]) if loaded.get(n.name) else None
        unsaid = [n for n in arrived if not n.image_id]  # its relay did not say what it loaded: look
        for n, err in zip(unsaid, each(_safely(look), unsaid, name="images")):
            if err:
                out.failed[n.name] = err
                out.sent.pop(n.name, None)
        for n in arrived:
            if n.name not in out.failed and n.image_id != src.image_id:
                out.failed[n.name] = f"{image} arrived as {n.image_id}, not {src.image_id}"
                out.sent.pop(n.name, None)
    out.seconds = time.monotonic() - t0
    return out


def _relay(src: Node, receivers: list[Node], image: str, sink, out: Pushed, stop: threading.Event | None,
           daemon) -> dict[str, str]:
    """Start a relay on every host of the chain; each says where it listens and which layers it
    has; then each gets its plan (sources, what to leave out) and the bytes move."""
    token = secrets.token_hex(32)
    run = secrets.token_hex(4)  # this run's file names
    code = PROGRAM.read_bytes()
    hosts = ([src] if daemon is None else []) + receivers
    first = receivers[0]
    members = {n.name: Member(n.name, n.transport, n.address) for n in hosts}
    work = {n.name: n.work for n in hosts}
    sent = {"bytes": 0}
    loaded: dict[str, str] = {}  # host -> the image id its runtime reports after the load

    def seen(m: Member, ev: dict) -> None:
        kind = ev.get("ev")
        if kind == "done" and ev.get("id"):
            loaded[m.name] = str(ev["id"])
        elif kind == "progress" and m.name == src.name:
            sent["bytes"] = int(ev.get("sent", sent["bytes"]))
        elif kind == "progress":
            sink.emit(ImageProgress(m.name, m.bytes, round(m.rate, 1)))
        elif kind == "dead":
            sink.emit(ImageReattached(m.name, str(ev.get("host")), str(ev.get("why", ""))))

    chain = Chain(list(members.values()), on_event=seen)

    def prepare(n: Node) -> None:
        job = {"image": image, "runtime": n.runtime, "bind": n.address, "token": token,
               "input": "save" if n is src else ("fifo" if daemon is not None and n is first else "peer"),
               "forward": n is not receivers[-1], "spool_dir": n.work, "fifo": f"{n.work}/feed-{run}",
               "sources_file": f"{n.work}/plan-{run}.json"}
        n.transport.put(f"{n.work}/relay.py", code, 0o644)
        n.transport.put(f"{n.work}/job-{run}.json", json.dumps(job).encode(), 0o600)  # the token: 0600, no argv

    feeding = None
    try:
        for n, err in zip(hosts, each(_safely(prepare), hosts, name="images")):
            if err:
                members[n.name].code, members[n.name].other = -1, [err]
                members[n.name].ended.set()
        # -I -S: the standard library only, whatever the host's site-packages hold (and a faster start)
        chain.start(lambda m: ["python3", "-I", "-S", f"{work[m.name]}/relay.py", f"{work[m.name]}/job-{run}.json"])
        chain.wait_listening(LISTEN_TIMEOUT_S, stop)
        head = members[hosts[0].name]
        if not head.listening:
            raise InkctlError(f"the image relay on {head.name} did not start (exit {head.code}): " +
                              (" | ".join(head.other[-3:]) or "no answer"),
                              hint=f"it runs with python3 on the host: is python3 on {head.name}'s PATH?")
        diff_ids = (daemon.layers(image) if daemon is not None else members[src.name].listening.get("image")) or []
        up = [n for n in receivers if members[n.name].listening]
        for n in up:
            said = members[n.name].listening
            n.have, n.by, n.whole = set(said.get("have") or ()), said.get("by", "chain"), said.get("whole", "")
        out.layers = len(diff_ids)
        skip = {n.name: _skip(n, diff_ids) for n in up}
        drop = set.intersection(*skip.values()) if skip else set()
        for n in up:
            out.skipped[n.name] = len(skip[n.name])
            if n.whole:
                out.whole[n.name] = n.whole
            sink.emit(ImageLayers(n.name, len(skip[n.name]), out.layers, n.whole))
        hexes = [d.removeprefix("sha256:") for d in diff_ids]
        dropped = sorted(d.removeprefix("sha256:") for d in drop)
        order = [members[n.name] for n in hosts]

        def plan(n: Node) -> None:
            i = hosts.index(n)
            doc: dict = {"layers": hexes, "drop": dropped if n is src else [],
                         "skip": sorted(d.removeprefix("sha256:") for d in skip.get(n.name, ()))}
            if n is not src and not (daemon is not None and n is first):
                doc.update(chain.sources(members[n.name], order[:i]))
            n.transport.put(f"{n.work}/plan-{run}.json", json.dumps(doc).encode(), 0o600)

        planned = [n for n in hosts if members[n.name].listening]
        for n, err in zip(planned, each(_safely(plan), planned, name="images")):
            if err:  # it would wait for its plan: not part of this run
                with chain.heard:
                    members[n.name].errors.append(f"its plan could not be written: {err}")
                    members[n.name].ended.set()
        for i, n in enumerate(hosts):
            if n is not src and members[n.name].listening and not members[n.name].ended.is_set():
                nearest = chain.sources(members[n.name], order[:i])["sources"]
                sink.emit(ImageStarted(n.name, nearest[0]["name"] if nearest else LOCAL))
        if daemon is not None:
            fifo = f"{first.work}/feed-{run}"
            feeding = background(lambda n: _feed(n, daemon, image, hexes, dropped, fifo, out), [first],
                                 name="images-feed", label=lambda n: n.name)
        chain.wait_ended([members[n.name] for n in receivers], stop)
    finally:
        chain.stop()
        # a relay removes its job and its plan once read; one that did not end well may not have
        left = [n for n in hosts if not members[n.name].ok and not members[n.name].dead]
        each(_safely(lambda n: n.transport.run(["rm", "-f", f"{n.work}/job-{run}.json", f"{n.work}/plan-{run}.json",
                                                f"{n.work}/feed-{run}"], timeout=30)), left, name="images")
        if feeding is not None:
            feeding.join(timeout=10)
    out.reattached = [(r.host, r.dead) for r in chain.reattached]
    if daemon is None:
        out.source_bytes = sent["bytes"]
    _outcome(receivers, members, out, sink)
    return loaded


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
        if m.dead:
            why = f"went away during the copy ({m.dead}) after {m.bytes} bytes"
        elif m.ok is None and m.code == -1:
            why = "went away during the copy" + (f" ({m.other[-1]})" if m.other else "")
        else:
            why = "; ".join(dict.fromkeys(m.errors)) or f"exit {m.code}: " + (" | ".join(m.other[-3:]) or "no output")
            gone = [x for x in names[:names.index(n.name)]
                    if members[x].dead or (not members[x].ok and members[x].code == -1)]
            if gone and not m.errors:
                why = f"{gone[-1]} (before it in the chain) went away: {why}"
        out.failed[n.name] = why
        sink.emit(ImageHostDone(n.name, False, m.bytes, 0.0, why))


def _safely(fn):
    def run(n) -> str:
        try:
            fn(n)
            return ""
        except HostError as e:
            return e.message.removeprefix(f"{n.name}: ")
    return run
