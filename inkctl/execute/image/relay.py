"""``inkctl images push-to-hosts``: the recipe's image from the host that has it to every host
that lacks it, along a chain (host to host over the cluster network, each host loading and
forwarding at once: the image crosses each link once, all links at once), docker or podman on
either end (``save`` writes a docker archive, both ``load`` it).

Each host runs ``relay_host.py`` with its own python3 (the image is not there yet, so it
cannot run in it). Hosts that already have the image (same id) are left alone. The whole image
moves: a host that has some of its layers still receives them (``save``/``load`` cannot skip a
layer; a registry can, see ``build --push``). A relay host that dies mid-stream is named and
the hosts after it fail with it; a rerun sends only to the hosts still lacking the image.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from inkctl.errors import InkctlError
from inkctl.execute.events import EVENT_NAMES, Event
from inkctl.execute.hosts.fanout import each
from inkctl.execute.state.images import HostImages
from inkctl.execute.hosts.transport import HostError, Transport

class NoSource(InkctlError):
    """No host has the image: there is nothing to relay."""


PROGRAM = Path(__file__).with_name("relay_host.py")
LISTEN_TIMEOUT_S = 60


@dataclass(frozen=True)
class ImageStarted(Event):
    host: str
    source: str  # the host it receives from


@dataclass(frozen=True)
class ImageProgress(Event):
    host: str
    bytes: int
    rate: float = 0.0  # bytes/s since its first byte


@dataclass(frozen=True)
class ImageHostDone(Event):
    host: str
    ok: bool
    bytes: int
    seconds: float
    error: str = ""
    rate: float = 0.0


EVENT_NAMES.update({ImageStarted: "image_started", ImageProgress: "image_progress", ImageHostDone: "image_host_done"})


@dataclass
class Node:
    name: str
    transport: Transport
    runtime: str
    work: str
    address: str
    image_id: str | None = None
    listening: dict = field(default_factory=dict)
    ended: threading.Event = field(default_factory=threading.Event)
    ok: bool | None = None
    bytes: int = 0
    errors: list = field(default_factory=list)
    code: int | None = None
    other: list = field(default_factory=list)
    first: float | None = None
    last: float | None = None


@dataclass
class Pushed:
    image: str
    image_id: str
    source: str
    had: list[str] = field(default_factory=list)  # hosts that had it already
    sent: dict[str, int] = field(default_factory=dict)  # host -> bytes received
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"event": "images", "image": self.image, "id": self.image_id, "source": self.source, "had": self.had,
                "sent": self.sent, "failed": self.failed, "seconds": round(self.seconds, 3), "ok": not self.failed}


def nodes_for(loaded, plan, transports) -> list[Node]:
    return [Node(h.name, transports[h.name], plan.host(h.name).runtime, f"{plan.host(h.name).state_dir}/images",
                 h.rank_address) for h in loaded.hosts]


def push_to_hosts(nodes: list[Node], image: str, *, source: str | None, sink,
                  stop: threading.Event | None = None) -> Pushed:
    """Put ``image`` on every node that lacks it, from ``source`` (default: the first that has it)."""
    t0 = time.monotonic()

    def look(n: Node) -> None:
        info = HostImages(n.transport, n.runtime).inspect(image)
        n.image_id = info.id if info else None

    failed = {}
    for n, err in zip(nodes, each(_safely(look), nodes, name="images")):
        if err:
            failed[n.name] = err
    have = [n for n in nodes if n.image_id and n.name not in failed]
    if source is not None:
        src = next((n for n in nodes if n.name == source), None)
        if src is None:
            raise InkctlError(f"--from {source}: not a host of the inventory", exit_code=2)
        if not src.image_id:
            raise InkctlError(f"{source} does not have {image}", hint="pick a host that has it (--from HOST)", exit_code=1)
    elif not have:
        raise NoSource(f"no host has {image}", exit_code=1,
                          hint="pull or build it on one host (inkctl build), then run this again")
    else:
        src = have[0]
    out = Pushed(image, src.image_id or "", src.name, failed=failed)
    lacking = [n for n in nodes if n is not src and n.name not in failed and n.image_id != src.image_id]
    out.had = [n.name for n in nodes if n.name not in failed and n not in lacking]
    if lacking:
        _relay([src] + lacking, image, sink, out, stop)
        for n, err in zip(lacking, each(_safely(look), lacking, name="images")):
            if n.name in out.failed:
                continue
            if err or n.image_id != src.image_id:
                out.failed[n.name] = err or f"{image} arrived as {n.image_id}, not {src.image_id}"
                out.sent.pop(n.name, None)
    out.seconds = time.monotonic() - t0
    return out


def _relay(chain: list[Node], image: str, sink, out: Pushed, stop: threading.Event | None) -> None:
    token = secrets.token_hex(32)
    run = secrets.token_hex(4)  # this run's file names
    heard = threading.Condition()
    halt = threading.Event()
    code = PROGRAM.read_bytes()

    def prepare(n: Node) -> None:
        i = chain.index(n)
        n.transport.put(f"{n.work}/relay.py", code, 0o644)
        job = {"image": image, "runtime": n.runtime, "bind": n.address, "input": "save" if i == 0 else "peer",
               "forward": i + 1 < len(chain), "token": token, "sources_file": f"{n.work}/source-{run}.json"}
        n.transport.put(f"{n.work}/job-{run}.json", json.dumps(job).encode(), 0o600)  # the token: 0600, no argv

    def launch(n: Node) -> None:
        def line(text: str) -> None:
            if not text.startswith("{"):
                if text.strip():
                    n.other.append(text.strip())
                return
            try:
                ev = json.loads(text)
            except ValueError:
                return
            with heard:
                if ev.get("ev") == "listening":
                    n.listening = ev
                elif ev.get("ev") == "progress":
                    now = time.monotonic()
                    if n.first is None:
                        n.first = now
                    n.last, n.bytes = now, int(ev["bytes"])
                elif ev.get("ev") == "error":
                    n.errors.append(ev["why"])
                elif ev.get("ev") == "done":
                    n.ok = True
                    n.ended.set()
                heard.notify_all()
            if ev.get("ev") == "progress" and n is not chain[0]:
                sink.emit(ImageProgress(n.name, n.bytes, round(_rate(n), 1)))

        try:
            n.code = n.transport.stream(["python3", f"{n.work}/relay.py", f"{n.work}/job-{run}.json"], line, halt)
        except HostError as e:
            n.code, n.other = -1, [e.message.removeprefix(f"{n.name}: ")]
        with heard:
            n.ended.set()
            heard.notify_all()

    threads = []
    try:
        for n, err in zip(chain, each(_safely(prepare), chain, name="images")):
            if err:
                n.code, n.other = -1, [err]
                n.ended.set()
        for n in chain:
            if not n.ended.is_set():
                th = threading.Thread(target=launch, args=(n,), daemon=True, name=f"images-{n.name}")
                th.start()
                threads.append(th)
        with heard:
            heard.wait_for(lambda: all(n.listening or n.ended.is_set() for n in chain), LISTEN_TIMEOUT_S)
        if not chain[0].listening:
            raise InkctlError(f"the image relay on {chain[0].name} did not start (exit {chain[0].code}): " +
                              (" | ".join(chain[0].other[-3:]) or "no answer"),
                              hint=f"it runs with python3 on the host: is python3 on {chain[0].name}'s PATH?")
        for prev, n in zip(chain, chain[1:]):
            if n.listening and prev.listening:
                doc = {"name": prev.name, "url": f"http://{_url_host(prev.address)}:{prev.listening['port']}"}
                n.transport.put(f"{n.work}/source-{run}.json", json.dumps(doc).encode(), 0o600)
                sink.emit(ImageStarted(n.name, prev.name))
        while True:
            with heard:
                if all(n.ended.is_set() for n in chain[1:]):
                    break
                heard.wait(0.2)
            if stop is not None and stop.is_set():
                break
    finally:
        halt.set()
        each(_safely(lambda n: n.transport.run(["rm", "-f", f"{n.work}/job-{run}.json", f"{n.work}/source-{run}.json"],
                                                timeout=30)), chain, name="images")
        for th in threads:
            th.join(timeout=10)
    dead = [n.name for n in chain if n.ok is None and n.code == -1]
    for i, n in enumerate(chain[1:], 1):
        if n.ok:
            out.sent[n.name] = n.bytes
            sink.emit(ImageHostDone(n.name, True, n.bytes, round((n.last or 0) - (n.first or 0), 3), rate=round(_rate(n), 1)))
            continue
        up = next((d for d in dead if chain.index(next(x for x in chain if x.name == d)) < i), None)
        if n.name in dead:
            why = "went away during the copy" + (f" ({n.other[-1]})" if n.other else "")
        elif up:
            why = f"{up} (before it in the chain) went away: " + ("; ".join(n.errors) or "the stream broke")
        else:
            why = "; ".join(n.errors) or f"exit {n.code}: " + (" | ".join(n.other[-3:]) or "no output")
        out.failed[n.name] = why
        sink.emit(ImageHostDone(n.name, False, n.bytes, 0.0, why))


def _rate(n: Node) -> float:
    if n.first is None or n.last is None or n.last <= n.first:
        return 0.0
    return n.bytes / (n.last - n.first)


def _safely(fn):
    def run(n) -> str:
        try:
            fn(n)
            return ""
        except HostError as e:
            return e.message.removeprefix(f"{n.name}: ")
    return run


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
