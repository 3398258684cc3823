"""``inkctl cache``'s copy: a compile cache from host to host over the cluster network, on the
weights' relay (``relay.py``, ``onhost.py relay`` with the plain layout), never through this
machine and never whole in memory.

The hosts' caches were read first (``execute.deploy.cachesync.scan``: every file's sha256).
What every receiver must end up with is a manifest (path, size, sha256): the source's cache
(pinned or not), or, without a pin, the union of the hosts' caches. Each file a receiver lacks
or holds wrong is streamed along the chain, hashed as it arrives and checked against the
manifest before it lands in ``.incoming-<key>`` beside the cache; only when every file of the
host is there are they moved into the cache directory, files the manifest lacks removed, and
the directory read again: its digest must be the manifest's.
"""

from __future__ import annotations

import posixpath
import threading
from dataclasses import dataclass, field

from inkctl.errors import EXIT_INTERRUPTED, InkctlError
from inkctl.execute.deploy.cachesync import HostCache, digest, read_host
from inkctl.execute.events import Collect
from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import HostError, Transport
from inkctl.recipe.manifest import FileEntry, Manifest
from inkctl.weights.distribute import Site, prepare
from inkctl.weights.relay import distribute

CONTAINER_PREFIX = "inkctl-cache"
NO_HUB = "http://127.0.0.1:9"  # a cache has no Hub: a file no peer could send fails here at once

# $1: the cache directory. Size and path of every file ("%s\t%P"), then the free KiB where it lives.
SIZES = "\n".join([
    'd="$1"; [ -d "$d" ] && find "$d" -type f -printf "%s\\t%P\\n"',
    'while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done',
    "df -P -k -- \"$d\" | awk 'NR==2 {print \"@@free \" $4}'",
    "",
])
# $1: incoming, $2: the cache directory; on stdin one operation per line, tab-separated:
#   mv PATH      what arrived for PATH takes its place
#   cp FROM TO   content the host already holds under FROM, copied to TO
#   rm PATH      a file the manifest does not have
# then what is left of incoming (nothing this run asked for) is removed.
FINISH = "\n".join([
    'in="$1"; dir="$2"; tab=$(printf "\\t")',
    'mkdir -p -- "$dir" || exit 1',
    'while IFS="$tab" read -r op a b; do',
    '  case "$op" in',
    '    mv) mkdir -p -- "$(dirname -- "$dir/$a")" && mv -f -- "$in/$a" "$dir/$a" || exit 1 ;;',
    '    cp) mkdir -p -- "$(dirname -- "$dir/$b")" && cp -- "$dir/$a" "$dir/$b.inkctl-tmp" &&',
    '        mv -f -- "$dir/$b.inkctl-tmp" "$dir/$b" || exit 1 ;;',
    '    rm) rm -f -- "$dir/$a" || exit 1 ;;',
    "  esac",
    "done",
    'rm -rf -- "$in"',
    "",
])


@dataclass
class Copied:
    source: str
    files: int  # in the manifest
    moved: dict[str, int] = field(default_factory=dict)  # host -> bytes received from peers
    received: dict[str, int] = field(default_factory=dict)  # host -> files it got, from peers or itself
    relayed: dict[str, int] = field(default_factory=dict)  # host -> files that came from peers
    failed: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def incoming(cache_dir: str) -> str:
    return posixpath.join(posixpath.dirname(cache_dir.rstrip("/")), ".incoming-" + posixpath.basename(cache_dir.rstrip("/")))


def _sizes(t: Transport, cache_dir: str) -> tuple[dict[str, int], int]:
    r = t.run(("sh", "-c", SIZES, "inkctl-cache", cache_dir), timeout=300)
    if not r.ok:
        raise HostError(t.name, "command", f"cannot list {cache_dir}: {r.err_text().strip()[-200:]}")
    sizes, free = {}, 0
    for line in r.text().splitlines():
        if line.startswith("@@free "):
            free = int(line.split()[1]) * 1024 if line.split()[1].isdigit() else 0
            continue
        size, sep, path = line.partition("\t")
        if sep and size.isdigit():
            sizes[path] = int(size)
    return sizes, free


def target(members: list[HostCache], sizes: dict[str, dict[str, int]], *, union: bool) -> dict[str, tuple[str, int]]:
    """path -> (sha256, size): the first member's cache, or the union (the first holder wins a path)."""
    out: dict[str, tuple[str, int]] = {}
    for m in members if union else members[:1]:
        for p, h in m.files.items():
            if p not in out and p in sizes.get(m.host, {}):
                out[p] = (h, sizes[m.host][p])
    return out


def site_maker(loaded, plan, image: str | None, transports: dict[str, Transport]):
    """``site_for(host, cache root)``: how the relay reaches a host, runs the engine image there
    and where peers find it (``cluster_address``), as ``inkctl weights`` does."""
    from inkctl.execute.deploy.preflight import host_image

    hosts = {h.name: h for h in loaded.hosts}
    img = host_image(loaded.recipe, plan, image)

    def site_for(host: str, root: str) -> Site:
        ph = plan.host(host)
        return Site(host, transports[host], ph.runtime, img, root, f"{ph.state_dir}/compile-cache",
                    hosts[host].rank_address, tuple(loaded.recipe.container.security_opt))
    return site_for


def _held(hc: HostCache, want: dict[str, tuple[str, int]]) -> dict[str, str]:
    """sha256 -> a path of the manifest that holds that content on the host, right."""
    return {h: p for p, h in sorted(hc.files.items(), reverse=True) if p in want and want[p][0] == h}


def _state(hc: HostCache, want: dict[str, tuple[str, int]], path: str) -> str:
    """What the relay must bring this host for ``path``: nothing when the host holds the content,
    under this path or another (one kernel for every rank: a local copy, never a wait on a peer
    that waits for the same content)."""
    if want[path][0] in _held(hc, want):
        return "ok"
    return "altered" if path in hc.files else "missing"


def copy(transports: dict[str, Transport], states: dict[str, HostCache], source: HostCache, receivers: list[HostCache],
         *, union: bool, site_for, interrupt: threading.Event | None = None) -> Copied:
    """Every receiver's cache becomes the source's (``union``: every member's, the source among
    them, becomes the union of theirs). ``site_for(host, cache root)`` -> the host's ``Site``
    (its runtime, the engine image, its state dir and cluster address)."""
    import time

    t0 = time.monotonic()
    members = [source] + [r for r in receivers if r is not source]
    listed = dict(each(lambda hc: (hc.host, _sizes(transports[hc.host], hc.dir)), members, name="cache-copy"))
    want = target(members, {h: s for h, (s, _) in listed.items()}, union=union)
    if not union and len(want) != len(source.files):
        raise InkctlError(f"{source.host}'s compile cache changed while it was read ({source.dir}): nothing copied",
                          hint="run it again once no engine writes to it")
    m = Manifest(f"inkctl-compile-cache/{posixpath.basename(source.dir)}", digest({p: h for p, (h, _) in want.items()}),
                 "", tuple(FileEntry(p, size, sha256=h) for p, (h, size) in sorted(want.items())))
    sites = []
    for hc in members:
        root = posixpath.dirname(hc.dir.rstrip("/"))
        s = site_for(hc.host, root)
        s.prefix, s.plain, s.stop = CONTAINER_PREFIX, (hc.dir, incoming(hc.dir)), interrupt
        s.scan = {"free": listed[hc.host][1], "files": {p: {"state": _state(hc, want, p)} for p in want}}
        sites.append(s)
    out = Copied(source.host, len(want))
    by = {s.name: s for s in sites}
    for hc, s in zip(members, sites):
        out.received[hc.host] = sum(1 for p, (h, _) in want.items() if hc.files.get(p) != h)
        out.relayed[hc.host] = sum(1 for st in s.scan["files"].values() if st["state"] != "ok")
    if any(out.relayed.values()):
        prepare(sites)
        done = distribute(m, sites, by[source.host], hub_url=NO_HUB, hub_env={}, sink=Collect())
        out.moved, out.failed = dict(done.moved), dict(done.failed)
    if interrupt is not None and interrupt.is_set():
        raise InkctlError("interrupted: the hosts' caches are as they were (what arrived waits in .incoming-*)",
                          exit_code=EXIT_INTERRUPTED)

    def finish(hc: HostCache) -> tuple[str, str]:
        if hc.host in out.failed:
            return hc.host, out.failed[hc.host]
        t = transports[hc.host]
        held = _held(hc, want)
        ops = [f"cp\t{held[h]}\t{p}" if h in held else f"mv\t{p}"
               for p, (h, _) in sorted(want.items()) if hc.files.get(p) != h]
        ops += [f"rm\t{p}" for p in sorted(hc.files) if p not in want]
        r = t.run(("sh", "-c", FINISH, "inkctl-cache", incoming(hc.dir), hc.dir), timeout=600,
                  stdin="".join(op + "\n" for op in ops).encode())
        if not r.ok:
            return hc.host, f"moving the copied files into {hc.dir}: {r.err_text().strip()[-200:] or r.exit_code}"
        again = read_host(t, hc.dir)
        if again.digest != m.revision:
            return hc.host, (f"{hc.dir} has sha256 {(again.digest or 'nothing')[:16]} after the copy, "
                             f"not {m.revision[:16]}")
        states[hc.host] = again
        return hc.host, ""

    for host, err in each(finish, members, name="cache-copy"):
        if err:
            out.failed[host] = err
    out.seconds = time.monotonic() - t0
    return out
