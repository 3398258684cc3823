"""The compile caches on the hosts (``inkctl cache``): what each host has, pinned in the lock
file by hash and checked (``up`` refuses a cache that is not the pinned one).

A host's cache is one directory per key (``plan.compilecache``). Its digest is the sha256 of
its manifest: one ``<sha256>  <relative path>`` line per file, sorted by path, the way
``sha256sum`` prints them. After a multi-node boot each host holds its own ranks' artefacts
(vLLM keeps them per rank: ``rank_<r>_0``). The copy from host to host (the union of the
hosts' caches, or the pinned one) is ``weights.cachecopy``: the weights' relay, over the
cluster network, never through this machine.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import Transport

PIN_PREFIX = "compile-cache:"
READ_TIMEOUT_S = 1800

# $1: the cache directory. Absent: one line saying so. Else sha256sum of every file, by path.
MANIFEST = "\n".join([
    'cd "$1" 2>/dev/null || { echo "@@absent"; exit 0; }',
    "find . -type f -print | LC_ALL=C sort | while IFS= read -r f; do sha256sum \"$f\"; done",
    "",
])


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
    res = t.run(("sh", "-c", MANIFEST, "inkctl-cache", cache_dir), timeout=READ_TIMEOUT_S)
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
