"""Put the pinned model on every host: ask each what it has, download the rest ONCE (on the
source host, the head by default) and relay it host to host along a chain over the cluster
network (``relay.py``), every host writing and forwarding at once; never through this machine.

Each host runs ``onhost.py`` (standard library only, uploaded to the host's state dir), with the
host's own python3 where it has one (a process of the SSH session: nothing to start or remove),
else inside the engine image with the container runtime (nothing is installed on it). The sender binds to the source's cluster address, serves only the pinned
blobs, wants a one-time token (in 0600 env files, never on a command line) and ends (or is
removed) when the copy ends. Only missing or wrong files move; partial files resume; every byte is hashed as
it arrives and checked against the pin before it takes its place.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from inkctl.execute.events import EVENT_NAMES, Event
from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.program import program
from inkctl.execute.hosts.transport import HostError, Transport
from inkctl import runtimes
from inkctl.runtimes.spec import ContainerSpec, Mount
from inkctl.recipe.manifest import Manifest, repo_folder

log = logging.getLogger(__name__)

ONHOST = Path(__file__).with_name("onhost.py")
CONTAINER_PREFIX = "inkctl-weights"
LISTEN_TIMEOUT_S = 60
BAD = ("missing", "truncated", "altered", "unlinked")


# ------------------------------------------------------------------------------ events

@dataclass(frozen=True)
class WeightsScanned(Event):
    host: str
    ok: int  # files present and right
    bad: dict  # path -> missing | truncated | altered | unlinked
    free_bytes: int
    to_write: int  # bytes this host still needs


@dataclass(frozen=True)
class WeightsStarted(Event):
    host: str
    source: str  # "hub" or the sending host
    files: int
    total_bytes: int


@dataclass(frozen=True)
class WeightsProgress(Event):
    host: str
    bytes: int
    total_bytes: int
    rate: float = 0.0  # bytes/s since this host's first byte
    eta_s: float | None = None


@dataclass(frozen=True)
class WeightsReattached(Event):
    """A relay host died mid-copy: ``host`` resumes from the host before it."""
    host: str
    dead: str
    why: str = ""


@dataclass(frozen=True)
class WeightsHostDone(Event):
    host: str
    ok: bool
    bytes: int
    seconds: float
    error: str = ""
    rate: float = 0.0  # bytes/s while it received
    bottleneck: str = ""  # what held this host back: the link from X, the disk, the source


@dataclass(frozen=True)
class WeightsPhase(Event):
    """Where one host's copy stands (the timeline in ``--output json``: each line's ``ts``):
    connected, scanned, relay_started, listening, pointed, first_byte, fetched, removed."""
    host: str
    phase: str
    detail: str = ""  # relay_started: "process" (the host's python3) or "container"


EVENT_NAMES.update({WeightsPhase: "weights_phase", WeightsScanned: "weights_scanned", WeightsStarted: "weights_started",
                    WeightsProgress: "weights_progress", WeightsHostDone: "weights_host_done",
                    WeightsReattached: "weights_reattached"})


# ------------------------------------------------------------------------------ hosts

@dataclass
class Site:
    """One host of the copy: how to reach it and where things are there."""

    name: str
    transport: Transport
    runtime: str
    image: str
    cache: str  # the Hub cache on the host (expanded)
    work: str  # onhost.py, jobs and env files: <state_dir>/weights
    address: str  # where peers reach it (cluster_address)
    security_opt: tuple[str, ...] = ()
    scan: dict = field(default_factory=dict)
    error: str = ""
    stop: threading.Event | None = None  # set on Ctrl-C: streams end, containers are removed
    prefix: str = CONTAINER_PREFIX  # the containers' names: another copy (a compile cache) has its own
    plain: tuple[str, str] | None = None  # a plain directory under ``cache`` and where its files arrive

    def container(self, what: str) -> str:
        return f"{self.prefix}-{what}"

    def argv(self, what: str, job: str, *extra: str, env_file: str | None = None,
             mode: str | None = None) -> tuple[str, ...]:
        """``<runtime> run --rm`` of onhost.py ``mode`` (default: ``what``) in the container
        ``inkctl-weights-<what>``: argv only (the transport quotes it)."""
        spec = ContainerSpec(
            name=self.container(what), image=self.image, entrypoint="python3",
            command=(f"{self.work}/onhost.py", mode or what, f"{self.work}/{job}", *extra), network="host",
            options=tuple(a for opt in self.security_opt for a in ("--security-opt", opt)),
            mounts=(Mount(self.cache, self.cache), Mount(self.work, self.work, read_only=True)), env_file=env_file)
        return runtimes.get(self.runtime).run_once(spec)

    def relay_argv(self, what: str, job: str, *, env_file: str, mode: str) -> tuple[str, ...]:
        """onhost.py ``mode`` as a process of the SSH session where the scan found a python3
        that may write the cache (no container to start; the session's end ends it), else in
        the engine image (``argv``)."""
        if self.on_host:  # the job file carries the secrets (0600, removed once read)
            # -I -S: the standard library only, whatever PYTHON* or site-packages the host has
            return ("python3", "-I", "-S", f"{self.work}/onhost.py", mode, f"{self.work}/{job}", "--pid-dir", self.work)
        return self.argv(what, job, env_file=env_file, mode=mode)

    @property
    def on_host(self) -> bool:
        """The relay runs as a plain process here (the scan's verdict)."""
        return bool(self.scan.get("python"))

    def ensure_onhost(self) -> None:
        """Upload onhost.py unless the scan saw this very file there."""
        code = program(ONHOST)
        if self.scan.get("onhost") != hashlib.sha256(code).hexdigest():
            self.transport.put(f"{self.work}/onhost.py", code, 0o644)

    def remove(self, what: str) -> None:
        """Remove this host's ``what`` container, if there is one."""
        self.transport.run(runtimes.get(self.runtime).remove(self.container(what)), timeout=60)

    def put_job(self, name: str, job: dict) -> None:
        self.transport.put(f"{self.work}/{name}", json.dumps(job).encode(), 0o600)

    def put_env(self, name: str, env: dict[str, str]) -> str:
        path = f"{self.work}/{name}"
        self.transport.put(path, "".join(f"{k}={v}\n" for k, v in env.items()).encode(), 0o600)
        return path


def _job(m: Manifest, site: Site, **extra) -> dict:
    plain = {"layout": "plain", "dir": site.plain[0], "incoming": site.plain[1]} if site.plain else {}
    return {"repo": m.repo, "revision": m.revision, "ref": m.ref, "folder": repo_folder(m.repo), "cache": site.cache,
            "files": [f.as_dict() for f in m.files], **plain, **extra}


def _lines(site: Site, argv: tuple[str, ...], on_event, stop: threading.Event | None = None) -> tuple[int, list[str]]:
    """Stream a command; JSON lines go to on_event, the rest is kept for the error message."""
    other: list[str] = []

    def line(text: str) -> None:
        if text.startswith("{"):
            try:
                on_event(json.loads(text))
                return
            except ValueError as e:  # a line that only looks like an event: kept as output
                log.debug("%s: not an event (%s): %.200s", site.name, e, text)
        if text.strip():
            other.append(text.strip())

    code = site.transport.stream(argv, line, stop or site.stop)
    return code, other


def prepare(sites: list[Site]) -> None:
    """onhost.py and the cache directory on every host."""
    code = program(ONHOST)

    def one(s: Site) -> None:
        s.transport.put(f"{s.work}/onhost.py", code, 0o644)
        r = s.transport.run(["mkdir", "-p", s.cache], timeout=60)
        if not r.ok:
            raise HostError(s.name, "command", f"cannot create the Hub cache {s.cache}: {r.err_text().strip()}")

    each(one, sites, name="weights")


# The quick scan (names, sizes, links, partial downloads, free space) needs no container: one
# round trip of POSIX sh + coreutils per host, which also creates the cache directory and says
# whether the host can run onhost.py itself (a python3 >= 3.8 that may write the cache: no
# container to start) and which onhost.py it has (uploaded only when it differs). Values arrive
# as positional arguments: the cache, the repo folder, the commit, the work dir, then (path,
# size, etag) per file. Lines: the free space in KiB; "python yes|no"; "onhost <sha256>|-";
# then one per file: "<state> <partial bytes>".
QUICK_SCAN = "\n".join([
    'root="$1/$2"; rev="$3"; work="$4"; shift 4',
    'mkdir -p -- "$1" "$work" || exit 3',
    'd="$root"; while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done',
    "df -P -k -- \"$d\" | awk 'NR==2 {print $4}'",
    'py=no',
    'case "$(python3 -V 2>&1)" in "Python 3."[89]*|"Python 3."[1-9][0-9]*) py=yes;; esac',
    'for p in "$root" "$root/blobs" "$root/snapshots" "$root/snapshots/$rev" "$root/refs"; do',
    '  if [ -e "$p" ] && [ ! -w "$p" ]; then py=no; fi',
    'done',
    '[ -w "$d" ] || py=no',
    'echo "python $py"',
    'sum=$(sha256sum -- "$work/onhost.py" 2>/dev/null) || sum=-',
    'echo "onhost ${sum%% *}"',
    'while [ $# -gt 0 ]; do',
    '  p="$1"; size="$2"; etag="$3"; shift 3',
    '  blob="$root/blobs/$etag"; link="$root/snapshots/$rev/$p"; part=0',
    '  [ -f "$blob.incomplete" ] && part=$(stat -c %s -- "$blob.incomplete")',
    '  if [ -e "$link" ]; then path="$link"; elif [ -e "$blob" ]; then path="$blob"; else echo "missing $part"; continue; fi',
    '  got=$(stat -L -c %s -- "$path")',
    '  if [ "$got" -lt "$size" ]; then echo "truncated $part"; elif [ "$got" -gt "$size" ]; then echo "altered $part"',
    '  elif [ "$path" != "$link" ] || [ ! -L "$link" ] || ! [ "$link" -ef "$blob" ]; then echo "unlinked $part"',
    '  else echo "ok $part"; fi',
    'done',
    "",
])
HEAD_LINES = 3  # free space, python, onhost


def _quick_scan(m: Manifest, s: Site) -> dict:
    args = [s.cache, repo_folder(m.repo), m.revision, s.work]
    for f in m.files:
        args += [f.path, str(f.size), f.etag]
    r = s.transport.run(["sh", "-c", QUICK_SCAN, "sh", *args], timeout=120)
    lines = r.text().split("\n")
    if r.exit_code == 3:
        raise HostError(s.name, "command", f"cannot create the Hub cache {s.cache}: {r.err_text().strip()[:300]}")
    if not r.ok or len(lines) < len(m.files) + HEAD_LINES:
        raise HostError(s.name, "command", f"cannot read the Hub cache {s.cache}: {r.err_text().strip()[:300]}")
    files = {}
    for f, line in zip(m.files, lines[HEAD_LINES:]):
        state, _, part = line.partition(" ")
        files[f.path] = {"state": state, **({"partial": int(part)} if part and part != "0" else {})}
    free = lines[0].strip()
    return {"free": int(free) * 1024 if free.isdigit() else 0, "files": files,
            "python": lines[1].strip() == "python yes", "onhost": lines[2].strip().removeprefix("onhost ")}


def scan(m: Manifest, sites: list[Site], *, rehash: bool = False, sink=None) -> None:
    """Each host's view of the pinned files (``site.scan``); a host that fails gets ``site.error``.
    ``rehash`` re-hashes every present file (onhost.py in the engine image); without it names,
    sizes and links are read with ``stat``."""
    def one(s: Site) -> None:
        got: dict = {}
        try:
            if not rehash:
                got = _quick_scan(m, s)
            else:
                s.put_job("scan.json", _job(m, s))
                code, other = _lines(s, s.argv("scan", "scan.json", "--hash"),
                                     lambda ev: got.update(ev) if ev.get("ev") == "scan" else None)
                if code != 0 or not got:
                    s.error = f"scan failed (exit {code}): " + (" | ".join(other[-3:]) or "no answer")
                    return
        except HostError as e:
            s.error = e.message.removeprefix(f"{s.name}: ")
            return
        s.scan = got
        if sink is not None:
            sink.emit(WeightsPhase(s.name, "scanned"))
            bad = {p: st["state"] for p, st in got["files"].items() if st["state"] != "ok"}
            sink.emit(WeightsScanned(s.name, len(got["files"]) - len(bad), bad, int(got["free"]), to_write(m, s)))

    each(one, sites, name="weights")


def wanted(s: Site) -> list[str]:
    return sorted(p for p, st in s.scan.get("files", {}).items() if st["state"] != "ok")


def to_write(m: Manifest, s: Site) -> int:
    """Bytes the host must still write: wrong files whole, partial downloads only their rest."""
    total = 0
    for p in wanted(s):
        st = s.scan["files"][p]
        size = m.file(p).size
        total += 0 if st["state"] == "unlinked" else size - min(st.get("partial", 0), size)
    return total


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"
