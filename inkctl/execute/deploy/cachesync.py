"""The compile caches on the hosts (``inkctl cache``): what each host has, copied from one host
to the others of the same GPU architecture, pinned in the lock file by hash and checked.

A host's cache is one directory per key (``plan.compilecache``). Its digest is the sha256 of
its manifest: one ``<sha256>  <relative path>`` line per file, sorted by path, the way
``sha256sum`` prints them. After a multi-node boot each host holds its own ranks' artefacts
(vLLM keeps them per rank: ``rank_<r>_0``); ``merge`` gives every host of the same GPU
architecture the union, so any rank can start warm on any of them and every host has one
digest to pin. With a pin, ``replace`` makes each host's cache exactly the pinned one. Copies
are tar streams read from a sender and written into a receiver, through this machine (caches
are far smaller than weights: this is not the weights' host-to-host path).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from inkctl.errors import InkctlError
from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import HostError, Transport

PIN_PREFIX = "compile-cache:"
COPY_TIMEOUT_S = 1800

# $1: the cache directory. Absent: one line saying so. Else sha256sum of every file, by path.
MANIFEST = "\n".join([
    'cd "$1" 2>/dev/null || { echo "@@absent"; exit 0; }',
    "find . -type f -print | LC_ALL=C sort | while IFS= read -r f; do sha256sum \"$f\"; done",
    "",
])
RECEIVE = 'mkdir -p -- "$1" && tar -C "$1" -xf -'


@dataclass
class HostCache:
    host: str
    dir: str
    present: bool = False
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    arch: str | None = None  # compute capability nvidia-smi reports
    error: str = ""

    @property
    def digest(self) -> str | None:
        return digest(self.files) if self.present and self.files else None


def digest(files: dict[str, str]) -> str:
    text = "".join(f"{h}  {p}\n" for p, h in sorted(files.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def parse_manifest(text: str) -> tuple[bool, dict[str, str]]:
    if text.strip() == "@@absent":
        return False, {}
    files = {}
    for line in text.splitlines():
        h, sep, path = line.partition("  ")
        if sep and len(h) == 64:
            files[path[2:] if path.startswith("./") else path] = h
    return True, files


def read_host(t: Transport, cache_dir: str) -> HostCache:
    from inkctl.execute.state.gpu import QUERY, GpuProbeError, parse_query_gpu

    hc = HostCache(t.name, cache_dir)
    res = t.run(("sh", "-c", MANIFEST, "inkctl-cache", cache_dir), timeout=COPY_TIMEOUT_S)
    if not res.ok:
        hc.error = (res.err_text() or res.text()).strip()[-200:] or f"exit {res.exit_code}"
        return hc
    hc.present, hc.files = parse_manifest(res.text())
    g = t.run(QUERY, timeout=30)
    try:
        archs = sorted({x.compute_capability for x in parse_query_gpu(g.text())}) if g.ok else []
    except GpuProbeError:
        archs = []
    hc.arch = "/".join(archs) or None
    return hc


def scan(transports: dict[str, Transport], dirs: dict[str, str]) -> dict[str, HostCache]:
    return dict(each(lambda h: (h, read_host(transports[h], dirs[h])), list(dirs), name="cache-scan"))


def differing(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """Paths missing from b, or with another hash there, and paths b has that a lacks."""
    return sorted({p for p in a if b.get(p) != a[p]} | {p for p in b if p not in a})


def _tar(t: Transport, cache_dir: str, paths: list[str] | None = None) -> bytes:
    """A tar of the cache directory (or of these relative paths in it; names come on stdin)."""
    if paths is None:
        res = t.run(("tar", "-C", cache_dir, "-cf", "-", "."), timeout=COPY_TIMEOUT_S)
    else:
        names = "".join(f"./{p}\n" for p in paths).encode()
        res = t.run(("tar", "-C", cache_dir, "-cf", "-", "-T", "-"), timeout=COPY_TIMEOUT_S, stdin=names)
    if not res.ok:
        raise InkctlError(f"{t.name}: could not read its compile cache {cache_dir}: "
                          f"{res.err_text().strip()[-200:] or f'exit {res.exit_code}'}")
    return res.stdout


def _receive(t: Transport, r: HostCache, blob: bytes, fresh: bool) -> str:
    try:
        if fresh and r.present:
            t.run(("rm", "-rf", "--", r.dir), timeout=600)
        out = t.run(("sh", "-c", RECEIVE, "inkctl-cache", r.dir), timeout=COPY_TIMEOUT_S, stdin=blob)
        return "" if out.ok else out.err_text().strip()[-200:] or f"exit {out.exit_code}"
    except HostError as e:
        return e.reason


def replace(transports: dict[str, Transport], source: HostCache, receivers: list[HostCache]) -> dict[str, str]:
    """Each receiver's cache becomes exactly the source's (its own removed first). -> host: error."""
    blob = _tar(transports[source.host], source.dir)
    return {h: err for h, err in each(lambda r: (r.host, _receive(transports[r.host], r, blob, True)), receivers,
                                      name="cache-copy") if err}


def merge_plan(members: list[HostCache]) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str, list[str]]]]:
    """The union of the members' files (path -> (sha256, sender); the first member wins a path
    two hosts hold differently) and the copies that give every member all of it:
    (sender, receiver, paths)."""
    union: dict[str, tuple[str, str]] = {}
    for m in members:
        for p, h in m.files.items():
            union.setdefault(p, (h, m.host))
    moves = []
    for r in members:
        need: dict[str, list[str]] = {}
        for p, (h, sender) in sorted(union.items()):
            if r.files.get(p) != h:
                need.setdefault(sender, []).append(p)
        moves += [(sender, r.host, paths) for sender, paths in need.items()]
    return union, moves


def merge(transports: dict[str, Transport], members: list[HostCache]) -> tuple[dict[str, int], dict[str, str]]:
    """Every member gets the union. -> (host: files received, host: error)."""
    by = {m.host: m for m in members}
    _, moves = merge_plan(members)
    got: dict[str, int] = {}
    failed: dict[str, str] = {}
    blobs: dict[tuple[str, tuple[str, ...]], bytes] = {}
    for sender, _receiver, paths in moves:
        k = (sender, tuple(paths))
        if k not in blobs:
            blobs[k] = _tar(transports[sender], by[sender].dir, paths)
    def one(receiver: str):
        for sender, r, paths in moves:
            if r == receiver:
                err = _receive(transports[r], by[r], blobs[(sender, tuple(paths))], False)
                if err:
                    return receiver, 0, err
        return receiver, sum(len(p) for _, r, p in moves if r == receiver), ""

    for host, n, err in each(one, sorted({r for _, r, _ in moves}), name="cache-copy"):
        if err:
            failed[host] = err
        else:
            got[host] = n
    return got, failed
