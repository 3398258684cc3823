"""Images on a host, through its container runtime's CLI over the host's transport.

``docker`` and ``podman`` answer the same argv here (``image inspect``, ``create``/``cp``/``rm``,
``build -``, ``load``); the differences (podman's bare image ids, its error wording) are
absorbed in this file. The local daemon, reached through the docker SDK for ``--local``, is in
``inkctl.execute.image.local_daemon`` and offers the same methods.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import tarfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from inkctl.execute.hosts.transport import HostError, Transport
from inkctl import runtimes

NOT_FOUND = re.compile(r"no such image|image not known|not found|no such object|does not exist", re.I)
NO_FILE = re.compile(r"could not find the file|could not be found|no such file", re.I)  # docker | podman
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class ImageInfo:
    ref: str
    id: str  # "sha256:<hex>" (podman's bare hex is normalised)
    raw_id: str  # as the runtime prints it: what FROM and run accept on that host
    repo_digests: tuple[str, ...] = ()
    labels: dict = field(default_factory=dict)
    user: str = ""
    arch: str = ""

    @property
    def digests(self) -> set[str]:
        return {d.split("@", 1)[1] for d in self.repo_digests if "@" in d}

    def matches(self, digest: str) -> bool:
        """A recipe's ``@sha256:`` pin names a pulled image's repo digest; for images that were
        loaded or built, never pulled (no repo digest), it may name the image id instead."""
        return digest == self.id or digest in self.digests

    def as_lock(self) -> dict:
        return {"id": self.id, "repo_digests": sorted(self.repo_digests)}


def normal_id(raw: str) -> str:
    return raw if raw.startswith("sha256:") else f"sha256:{raw}"


def parse_inspect(ref: str, stdout: bytes) -> ImageInfo:
    doc = json.loads(stdout.decode("utf-8", "replace"))
    d = doc[0] if isinstance(doc, list) else doc
    cfg = d.get("Config") or {}
    labels = cfg.get("Labels") or d.get("Labels") or {}
    return ImageInfo(ref=ref, id=normal_id(d["Id"]), raw_id=d["Id"], repo_digests=tuple(d.get("RepoDigests") or ()),
                     labels=dict(labels), user=cfg.get("User") or "", arch=d.get("Architecture") or "")


def build_failure_lines(output: str) -> list[str]:
    """The lines a failed build should show: inkctl's own verdicts, else the runtime's error lines."""
    text = ANSI.sub("", output)
    ours = [ln.strip() for ln in text.splitlines() if "inkctl-build:" in ln and not ln.rstrip().endswith("verified")]
    ours = [ln[ln.index("inkctl-build:"):] for ln in ours]
    if ours:
        return ours
    errs = [ln.strip() for ln in text.splitlines()
            if re.search(r"error|returned a non-zero code|failed", ln, re.I) and "DEPRECATED" not in ln]
    return errs[-3:] or [ln for ln in text.strip().splitlines()[-3:]]


class Counted:
    """Wraps chunks, counting the bytes that pass (what was really handed to the transport)."""

    def __init__(self, chunks: Iterable[bytes], on_progress=None, every: int = 16 << 20):
        self.chunks, self.sent, self.on_progress, self.every = chunks, 0, on_progress, every
        self._next = every

    def __iter__(self):
        for c in self.chunks:
            self.sent += len(c)
            if self.on_progress and self.sent >= self._next:
                self._next += self.every
                self.on_progress(self.sent)
            yield c


@dataclass
class BuildOutcome:
    ok: bool
    output: str
    bytes_sent: int
    seconds: float


class HostImages:
    """One host's images via ``docker`` or ``podman`` over its transport."""

    def __init__(self, transport: Transport, runtime: str, answered: dict | None = None):
        self.transport, self.runtime = transport, runtime
        # ref -> the Result of an ``image inspect ref`` this command already ran there (the
        # combined probe before a launch); used once, later inspects ask the host again
        self._answered = dict(answered or {})

    @property
    def host(self) -> str:
        return self.transport.name

    def _fail(self, what: str, res) -> HostError:
        err = (res.err_text() or res.text()).strip().splitlines()
        return HostError(self.host, "runtime", f"{self.runtime} {what} failed (exit {res.exit_code}): {err[-1] if err else ''}",
                         hint=f"check that {self.runtime} works on {self.host}")

    def inspect(self, ref: str) -> ImageInfo | None:
        res = self._answered.pop(ref, None) or self.transport.run(runtimes.get(self.runtime).image_inspect(ref), timeout=60)
        if res.ok:
            return parse_inspect(ref, res.stdout)
        if NOT_FOUND.search(res.err_text() + res.text()):
            return None
        raise self._fail(f"image inspect {ref}", res)

    def read_files(self, ref: str, paths: list[str]) -> dict[str, bytes | None]:
        """File contents inside an image, without running anything in it (create, cp, rm)."""
        res = self.transport.run(runtimes.get(self.runtime).create(ref, label="inkctl.purpose=read-file",
                                                 entrypoint="/inkctl-never-run"), timeout=120)
        if not res.ok:
            raise self._fail(f"create (to read files of {ref})", res)
        cid = res.text().strip().splitlines()[-1]
        try:
            return {p: self._read(cid, p) for p in paths}
        finally:
            self.transport.run(runtimes.get(self.runtime).remove(cid), timeout=60)

    def _read(self, cid: str, path: str, depth: int = 0) -> bytes | None:
        res = self.transport.run(runtimes.get(self.runtime).copy_out(cid, path), timeout=300)
        if not res.ok:
            if NO_FILE.search(res.err_text()):
                return None
            raise self._fail(f"cp {path}", res)
        with tarfile.open(fileobj=io.BytesIO(res.stdout)) as t:
            m = t.next()
            if m is None:
                return None
            if m.issym() and depth < 8:  # what the build's sha256sum sees is the link's target
                return self._read(cid, posixpath.normpath(posixpath.join(posixpath.dirname(path), m.linkname)), depth + 1)
            f = t.extractfile(m)
            return f.read() if f else None

    def build(self, context: bytes, tag: str, build_args: dict[str, str]) -> BuildOutcome:
        """``<runtime> build -`` with the (gzipped) context on stdin."""
        argv = runtimes.get(self.runtime).build(tag, build_args)
        t0 = time.monotonic()
        counted = Counted([context])
        res = self.transport.run(argv, stdin=counted, timeout=3600)
        return BuildOutcome(res.ok, res.text() + res.err_text(), counted.sent, time.monotonic() - t0)

    def load(self, chunks: Iterable[bytes]):
        return self.transport.run(runtimes.get(self.runtime).load(), stdin=chunks, timeout=3600)
