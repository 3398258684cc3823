"""The copy chain of ``inkctl weights``: one ``onhost.py relay`` per host, each serving what it
has and what it is receiving while it receives, so the model crosses every link once and all
links at once (time to N hosts ~ one copy plus a small delay per hop, not N copies through the
head's one link).

    Hub (or a host that has the file) -> source -> h2 -> h3 -> ... -> hN

The source (the head, or ``--from``) asks first the hosts that already have a file, the Hub
last, and forwards the bytes as they arrive (a fresh cluster costs one Hub download, not a
download and then a copy). Each host in the chain lists the hosts before it, nearest first: if
its upstream dies mid-copy it asks the one before that, from the bytes it already has (the
dead host is named). Every host hashes what it receives and checks it against the pin.

Start-up is two steps because a sender's port is known only once it listens: every relay
starts and says where it listens, then each gets its sources (a file in its state dir).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass, field

from inkctl.errors import InkctlError
from inkctl.execute.hosts.fanout import background, each
from inkctl.execute.hosts.transport import HostError
from inkctl.plan import runtime
from inkctl.weights.distribute import (Site, WeightsHostDone, WeightsPhase, WeightsProgress, WeightsReattached, WeightsStarted,
                                       _gib, _job, _lines, to_write, wanted)
from inkctl.recipe.manifest import Manifest

log = logging.getLogger(__name__)
WHAT = "relay"
IDLE_S = 60  # a relay done fetching that nobody reads from this long ends by itself
STREAMS = 4  # blobs in flight per host: SHA-256 runs ~1.5-2 GB/s per core, 4 keep up with NVMe
LISTEN_TIMEOUT_S = 60
TOKEN_ENV = "INKCTL_WEIGHTS_TOKEN"


@dataclass
class Outcome:
    moved: dict[str, int] = field(default_factory=dict)  # host -> bytes written
    failed: dict[str, str] = field(default_factory=dict)  # host -> why
    hub_bytes: int = 0
    seconds: float = 0.0
    hub_refused: str = ""  # the Hub refused the token (or its absence): the secret to set
    reattached: list = field(default_factory=list)  # (host, dead host): who healed around whom
    bottleneck: dict[str, str] = field(default_factory=dict)  # host -> what held it back
    rate: dict[str, float] = field(default_factory=dict)  # host -> bytes/s


def distribute(m: Manifest, sites: list[Site], source: Site, *, hub_url: str, hub_env: dict[str, str], sink,
               bwlimit: float | None = None) -> Outcome:
    """Every host that lacks something joins a chain behind the source; the source gets what it
    lacks from a host that has it, the Hub last, and forwards it as it arrives. Needs ``scan``
    first. Hosts that fail are named in the outcome; the others finish. ``bwlimit``: bytes/s
    per copy stream (leave room on a shared network)."""
    t0 = time.monotonic()
    out = Outcome()
    for s in sites:
        if s.error:
            out.failed[s.name] = s.error
    live = [s for s in sites if not s.error]
    for s in live:  # disk space first: free space against the bytes to write
        need, free = to_write(m, s), int(s.scan.get("free", 0))
        if need > free:
            s.error = (f"not enough disk for the weights in {s.cache}: {need} bytes to write, {free} free "
                       f"({_gib(need)} vs {_gib(free)})")
            out.failed[s.name] = s.error
            sink.emit(WeightsHostDone(s.name, False, 0, 0.0, s.error))
    if source.name in out.failed:
        raise InkctlError(f"the source {source.name} cannot take the weights: {out.failed[source.name]}",
                          hint="free space there, or pick another source with --from HOST")
    chain = [source] + [s for s in live if s is not source and not s.error and wanted(s)]
    if len(chain) > 1 or wanted(source):
        donors = [s for s in live if s not in chain and not s.error] if wanted(source) else []
        run_chain(m, chain, donors, hub_url=hub_url, hub_env=hub_env, sink=sink, out=out, bwlimit=bwlimit)
    out.seconds = time.monotonic() - t0
    return out


@dataclass
class Member:
    """One host of the chain (or a donor, which only serves) as the run sees it."""

    site: Site
    fetches: bool
    total: int = 0
    listening: dict = field(default_factory=dict)
    ended: threading.Event = field(default_factory=threading.Event)  # its fetch is over (or it is gone)
    code: int | None = None
    other: list = field(default_factory=list)
    bytes: int = 0
    read_s: float = 0.0
    write_s: float = 0.0
    first_byte: float | None = None
    last_byte: float | None = None
    errors: list = field(default_factory=list)
    hub_refused: str = ""
    hub_bytes: int = 0
    ok: bool | None = None
    upstream: str = ""

    @property
    def name(self) -> str:
        return self.site.name


def run_chain(m: Manifest, chain: list[Site], donors: list[Site], *, hub_url: str, hub_env: dict[str, str], sink,
              out: Outcome, bwlimit: float | None) -> None:
    token = secrets.token_hex(32)
    # names of this run: a relay left on a host this run cannot reach (cut, then healed) is in
    # no one's way, and ends by itself once idle
    run = secrets.token_hex(4)
    what = f"{WHAT}-{run}"
    members = [Member(s, fetches=True, total=to_write(m, s)) for s in chain] + \
              [Member(s, fetches=False) for s in donors]
    stop = threading.Event()
    heard = threading.Condition()
    interrupt = chain[0].stop

    def event_for(mb: Member):
        def event(ev: dict) -> None:
            kind = ev.get("ev")
            with heard:
                if kind == "listening":
                    mb.listening = ev
                    sink.emit(WeightsPhase(mb.name, "listening"))
                elif kind in ("progress", "done", "failed"):
                    _progress(mb, ev, sink)
                    if kind != "progress":
                        mb.ok = kind == "done"
                        sink.emit(WeightsPhase(mb.name, "fetched"))
                        mb.ended.set()
                elif kind == "file" and ev.get("source") == "hub":
                    mb.hub_bytes += int(ev.get("bytes", 0))
                elif kind == "error":
                    mb.errors.append(ev["why"])
                    if ev.get("hub_refused"):
                        mb.hub_refused = ev["why"]
                elif kind == "dead":
                    out.reattached.append((mb.name, ev["host"]))
                    sink.emit(WeightsReattached(mb.name, ev["host"], ev.get("why", "")))
                heard.notify_all()
            if kind == "progress" and mb.fetches:
                sink.emit(WeightsProgress(mb.name, mb.bytes, mb.total, round(_rate(mb), 1), _eta(mb)))
        return event

    def files(mb: Member, ext: str) -> str:
        return f"{mb.site.work}/relay-{run}.{ext}"

    def launch(mb: Member) -> None:
        """One host, on a thread of its own: its files, then its relay, followed until it ends.
        Hosts do not wait for each other: each relay starts as soon as its host is ready."""
        s = mb.site
        try:
            s.ensure_onhost()
            env = {TOKEN_ENV: token, **(hub_env if s is chain[0] else {})}  # the Hub token: the source only
            job = _job(m, s, want=wanted(s) if mb.fetches else [], bind=s.address, port=0, idle_s=IDLE_S,
                       rate=bwlimit, streams=STREAMS, sources_file=files(mb, "sources"))
            if s.on_host:  # one file (0600), which the relay reads and removes at once
                job["env"] = env
            else:  # the runtime reads the env file; it is removed once the relay listens
                s.put_env(f"relay-{run}.env", env)
            s.put_job(f"relay-{run}.json", job)
            sink.emit(WeightsPhase(s.name, "relay_started", "process" if s.on_host else "container"))
            mb.code, mb.other = _lines(s, s.relay_argv(what, f"relay-{run}.json", env_file=files(mb, "env"),
                                                        mode=WHAT), event_for(mb), stop)
        except HostError as e:
            mb.code, mb.other = -1, [e.message.removeprefix(f"{s.name}: ")]
        with heard:
            mb.ended.set()
            heard.notify_all()

    def ready(mb: Member, late: bool) -> bool:
        """Every host mb may fetch from has said where it listens (or is gone; ``late``: past
        the wait, one that has said nothing is left out)."""
        if mb is members[0] and not wanted(mb.site):
            return True
        upstream = members if mb is members[0] else members[:members.index(mb)]
        return all(x.listening or x.ended.is_set() or late for x in upstream if x is not mb)

    def point(mb: Member) -> None:
        if not mb.site.on_host:  # the runtime read the env file when the container started: no token stays
            mb.site.transport.run(["rm", "-f", files(mb, "env")], timeout=30)
        if mb.fetches:
            _point(m, mb, [x for x in members if x.listening], chain[0], hub_url, sink, files(mb, "sources"))

    t0 = time.monotonic()
    relays = background(launch, members, name="weights", label=lambda mb: mb.name)
    try:
        # relays of earlier runs go while these start; none of these fetches before that
        each(lambda s: _clear_leftovers(s, what), [mb.site for mb in members], name="weights")
        deadline, pointed = time.monotonic() + LISTEN_TIMEOUT_S, set[str]()
        head = members[0]
        while True:  # point each relay once its upstream listens; until every fetch is over
            with heard:
                late = time.monotonic() > deadline
                if not head.listening and (head.ended.is_set() or late):
                    raise InkctlError(f"the relay on {head.name} did not start (exit {head.code}): " +
                                      (" | ".join(head.other[-3:]) or "no answer"),
                                      hint=f"is {head.site.address} an address of {head.name}? "
                                           "(cluster_address in the inventory)")
                if late:
                    for mb in members:
                        if not mb.listening and not mb.ended.is_set():
                            mb.code, mb.other = -1, [f"its relay did not start within {LISTEN_TIMEOUT_S} s"]
                            mb.ended.set()
                if all(mb.ended.is_set() for mb in members if mb.fetches):
                    break
                now = [mb for mb in members if mb.name not in pointed and mb.listening and not mb.ended.is_set()
                       and ready(mb, late)]
                if not now:
                    heard.wait(0.2)
            if now:
                pointed.update(mb.name for mb in now)
                for mb, err in zip(now, each(_safely(point), now, name="weights")):
                    if err:  # its relay never learns its sources: it is out of this run
                        with heard:
                            mb.code, mb.other = -1, [err]
                            mb.ended.set()
            if interrupt is not None and interrupt.is_set():
                break
    finally:
        stop.set()  # every stream ends: a relay run by the host ends with its SSH session

        def end(mb: Member) -> None:
            if not mb.site.on_host:
                mb.site.remove(what)
            mb.site.transport.run(["rm", "-f", *(files(mb, ext) for ext in ("env", "json", "sources"))], timeout=30)
            sink.emit(WeightsPhase(mb.name, "removed"))

        each(_safely(end), members, name="weights")
        relays.join(10)
    _outcome(members, out, interrupted=interrupt is not None and interrupt.is_set(), t0=t0, sink=sink)


def _clear_leftovers(s: Site, current: str) -> None:
    """Remove relay containers of earlier runs (one that lost this host, cut and then healed,
    lives on until idle): nothing of an old run stays beside this one. ``current``: this run's
    relay (it may be starting already), spared."""
    try:
        r = s.transport.run(runtime.ps_names(s.runtime, f"{s.container(WHAT)}-"), timeout=60)
        old = [n for n in r.text().split()
               if n.startswith(s.container(WHAT) + "-") and n != s.container(current)] if r.ok else []
        if old:
            s.transport.run(runtime.remove(s.runtime, *old), timeout=60)
    except HostError as e:  # the scan reached it a moment ago; the run itself will say what is wrong
        log.debug("%s: removing earlier relays: %s", s.name, e.reason)


def _point(m: Manifest, mb: Member, up: list[Member], source: Site, hub_url: str, sink, sources_file: str) -> None:
    """Tell one relay where its blobs come from."""
    s = mb.site
    url = {x.name: f"http://{_url_host(x.site.address)}:{x.listening['port']}" for x in up}
    chain = [x for x in up if x.fetches]
    if s is source:
        # a host that has the file first (the Hub is the last resort), then the Hub
        peers = [x for x in up if x.site is not source]
        srcs = [{"name": x.name, "kind": "peer", "url": url[x.name]} for x in peers] + \
               [{"name": "hub", "kind": "hub", "url": hub_url}]
        per_blob = {}
        for p in wanted(s):
            e = m.file(p).etag
            per_blob[e] = [i for i, x in enumerate(peers) if _has(x.site, m, e)] + [len(peers)]
        doc = {"sources": srcs, "per_blob": per_blob}
        firsts = [srcs[v[0]]["name"] for v in per_blob.values()]
        mb.upstream = "hub" if all(f == "hub" for f in firsts) else max(set(firsts), key=firsts.count)
    else:
        before = list(reversed(chain[:chain.index(mb)]))  # nearest first, the source last
        doc = {"sources": [{"name": x.name, "kind": "peer", "url": url[x.name]} for x in before]}
        mb.upstream = before[0].name
    if wanted(s):
        sink.emit(WeightsStarted(s.name, mb.upstream, len(wanted(s)), mb.total))
    import json

    s.transport.put(sources_file, json.dumps(doc).encode(), 0o600)
    sink.emit(WeightsPhase(s.name, "pointed"))


def _has(s: Site, m: Manifest, etag: str) -> bool:
    files = s.scan.get("files", {})
    return any(f.etag == etag and files.get(f.path, {}).get("state") in ("ok", "unlinked") for f in m.files)


def _progress(mb: Member, ev: dict, sink) -> None:
    now = time.monotonic()
    n = int(ev.get("bytes", 0))
    if n > mb.bytes:
        if mb.first_byte is None:
            mb.first_byte = now
            sink.emit(WeightsPhase(mb.name, "first_byte"))
        mb.last_byte = now
    mb.bytes = max(mb.bytes, n)
    mb.read_s, mb.write_s = float(ev.get("read_s", 0)), float(ev.get("write_s", 0))


def _rate(mb: Member) -> float:
    if mb.first_byte is None or mb.last_byte is None or mb.last_byte <= mb.first_byte:
        return 0.0
    return mb.bytes / (mb.last_byte - mb.first_byte)


def _eta(mb: Member) -> float | None:
    r = _rate(mb)
    return round((mb.total - mb.bytes) / r, 1) if r > 0 and mb.total > mb.bytes else None


def _bottleneck(mb: Member, head: Member) -> str:
    """What held this host back, from where its fetch spent its time."""
    if not mb.bytes:
        return ""
    if mb.write_s > mb.read_s:
        return "disk"
    if mb is head:
        return "the Hub" if head.upstream == "hub" else f"link from {head.upstream}"
    if head.hub_bytes and _rate(mb) <= 1.15 * max(_rate(head), 1.0):
        return "the Hub (via the chain)"
    return f"link from {mb.upstream}"


def _outcome(members: list[Member], out: Outcome, *, interrupted: bool, t0: float, sink) -> None:
    head = members[0]
    out.hub_bytes += head.hub_bytes
    refused = next((mb.hub_refused for mb in members if mb.hub_refused), "")
    out.hub_refused = refused
    for mb in (x for x in members if x.fetches and wanted(x.site)):
        seconds = round(time.monotonic() - t0, 3)
        if mb.ok:
            out.moved[mb.name] = mb.bytes
            out.rate[mb.name] = round(_rate(mb), 1)
            out.bottleneck[mb.name] = _bottleneck(mb, head)
            sink.emit(WeightsHostDone(mb.name, True, mb.bytes, seconds, rate=out.rate[mb.name],
                                      bottleneck=out.bottleneck[mb.name]))
            continue
        arrived = f"{mb.bytes} of {mb.total} bytes arrived, partial files are kept for a rerun"
        if interrupted:
            why = f"interrupted; {arrived}"
        elif mb.ok is None and mb.code == -1:
            why = "went away during the copy" + (f" ({mb.other[-1]})" if mb.other else "") + f"; {arrived}"
        elif mb.errors:
            why = "; ".join(dict.fromkeys(mb.errors))
        else:
            why = f"exit {mb.code}: " + (" | ".join(mb.other[-3:]) or "no output")
        if refused and mb is not head and not mb.hub_refused:
            why = f"nothing to relay: {head.name} could not download ({refused})"
        out.failed[mb.name] = why
        sink.emit(WeightsHostDone(mb.name, False, mb.bytes, seconds, why))


def _safely(fn):
    def run(mb: Member) -> str:
        try:
            fn(mb)
            return ""
        except HostError as e:
            return e.message.removeprefix(f"{mb.name}: ")
    return run


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
