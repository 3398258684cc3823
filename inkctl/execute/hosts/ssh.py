"""SSH transport over paramiko: one connection per host for the whole command.

Every remote command of a run (launch, health checks, log following, teardown) is a channel
on that one connection, so a 16-host launch costs 16 handshakes, not hundreds. The socket
has TCP_NODELAY (small commands, no Nagle delay), TCP keepalive and TCP_USER_TIMEOUT, so a
host cut off mid-launch is noticed in seconds instead of after the kernel's 15-minute
retransmission limit.

paramiko is imported inside functions only: ``inkctl --help``, ``validate`` and ``plan``
never pay for it.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from inkctl.execute.hosts.hostkeys import KnownHosts, changed_key_error, known_hosts_name, make_policy
from inkctl.execute.hosts.transport import HostError, Result
from inkctl.plan.quote import command_line

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from inkctl.execute.hosts.target import Target

# A host that stops answering is declared lost within LOST_AFTER_S: the SSH keepalive sends a
# packet every KEEPALIVE_S, and TCP_USER_TIMEOUT drops the connection when sent data stays
# unacknowledged for USER_TIMEOUT_MS (acknowledgements come from the host's kernel, so a busy
# host still answers in time). Channel opens are bounded by CHANNEL_OPEN_S for the same reason.
KEEPALIVE_S = 1
USER_TIMEOUT_MS = 3_500
CHANNEL_OPEN_S = 5.0
LOST_AFTER_S = KEEPALIVE_S + USER_TIMEOUT_MS / 1000


def tune_socket(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for opt, value in (("TCP_KEEPIDLE", 1), ("TCP_KEEPINTVL", 1), ("TCP_KEEPCNT", 3),
                       ("TCP_USER_TIMEOUT", USER_TIMEOUT_MS)):
        if hasattr(socket, opt):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), value)
            except OSError as e:  # an older kernel: a lost host is noticed later
                log.debug("cannot set %s on the connection: %s", opt, e)


def _tcp(target: "Target", timeout: float) -> socket.socket:
    where = f"{target.hostname}:{target.port}"
    try:
        sock = socket.create_connection((target.hostname, target.port), timeout=timeout)
    except socket.gaierror as e:
        raise HostError(target.host, "unreachable", f"cannot resolve {target.hostname}: {e.strerror}",
                        hint="check the host's address in the inventory or ~/.ssh/config") from e
    except (socket.timeout, TimeoutError) as e:
        raise HostError(target.host, "timeout", f"timed out after {timeout:g} s connecting to {where}",
                        hint="is the host up and reachable from here (network, firewall)?") from e
    except OSError as e:
        why = {errno.ECONNREFUSED: "connection refused (is sshd running?)",
               errno.EHOSTUNREACH: "no route to host", errno.ENETUNREACH: "network unreachable"}.get(
                   e.errno or 0, e.strerror or str(e))
        raise HostError(target.host, "unreachable", f"unreachable: cannot connect to {where}: {why}",
                        hint="check that the host is up and that the address and port are right") from e
    tune_socket(sock)
    return sock


def open_client(target: "Target", known: KnownHosts, *, accept_new: bool, timeout: float,
                sock=None, on_accept=None):
    """A connected, authenticated paramiko SSHClient for ``target`` (host key checked)."""
    import paramiko

    _quiet_paramiko()
    client = paramiko.SSHClient()
    known.load_into(client, known_hosts_name(target.hostname, target.port))
    client.set_missing_host_key_policy(make_policy(target.host, known, accept_new, on_accept))
    if sock is None:
        sock = _tcp(target, timeout)
    where = f"{target.user}@{target.hostname}:{target.port}"
    try:
        client.connect(
            target.hostname, port=target.port, username=target.user, sock=sock,
            key_filename=target.identity_files or None,  # type: ignore[arg-type]  # paramiko takes a list too
            timeout=timeout * 2, banner_timeout=timeout,
            auth_timeout=timeout, allow_agent=bool(os.environ.get("SSH_AUTH_SOCK")),
            look_for_keys=not target.identity_files)
    except HostError:
        client.close()
        raise
    except paramiko.BadHostKeyException as e:
        client.close()
        raise changed_key_error(target.host, known_hosts_name(target.hostname, target.port), e.key, e.expected_key,
                                known) from e
    except paramiko.AuthenticationException as e:
        client.close()
        keys = ", ".join(target.identity_files) or "the agent and ~/.ssh/id_*"
        raise HostError(target.host, "auth", f"authentication failed for {where} (tried {keys}): {e}",
                        hint="check user and identity_file in the inventory or ~/.ssh/config, and the key in the host's authorized_keys") from e
    except (socket.timeout, TimeoutError) as e:
        client.close()
        raise HostError(target.host, "timeout", f"timed out after {timeout:g} s during the SSH handshake with {where}") from e
    except (paramiko.SSHException, EOFError, OSError) as e:
        client.close()
        if "banner" in str(e).lower():
            raise HostError(target.host, "timeout", f"no SSH banner from {where} within {timeout:g} s",
                            hint="is an SSH server (and not something else) listening on that port?") from e
        raise HostError(target.host, "unreachable", f"SSH handshake with {where} failed: {e or type(e).__name__}",
                        hint="is an SSH server listening on that port?") from e
    transport = client.get_transport()
    assert transport is not None  # connect() returned: the transport stands
    transport.set_keepalive(KEEPALIVE_S)
    log.debug("%s: connected to %s (%s)", target.host, where, transport.remote_version)
    return client


def _quiet_paramiko() -> None:
    """paramiko logs handshake failures at ERROR; without a handler Python would print them to
    stderr as well, next to inkctl's own (better) message. Our HostError is the report."""
    import logging

    log = logging.getLogger("paramiko")
    if not log.handlers:
        log.addHandler(logging.NullHandler())
        log.propagate = False


class SSHTransport:
    """Runs argv lists on one host over one paramiko connection (channels are multiplexed)."""

    def __init__(self, name: str, client, jumps: Sequence = ()):
        self.name = name
        self._client = client
        self._jumps = list(jumps)  # ProxyJump hosts, closed with us
        self._sftp = None
        self._sftp_lock = threading.Lock()

    # -- plumbing --------------------------------------------------------------------------
    def _channel(self, timeout: float | None):
        t = self._client.get_transport()
        if t is None or not t.is_active():
            raise HostError(self.name, "unreachable", "connection lost",
                            hint="the host went away during the command; check its network")
        try:
            return t.open_session(timeout=min(timeout or CHANNEL_OPEN_S, CHANNEL_OPEN_S))
        except Exception as e:
            if self._lost():
                raise HostError(self.name, "unreachable", f"connection lost ({e or type(e).__name__})",
                                hint="the host went away during the command; check its network") from e
            # the connection stands: sshd turned this one channel away (MaxSessions, a busy host);
            # the host is not lost, and what asked may ask again
            raise HostError(self.name, "command", f"the host refused a new SSH channel: {e or type(e).__name__}",
                            hint="check the host's sshd (MaxSessions, its logs)") from e

    def _exec(self, chan, argv: tuple, pty: bool = False) -> None:
        """Start ARGV on an open channel. The connection can drop between the open and the
        request (paramiko: "Channel closed."): that is the host lost, not an internal error."""
        try:
            if pty:
                chan.get_pty(term="dumb", width=500)
                chan.set_combine_stderr(True)
            chan.exec_command(command_line(argv))
        except Exception as e:
            chan.close()
            if self._lost():
                raise HostError(self.name, "unreachable", f"connection lost ({e or type(e).__name__})",
                                hint="the host went away during the command; check its network") from e
            raise HostError(self.name, "command", f"the host refused to start a command: {e or type(e).__name__}",
                            hint="check the host's sshd (MaxSessions, its logs)") from e

    def _lost(self) -> bool:
        t = self._client.get_transport()
        return t is None or not t.is_active()

    def alive(self) -> bool:
        """The connection still stands (keepalives acknowledged); False once the host is lost."""
        return not self._lost()

    # -- Transport -------------------------------------------------------------------------
    def run(self, argv: Sequence[str], *, timeout: float | None = None,
            stdin: bytes | Iterable[bytes] | None = None) -> Result:
        argv = tuple(argv)
        t0 = time.monotonic()
        chan = self._channel(timeout)
        self._exec(chan, argv)
        writer = None
        if stdin is None:
            chan.shutdown_write()
        elif isinstance(stdin, (bytes, bytearray)):
            writer = threading.Thread(target=_feed, args=(chan, [bytes(stdin)]), daemon=True)
        else:
            writer = threading.Thread(target=_feed, args=(chan, stdin), daemon=True)
        if writer:
            writer.start()
        out, err = bytearray(), bytearray()
        deadline = None if timeout is None else t0 + timeout
        try:
            while True:
                _drain(chan, out, err)
                if chan.eof_received and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                if chan.closed:
                    _drain(chan, out, err)
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise HostError(self.name, "timeout", f"timed out after {timeout:g} s: {command_line(argv)[:200]}")
                if self._lost():
                    raise HostError(self.name, "unreachable", "connection lost during a command",
                                    hint="the host went away; check its network")
                select.select([chan], [], [], 0.5)
            code = _exit_status(chan, deadline)
            if code is None:
                raise HostError(self.name, "unreachable", "connection lost before the command reported its exit status")
        finally:
            chan.close()
        seconds = time.monotonic() - t0
        log.debug("%s: exit %s in %.3f s: %.300s", self.name, code, seconds, command_line(argv))
        return Result(argv=argv, exit_code=code, stdout=bytes(out), stderr=bytes(err), seconds=seconds)

    def put(self, path: str, content: bytes, mode: int) -> None:
        """Upload to a temp name beside ``path``, chmod it, then rename: readers never see a
        partial file, and a secret file is 0600 before its first byte is written."""
        d = posixpath.dirname(path) or "."
        tmp = posixpath.join(d, f".{posixpath.basename(path)}.inkctl-{uuid.uuid4().hex[:8]}")
        log.debug("%s: put %s (%d bytes, mode %o)", self.name, path, len(content), mode)
        with self._sftp_lock:
            try:
                sftp = self._sftp_client()
                _makedirs(sftp, d)
                with sftp.open(tmp, "wb") as f:
                    sftp.chmod(tmp, mode)
                    f.set_pipelined(True)
                    f.write(content)
                try:
                    sftp.posix_rename(tmp, path)
                except OSError:
                    sftp.rename(tmp, path)
            except HostError:
                raise
            except Exception as e:
                try:
                    self._sftp_client().remove(tmp)
                except Exception as e2:  # the write's own error is raised below
                    log.debug("%s: removing the partial %s failed: %s", self.name, tmp, e2)
                if self._lost():
                    raise HostError(self.name, "unreachable", f"connection lost while writing {path}") from e
                raise HostError(self.name, "command", f"cannot write {path}: {e}",
                                hint="check that the SSH user may write there (the host's state_dir)") from e

    def read(self, path: str) -> bytes | None:
        """A file's content over SFTP (no shell is started on the host); None when there is none."""
        with self._sftp_lock:
            try:
                with self._sftp_client().open(path, "rb") as f:
                    return f.read()
            except HostError:
                raise
            except Exception as e:
                if isinstance(e, FileNotFoundError) or getattr(e, "errno", None) == errno.ENOENT:
                    return None
                raise HostError(self.name, "command", f"cannot read {path}: {e}") from e

    def remove_dir(self, path: str) -> None:
        """Remove a directory and the files in it over SFTP (a flat directory, such as a lock)."""
        with self._sftp_lock:
            try:
                sftp = self._sftp_client()
                for name in sftp.listdir(path):
                    sftp.remove(posixpath.join(path, name))
                sftp.rmdir(path)
            except HostError:
                raise
            except Exception as e:
                raise HostError(self.name, "command", f"cannot remove {path}: {e}") from e

    def _sftp_client(self):
        if self._sftp is None:
            try:
                self._sftp = self._client.open_sftp()
            except Exception as e:
                raise HostError(self.name, "command", f"cannot open SFTP: {e}",
                                hint="enable the sftp subsystem in the host's sshd_config") from e
        return self._sftp

    def stream(self, argv: Sequence[str], on_line: Callable[[str], None],
               stop: threading.Event | None = None) -> int:
        chan = self._channel(None)
        # a pty ties the remote command to this channel: when we stop following and close it,
        # the remote side gets SIGHUP (a plain exec channel would leave `docker logs -f` running)
        self._exec(chan, tuple(argv), pty=True)
        log.debug("%s: following %.300s", self.name, command_line(tuple(argv)))
        buf = b""
        try:
            while True:
                if stop is not None and stop.is_set():
                    return -1
                if chan.recv_ready():
                    data = chan.recv(65536)
                    if not data:
                        break
                    buf += data
                    *lines, buf = buf.split(b"\n")
                    for line in lines:
                        on_line(line.decode("utf-8", "replace").rstrip("\r"))
                    continue
                if chan.eof_received or chan.closed:
                    break
                if self._lost():
                    return -1
                select.select([chan], [], [], 0.2)
            if buf:
                on_line(buf.decode("utf-8", "replace"))
            code = _exit_status(chan, time.monotonic() + 5)
            return -1 if code is None else code
        finally:
            chan.close()

    def close(self) -> None:
        for c in [self._sftp, self._client, *reversed(self._jumps)]:
            try:
                if c is not None:
                    c.close()
            except Exception as e:  # closing: nothing more is asked of it
                log.debug("%s: closing %s: %s", self.name, type(c).__name__, e)
        self._sftp = None


def _feed(chan, chunks: Iterable[bytes]) -> None:
    try:
        for chunk in chunks:
            if chunk:
                chan.sendall(chunk)
        chan.shutdown_write()
    except Exception as e:  # the reader sees the broken channel
        log.debug("stdin to the channel: %s", e)


def _drain(chan, out: bytearray, err: bytearray) -> None:
    while chan.recv_ready():
        out += chan.recv(65536)
    while chan.recv_stderr_ready():
        err += chan.recv_stderr(65536)


def _exit_status(chan, deadline: float | None) -> int | None:
    while not chan.exit_status_ready():
        if chan.closed and not chan.exit_status_ready():
            return None
        if deadline is not None and time.monotonic() > deadline:
            return None
        chan.status_event.wait(0.2)
    return chan.recv_exit_status()


def _makedirs(sftp, d: str) -> None:
    """``mkdir -p`` over SFTP: stat upwards until a directory exists, then create downwards."""
    missing = []
    cur = d
    while cur not in ("", "/"):
        try:
            sftp.stat(cur)
            break
        except FileNotFoundError:
            missing.append(cur)
            cur = posixpath.dirname(cur)
        except IOError as e:
            if getattr(e, "errno", None) == errno.ENOENT:
                missing.append(cur)
                cur = posixpath.dirname(cur)
            else:
                raise
    for m in reversed(missing):
        try:
            sftp.mkdir(m)
        except IOError:
            sftp.stat(m)  # created meanwhile by a parallel upload: fine
