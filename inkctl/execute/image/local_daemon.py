"""The local Docker daemon through the docker SDK (``--local``): inspect, read files, build, save.

Offers the same ``inspect``/``read_files`` as :class:`inkctl.execute.state.images.HostImages`, so
``lock --local`` observes through either. ``docker`` is imported here only.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
import time
from collections.abc import Iterator

from inkctl.errors import InkctlError
from inkctl.execute.state.images import BuildOutcome, ImageInfo, normal_id

NAME = "local"
SAVE_CHUNK = 1 << 20


def _client():
    try:
        import docker
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise InkctlError("--local needs the docker Python package", hint="pip install docker") from e
    try:
        c = docker.from_env(timeout=600)
        c.ping()
        return c
    except Exception as e:
        raise InkctlError(f"cannot reach the local Docker daemon: {e}",
                          hint="start dockerd or set DOCKER_HOST; without --local, images are built on the hosts") from None


class LocalDaemon:
    host = NAME
    runtime = "docker"

    def __init__(self, client=None):
        self.client = client or _client()

    def inspect(self, ref: str) -> ImageInfo | None:
        import docker.errors

        try:
            d = self.client.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.NotFound:
            return None
        cfg = d.get("Config") or {}
        return ImageInfo(ref=ref, id=normal_id(d["Id"]), raw_id=d["Id"], repo_digests=tuple(d.get("RepoDigests") or ()),
                         labels=dict(cfg.get("Labels") or {}), user=cfg.get("User") or "", arch=d.get("Architecture") or "")

    def read_files(self, ref: str, paths: list[str]) -> dict[str, bytes | None]:
        c = self.client.api.create_container(ref, entrypoint="/inkctl-never-run", labels={"inkctl.purpose": "read-file"})
        try:
            return {p: self._read(c["Id"], p) for p in paths}
        finally:
            self.client.api.remove_container(c["Id"], force=True)

    def _read(self, cid: str, path: str, depth: int = 0) -> bytes | None:
        import docker.errors

        try:
            stream, _ = self.client.api.get_archive(cid, path)
        except docker.errors.NotFound:
            return None
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as t:
            m = t.next()
            if m is None:
                return None
            if m.issym() and depth < 8:
                return self._read(cid, posixpath.normpath(posixpath.join(posixpath.dirname(path), m.linkname)), depth + 1)
            f = t.extractfile(m)
            return f.read() if f else None

    def build(self, context: bytes, tag: str, build_args: dict[str, str]) -> BuildOutcome:
        t0 = time.monotonic()
        lines: list[str] = []
        ok = True
        try:
            for item in self.client.api.build(fileobj=io.BytesIO(context), custom_context=True, encoding="gzip",
                                              tag=tag, buildargs=build_args, decode=True, rm=True, forcerm=True,
                                              pull=False):
                if "stream" in item:
                    lines.append(item["stream"])
                if "error" in item:
                    ok = False
                    lines.append(item["error"] + "\n")
        except Exception as e:  # the daemon refused the build itself
            ok = False
            lines.append(f"{type(e).__name__}: {e}\n")
        return BuildOutcome(ok, "".join(lines), len(context), time.monotonic() - t0)

    def layers(self, ref: str) -> list[str]:
        """The image's layers (diff ids, the lowest first)."""
        return list((self.client.api.inspect_image(ref).get("RootFS") or {}).get("Layers") or [])

    def save(self, tag: str) -> Iterator[bytes]:
        """``docker save TAG`` as a stream of chunks (nothing written to disk)."""
        return self.client.api.get_image(tag, chunk_size=SAVE_CHUNK)
