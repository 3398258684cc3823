"""The local transport: ``address: localhost`` runs argv lists with subprocess, never a shell."""

from __future__ import annotations

import logging
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from inkctl.execute.hosts.transport import HostError, Result

log = logging.getLogger(__name__)


class LocalTransport:
    """Same contract as SSHTransport, on this machine: argv straight to exec, no shell parsing."""

    local = True  # no SSH: what doctor and up say about this host

    def __init__(self, name: str = "localhost"):
        self.name = name

    def run(self, argv: Sequence[str], *, timeout: float | None = None,
            stdin: bytes | Iterable[bytes] | None = None) -> Result:
        argv = tuple(argv)
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except FileNotFoundError:
            return Result(argv, 127, b"", f"{argv[0]}: command not found\n".encode(), time.monotonic() - t0)
        except PermissionError as e:
            return Result(argv, 126, b"", f"{argv[0]}: {e.strerror}\n".encode(), time.monotonic() - t0)
        try:
            if stdin is not None and not isinstance(stdin, (bytes, bytearray)):
                out, err = _communicate_streaming(proc, stdin, timeout)
            else:
                out, err = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise HostError(self.name, "timeout", f"timed out after {timeout:g} s: {' '.join(argv)[:200]}")
        log.debug("%s: exit %s in %.3f s: %.300s", self.name, proc.returncode, time.monotonic() - t0, " ".join(argv))
        return Result(argv, proc.returncode, out, err, time.monotonic() - t0)

    def put(self, path: str, content: bytes, mode: int) -> None:
        d = os.path.dirname(path) or "."
        try:
            os.makedirs(d, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".inkctl", dir=d)
            try:
                os.fchmod(fd, mode)  # before the first byte: a secret is never readable by others
                with os.fdopen(fd, "wb") as f:
                    f.write(content)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        except OSError as e:
            raise HostError(self.name, "command", f"cannot write {path}: {e.strerror}",
                            hint="check that this user may write there (the host's state_dir)") from e

    def read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise HostError(self.name, "command", f"cannot read {path}: {e.strerror}") from e

    def remove_dir(self, path: str) -> None:
        """Remove a directory and the files in it (a flat directory, such as a lock)."""
        try:
            for name in os.listdir(path):
                os.unlink(os.path.join(path, name))
            os.rmdir(path)
        except OSError as e:
            raise HostError(self.name, "command", f"cannot remove {path}: {e.strerror}") from e

    def stream(self, argv: Sequence[str], on_line: Callable[[str], None],
               stop: threading.Event | None = None) -> int:
        try:
            proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
        except FileNotFoundError:
            on_line(f"{argv[0]}: command not found")
            return 127
        stopped = threading.Event()

        def watch() -> None:
            while proc.poll() is None:
                if stop is not None and stop.wait(0.2):
                    stopped.set()
                    proc.terminate()
                    return
                if stop is None:
                    return

        threading.Thread(target=watch, daemon=True).start()
        assert proc.stdout is not None
        for raw in proc.stdout:
            on_line(raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r"))
        code = proc.wait()
        return -1 if stopped.is_set() else code

    def alive(self) -> bool:
        """A local process or a recorded host: always there."""
        return True

    def close(self) -> None:
        pass


def _communicate_streaming(proc: subprocess.Popen, chunks: Iterable[bytes], timeout: float | None) -> tuple[bytes, bytes]:
    """Feed an iterable of chunks (e.g. an image tarball) while reading both outputs."""
    bufs: dict[str, bytes] = {}

    def read(name: str, f) -> None:
        bufs[name] = f.read()

    threads = [threading.Thread(target=_feed, args=(proc, chunks), daemon=True),
               threading.Thread(target=read, args=("out", proc.stdout), daemon=True),
               threading.Thread(target=read, args=("err", proc.stderr), daemon=True)]
    for t in threads:
        t.start()
    proc.wait(timeout=timeout)
    for t in threads[1:]:
        t.join()
    return bufs.get("out", b""), bufs.get("err", b"")


def _feed(proc: subprocess.Popen, chunks: Iterable[bytes]) -> None:
    try:
        assert proc.stdin is not None
        for c in chunks:
            proc.stdin.write(c)
        proc.stdin.close()
    except (BrokenPipeError, OSError) as e:  # the command exited early: its exit code says why
        log.debug("stdin of pid %s: %s", proc.pid, e)
