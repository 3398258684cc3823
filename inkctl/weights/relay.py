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

The chain itself (start, listen, point each relay as soon as the hosts it reads from listen,
reattach, the dead host counted as ended) is ``execute/hosts/chain.py``, which the image relay
runs on too; this module says what a weights relay needs on its host, where each one reads
from (the source: per blob, the hosts that have it, the Hub last) and what the outcome is.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass, field

from inkctl.errors import InkctlError
from inkctl.execute.hosts.chain import Chain, Member, Unstarted, safely
from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import HostError
from inkctl import runtimes
from inkctl.weights.distribute import (Site, WeightsHostDone, WeightsPhase, WeightsProgress, WeightsReattached, WeightsStarted,
                                       _gib, _job, to_write, wanted)
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
    out = Outcome(failed={s.name: s.error for s in sites if s.error})
    live = _check_disks(m, [s for s in sites if not s.error], out, sink)
    if source.name in out.failed:
        raise InkctlError(f"the source {source.name} cannot take the weights: {out.failed[source.name]}",
                          hint="free space there, or pick another source with --from HOST")
    chain = [source] + [s for s in live if s is not source and wanted(s)]
    if len(chain) > 1 or wanted(source):
        donors = [s for s in live if s not in chain] if wanted(source) else []
        run_chain(m, chain, donors, hub_url=hub_url, hub_env=hub_env, sink=sink, out=out, bwlimit=bwlimit)
    out.seconds = time.monotonic() - t0
    return out


def _check_disks(m: Manifest, live: list[Site], out: Outcome, sink) -> list[Site]:
    """Disk space first: free space against the bytes to write; a host short of it is out.
    Returns the hosts that can take the weights."""
    for s in live:
        need, free = to_write(m, s), int(s.scan.get("free", 0))
        if need > free:
            s.error = (f"not enough disk for the weights in {s.cache}: {need} bytes to write, {free} free "
                       f"({_gib(need)} vs {_gib(free)})")
            out.failed[s.name] = s.error
            sink.emit(WeightsHostDone(s.name, False, 0, 0.0, s.error))
    return [s for s in live if not s.error]


@dataclass(kw_only=True)
class Relay(Member):
    """One host of the chain (or a donor, which only serves) as the run sees it: the chain's
    member, and what the weights add (its fetch's total, where its time went, the Hub)."""

    site: Site
    fetches: bool
    total: int = 0
    read_s: float = 0.0  # waiting for its source's bytes
    write_s: float = 0.0  # writing them
    hub_refused: str = ""
    hub_bytes: int = 0
    upstream: str = ""  # where most of its bytes come from
    said_first: bool = False  # its first_byte phase was sent

    @classmethod
    def of(cls, s: Site, fetches: bool, total: int = 0) -> Relay:
        return cls(name=s.name, transport=s.transport, address=s.address, site=s, fetches=fetches, total=total)


def run_chain(m: Manifest, chain: list[Site], donors: list[Site], *, hub_url: str, hub_env: dict[str, str], sink,
              out: Outcome, bwlimit: float | None) -> None:
    """The chain ``chain`` (the source first) with ``donors`` serving the source, on
    ``execute/hosts/chain.py``; what happened goes into ``out``."""
    run = _Run(m, chain, donors, hub_url=hub_url, hub_env=hub_env, sink=sink, bwlimit=bwlimit)
    t0 = time.monotonic()
    run.go()
    out.reattached.extend((r.host, r.dead) for r in run.chain.reattached)
    _outcome(run.relays, out, interrupted=run.interrupted, t0=t0, sink=sink)


class _Run:
    """One run of the chain: its names, its token, its relays."""

    def __init__(self, m: Manifest, chain: list[Site], donors: list[Site], *, hub_url: str, hub_env: dict[str, str],
                 sink, bwlimit: float | None):
        self.m, self.hub_url, self.hub_env, self.sink, self.bwlimit = m, hub_url, hub_env, sink, bwlimit
        self.token = secrets.token_hex(32)
        # names of this run: a relay left on a host this run cannot reach (cut, then healed) is in
        # no one's way, and ends by itself once idle
        self.id = secrets.token_hex(4)
        self.what = f"{WHAT}-{self.id}"
        self.source = chain[0]
        self.relays = [Relay.of(s, True, to_write(m, s)) for s in chain] + [Relay.of(s, False) for s in donors]
        self.chain = Chain(self.relays, on_event=self.seen, name="weights")
        self.interrupt = self.source.stop

    @property
    def interrupted(self) -> bool:
        return self.interrupt is not None and self.interrupt.is_set()

    def files(self, r: Relay, ext: str) -> str:
        return f"{r.site.work}/relay-{self.id}.{ext}"

    def go(self) -> None:
        """Every relay starts as soon as its host is ready; each is pointed at its sources as
        soon as they listen; until every fetch is over (or Ctrl-C)."""
        self.chain.start(self.argv, prepare=self.prepare)
        try:
            # relays of earlier runs go while these start; none of these fetches before that
            each(lambda s: _clear_leftovers(s, self.what), [r.site for r in self.relays], name="weights")
            self.chain.point_as_ready(self.point, upstream=self.upstream, until=[r for r in self.relays if r.fetches],
                                      timeout=LISTEN_TIMEOUT_S, stop=self.interrupt)
        except Unstarted as e:
            raise InkctlError(f"the relay on {e.member.name} did not start {e.detail}",
                              hint=f"is {self.source.address} an address of {e.member.name}? "
                                   "(cluster_address in the inventory)") from None
        finally:
            self.chain.halt.set()  # every stream ends: a relay run by the host ends with its SSH session
            each(safely(self.end), self.chain.reachable(self.relays), name="weights")
            self.chain.stop()

    def prepare(self, r: Relay) -> None:
        """On the relay's own thread, before it starts: onhost.py, its job, its secrets."""
        s = r.site
        s.ensure_onhost()
        env = {TOKEN_ENV: self.token, **(self.hub_env if s is self.source else {})}  # the Hub token: the source only
        job = _job(self.m, s, want=wanted(s) if r.fetches else [], bind=s.address, port=0, idle_s=IDLE_S,
                   rate=self.bwlimit, streams=STREAMS, sources_file=self.files(r, "sources"))
        if s.on_host:  # one file (0600), which the relay reads and removes at once
            job["env"] = env
        else:  # the runtime reads the env file; it is removed once the relay listens
            s.put_env(f"relay-{self.id}.env", env)
        s.put_job(f"relay-{self.id}.json", job)
        self.sink.emit(WeightsPhase(s.name, "relay_started", "process" if s.on_host else "container"))

    def argv(self, r: Relay) -> tuple[str, ...]:
        return r.site.relay_argv(self.what, f"relay-{self.id}.json", env_file=self.files(r, "env"), mode=WHAT)

    def upstream(self, r: Relay) -> list[Relay]:
        """The relays ``r`` may fetch from: the ones before it; the source: every other host
        (the hosts that have a file come before the Hub), none when it lacks nothing."""
        if r is self.relays[0]:
            return self.relays[1:] if wanted(r.site) else []
        return self.relays[:self.relays.index(r)]

    def seen(self, r: Relay, ev: dict) -> None:
        """What a relay said, once the chain recorded it: the events of ``inkctl weights``."""
        kind = ev.get("ev")
        if kind == "listening":
            self.sink.emit(WeightsPhase(r.name, "listening"))
        elif kind in ("progress", "done", "failed"):
            self._progress(r, kind, ev)
        elif kind == "file" and ev.get("source") == "hub":
            r.hub_bytes += int(ev.get("bytes", 0))
        elif kind == "error" and ev.get("hub_refused"):
            r.hub_refused = str(ev["why"])
        elif kind == "dead":
            self.sink.emit(WeightsReattached(r.name, str(ev["host"]), str(ev.get("why", ""))))

    def _progress(self, r: Relay, kind: str, ev: dict) -> None:
        r.read_s, r.write_s = float(ev.get("read_s", 0)), float(ev.get("write_s", 0))
        if r.first is not None and not r.said_first:
            r.said_first = True
            self.sink.emit(WeightsPhase(r.name, "first_byte"))
        if kind != "progress":
            self.sink.emit(WeightsPhase(r.name, "fetched"))
        elif r.fetches:
            self.sink.emit(WeightsProgress(r.name, r.bytes, r.total, round(r.rate, 1), _eta(r)))

    def point(self, r: Relay) -> None:
        """Tell one relay where its blobs come from (its env file goes first: the runtime read
        it when the container started, no token stays)."""
        s = r.site
        if not s.on_host:
            s.transport.run(["rm", "-f", self.files(r, "env")], timeout=30)
        if not r.fetches:
            return
        doc = self._source_doc(r) if s is self.source else self._peer_doc(r)
        if wanted(s):
            self.sink.emit(WeightsStarted(s.name, r.upstream, len(wanted(s)), r.total))
        s.transport.put(self.files(r, "sources"), json.dumps(doc).encode(), 0o600)
        self.sink.emit(WeightsPhase(s.name, "pointed"))

    def _peer_doc(self, r: Relay) -> dict:
        """A host of the chain: the relays before it that listen, nearest first, the source last."""
        before = self.chain.sources(r, [x for x in self.relays[:self.relays.index(r)] if x.fetches])["sources"]
        r.upstream = before[0]["name"]
        return {"sources": [{"name": x["name"], "kind": "peer", "url": x["url"]} for x in before]}

    def _source_doc(self, r: Relay) -> dict:
        """The source: per blob, a host that has the file first (the Hub is the last resort),
        then the Hub."""
        peers = [x for x in self.relays if x.listening and x is not r]
        srcs = [{"name": x.name, "kind": "peer", "url": x.url} for x in peers] + \
               [{"name": "hub", "kind": "hub", "url": self.hub_url}]
        per_blob = {}
        for p in wanted(r.site):
            e = self.m.file(p).etag
            per_blob[e] = [i for i, x in enumerate(peers) if _has(x.site, self.m, e)] + [len(peers)]
        firsts = [srcs[v[0]]["name"] for v in per_blob.values()]
        r.upstream = "hub" if all(f == "hub" for f in firsts) else max(set(firsts), key=firsts.count)
        return {"sources": srcs, "per_blob": per_blob}

    def end(self, r: Relay) -> None:
        """Its container (if it ran in one) and its files go."""
        if not r.site.on_host:
            r.site.remove(self.what)
        r.site.transport.run(["rm", "-f", *(self.files(r, ext) for ext in ("env", "json", "sources"))], timeout=30)
        self.sink.emit(WeightsPhase(r.name, "removed"))


def _clear_leftovers(s: Site, current: str) -> None:
    """Remove relay containers of earlier runs (one that lost this host, cut and then healed,
    lives on until idle): nothing of an old run stays beside this one. ``current``: this run's
    relay (it may be starting already), spared."""
    try:
        r = s.transport.run(runtimes.get(s.runtime).ps_names(f"{s.container(WHAT)}-"), timeout=60)
        old = [n for n in r.text().split()
               if n.startswith(s.container(WHAT) + "-") and n != s.container(current)] if r.ok else []
        if old:
            s.transport.run(runtimes.get(s.runtime).remove(*old), timeout=60)
    except HostError as e:  # the scan reached it a moment ago; the run itself will say what is wrong
        log.debug("%s: removing earlier relays: %s", s.name, e.reason)


def _has(s: Site, m: Manifest, etag: str) -> bool:
    files = s.scan.get("files", {})
    return any(f.etag == etag and files.get(f.path, {}).get("state") in ("ok", "unlinked") for f in m.files)


def _eta(r: Relay) -> float | None:
    rate = r.rate
    return round((r.total - r.bytes) / rate, 1) if rate > 0 and r.total > r.bytes else None


def _bottleneck(r: Relay, head: Relay) -> str:
    """What held this host back, from where its fetch spent its time."""
    if not r.bytes:
        return ""
    if r.write_s > r.read_s:
        return "disk"
    if r is head:
        return "the Hub" if head.upstream == "hub" else f"link from {head.upstream}"
    if head.hub_bytes and r.rate <= 1.15 * max(head.rate, 1.0):
        return "the Hub (via the chain)"
    return f"link from {r.upstream}"


def _outcome(relays: list[Relay], out: Outcome, *, interrupted: bool, t0: float, sink) -> None:
    head = relays[0]
    out.hub_bytes += head.hub_bytes
    refused = next((r.hub_refused for r in relays if r.hub_refused), "")
    out.hub_refused = refused
    for r in (x for x in relays if x.fetches and wanted(x.site)):
        seconds = round(time.monotonic() - t0, 3)
        if r.ok:
            out.moved[r.name] = r.bytes
            out.rate[r.name] = round(r.rate, 1)
            out.bottleneck[r.name] = _bottleneck(r, head)
            sink.emit(WeightsHostDone(r.name, True, r.bytes, seconds, rate=out.rate[r.name],
                                      bottleneck=out.bottleneck[r.name]))
            continue
        why = _why(r, head, refused, interrupted)
        out.failed[r.name] = why
        sink.emit(WeightsHostDone(r.name, False, r.bytes, seconds, why))


def _why(r: Relay, head: Relay, refused: str, interrupted: bool) -> str:
    """Why a host did not get the weights, in one line."""
    if refused and r is not head and not r.hub_refused:
        return f"nothing to relay: {head.name} could not download ({refused})"
    arrived = f"{r.bytes} of {r.total} bytes arrived, partial files are kept for a rerun"
    if interrupted:
        return f"interrupted; {arrived}"
    if r.dead:  # named dead by the host after it (cut off: its session would end only much later)
        return f"went away during the copy ({r.dead}); {arrived}"
    if r.ok is None and r.code == -1:
        return "went away during the copy" + (f" ({r.other[-1]})" if r.other else "") + f"; {arrived}"
    if r.errors:
        return "; ".join(dict.fromkeys(r.errors))
    return f"exit {r.code}: " + (" | ".join(r.other[-3:]) or "no output")
