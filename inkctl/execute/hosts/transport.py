"""One protocol for reaching a host: run an argv, upload (read, remove) a file, stream output.

Two implementations: ``LocalTransport`` (subprocess with an argv list, for
``address: localhost``) and ``SSHTransport`` (paramiko; one connection per host for the whole
command). Remote argv are turned into shell text by ``inkctl.plan.quote.command_line`` only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from inkctl.errors import InkctlError


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    exit_code: int
    stdout: bytes
    stderr: bytes
    seconds: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def err_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


class HostError(InkctlError):
    """A host could not be reached or used: which ``host``, why (``reason``, without the host's
    name), and the ``cause``: unreachable, timeout, auth, unknown-host-key, changed-host-key,
    runtime, command. ``message`` puts the two together."""

    def __init__(self, host: str, cause: str, reason: str, *, hint: str | None = None):
        self.host, self.cause, self.reason = host, cause, reason
        super().__init__(self.message, hint=hint)

    @property
    def message(self) -> str:
        return f"{self.host}: {self.reason}"

    @message.setter
    def message(self, text: str) -> None:
        self.reason = text.removeprefix(f"{self.host}: ")


class HostsFailed(HostError):
    """Several hosts failed at once; ``errors`` holds each, the message lists them."""

    def __init__(self, errors: list[HostError], reason: str, *, hint: str | None = None):
        self.errors = errors
        super().__init__(errors[0].host, errors[0].cause, reason, hint=hint)

    @property
    def message(self) -> str:
        return self.reason

    @message.setter
    def message(self, text: str) -> None:
        self.reason = text


class Transport(Protocol):
    name: str  # the host's name from the inventory

    def run(self, argv: Sequence[str], *, timeout: float | None = None,
            stdin: bytes | Iterable[bytes] | None = None) -> Result:
        """Run argv to completion; never raises for a non-zero exit (see Result.exit_code);
        raises HostError when the host itself fails (connection lost, timeout)."""

    def put(self, path: str, content: bytes, mode: int) -> None:
        """Write a file atomically (temp file, chmod, rename), creating parent directories.
        The content never appears on a command line."""

    def read(self, path: str) -> bytes | None:
        """A file's content (None when it does not exist), through the file channel (SFTP):
        no command, so no shell, is started on the host."""

    def remove_dir(self, path: str) -> None:
        """Remove a directory and the files in it (a flat directory) through the file channel."""

    def stream(self, argv: Sequence[str], on_line: Callable[[str], None],
               stop: threading.Event | None = None) -> int:
        """Run argv, calling on_line for each output line (stdout and stderr merged) until it
        exits or ``stop`` is set; returns the exit code (or -1 when stopped)."""

    def alive(self) -> bool:
        """Whether the connection still stands (SSH: keepalives acknowledged); a host whose
        connection is gone is lost, and nothing more can be asked of it."""

    def close(self) -> None: ...
