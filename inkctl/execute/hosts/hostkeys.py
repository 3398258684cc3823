"""Host keys: the user's known_hosts, OpenSSH-style fingerprints, and trust on first use.

inkctl never trusts a host key silently (no AutoAddPolicy, no WarningPolicy): an unknown key
is refused with its fingerprint unless ``--accept-new-host-keys`` is given, in which case it is
appended to the user's known_hosts exactly as OpenSSH's ``StrictHostKeyChecking=accept-new``
would (``[host]:port`` for a port other than 22; hashed when the user hashes their entries).
A changed key is refused always: it is what a man-in-the-middle looks like.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from inkctl.execute.hosts.transport import HostError

log = logging.getLogger(__name__)

ACCEPT_FLAG = "--accept-new-host-keys"
_APPEND_LOCK = threading.Lock()


def key_type(key) -> str:
    """The name OpenSSH shows for the key's algorithm (ED25519, ECDSA, RSA)."""
    name = key.get_name()
    if "ed25519" in name:
        return "ED25519"
    if "ecdsa" in name:
        return "ECDSA"
    if "rsa" in name:
        return "RSA"
    return name


def known_hosts_name(host: str, port: int) -> str:
    """How known_hosts names a host: the bare name on port 22, else ``[host]:port``."""
    return host if port == 22 else f"[{host}]:{port}"


def default_known_hosts() -> Path:
    return Path(os.path.expanduser("~/.ssh/known_hosts"))


@dataclass
class KnownHosts:
    """The known_hosts files to check against, and the one new keys are written to."""

    files: list[Path]
    hash_names: bool | None = None  # None: follow what the file already does
    accepted: list[str] = field(default_factory=list)  # lines appended this run

    @property
    def write_to(self) -> Path:
        return self.files[0] if self.files else default_known_hosts()

    def load_into(self, client, name: str | None = None) -> None:
        """Load the keys of every readable file into the client's host keys: checked, never
        written back (the client has no file to save them to; new keys are appended by
        ``append`` only). With ``name`` (how known_hosts names the host: ``known_hosts_name``),
        only that host's lines: the one name the client looks up, without a table of every
        host per connection (paramiko's ``add`` scans the table, so loading all of a long
        known_hosts into each of many clients costs seconds).

        Parsed line by line, so that one bad line is skipped (as OpenSSH does) instead of
        making the whole file unreadable (``HostKeys.load`` stops at a malformed key). The
        first line for a name and key type wins, as in the file's order.
        """
        keys = client.get_host_keys()
        seen: set[tuple[str, str]] = set()
        for f in self.files:
            for hostnames, key in _entries(f):
                for h in hostnames:
                    if name is not None and not _names(h, name):
                        continue
                    if (h, key.get_name()) not in seen:
                        seen.add((h, key.get_name()))
                        keys.add(h, key.get_name(), key)

    def append(self, name: str, key) -> str:
        """Append one entry as OpenSSH would; returns the line written."""
        path = self.write_to
        with _APPEND_LOCK:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            hashed = self.hash_names if self.hash_names is not None else _file_is_hashed(path)
            if hashed:
                from paramiko.hostkeys import HostKeys

                host_field = HostKeys.hash_host(name)
            else:
                host_field = name
            line = f"{host_field} {key.get_name()} {key.get_base64()}\n"
            import fcntl

            # another inkctl (an up on other hosts, started at the same moment) may append too:
            # the file's lock makes "does it end with a newline?" and the write one step
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "r+b") as f:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
                size = os.fstat(f.fileno()).st_size
                prefix = b"\n" if size and os.pread(f.fileno(), 1, size - 1) != b"\n" else b""
                f.write(prefix + line.encode())
                f.flush()
            self.accepted.append(line)
            return line


_PARSED: dict[Path, tuple[str, list]] = {}  # a file -> (its text, its entries)
_PARSED_LOCK = threading.Lock()


def _entries(path: Path) -> list:
    """(hostnames, key) of each line of a known_hosts file that parses; [] when it cannot be
    read. Read each time, parsed once per process for a given text (the parse is the slow part)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    with _PARSED_LOCK:
        hit = _PARSED.get(path)
        if hit is not None and hit[0] == text:
            return hit[1]
    from paramiko.hostkeys import HostKeyEntry

    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("@"):
            continue  # @revoked / @cert-authority markers are not supported: never trusted
        try:
            e = HostKeyEntry.from_line(line)
        except Exception:
            continue
        if e is not None:
            out.append((list(e.hostnames), e.key))
    with _PARSED_LOCK:
        _PARSED[path] = (text, out)
    return out


def _names(field: str, name: str) -> bool:
    """A known_hosts name field (plain or hashed, ``|1|salt|hash``) names ``name``."""
    if field == name:
        return True
    if not field.startswith("|1|"):
        return False
    from paramiko.hostkeys import HostKeys

    try:
        return HostKeys.hash_host(name, field) == field
    except Exception:  # a malformed salt names nothing
        return False


def _file_is_hashed(path: Path) -> bool:
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    return line.startswith("|1|")
    except OSError as e:
        log.debug("%s: cannot read it (%s); new entries are written unhashed", path, e)
    return False


def make_policy(host: str, known: KnownHosts, accept_new: bool, on_accept=None):
    """A paramiko MissingHostKeyPolicy that refuses unknown keys, or trusts them on first use."""
    import paramiko

    class TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
        """Called by paramiko only when the host has no entry at all in known_hosts."""

        def missing_host_key(self, client, hostname, key):
            fp = key.fingerprint
            if not accept_new:
                raise HostError(
                    host, "unknown-host-key",
                    f"host key unknown: {hostname} presented {key_type(key)} key {fp}, "
                    f"which is not in {known.write_to}",
                    hint=f"check the fingerprint out of band (ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub on the host), "
                         f"then run again with {ACCEPT_FLAG} to trust it and record it in {known.write_to}")
            client.get_host_keys().add(hostname, key.get_name(), key)
            known.append(hostname, key)
            if on_accept:
                on_accept(host, hostname, key_type(key), fp)

    return TrustOnFirstUse()


def changed_key_error(host: str, name: str, presented, expected, known: KnownHosts) -> HostError:
    return HostError(
        host, "changed-host-key",
        f"HOST KEY CHANGED for {name}: known_hosts expects {key_type(expected)} {expected.fingerprint} "
        f"but the host presented {key_type(presented)} {presented.fingerprint}; refusing to connect "
        f"(this is what a man-in-the-middle attack looks like; {ACCEPT_FLAG} does not override it)",
        hint=f"if the host was really reinstalled, remove the old entry (ssh-keygen -R '{name}' -f {known.write_to}) and run again")
