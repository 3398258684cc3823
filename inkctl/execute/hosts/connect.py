"""Reach every host of a plan: resolve ~/.ssh/config, check host keys, connect in parallel.

One connection per host for the whole command. ``up`` connects to all hosts before anything
starts: one host refused or unreachable and nothing starts anywhere. ``down`` connects to what
it can and reports the rest.

Resolution order for each field: the inventory, then ~/.ssh/config (Host aliases, HostName,
User, Port, IdentityFile, ProxyJump, UserKnownHostsFile, HashKnownHosts), then the defaults
(port 22, the local user, ~/.ssh/id_*), as OpenSSH does.
"""

from __future__ import annotations

import getpass
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from inkctl.errors import InkctlError
from inkctl.execute.hosts.hostkeys import KnownHosts, default_known_hosts
from inkctl.execute.hosts.fanout import background, on_hosts
from inkctl.execute.hosts.target import Target
from inkctl.execute.hosts.transport import HostError, HostsFailed, Transport
from inkctl.recipe.hosts import Host

log = logging.getLogger(__name__)

LOCAL_ADDRESSES = ("localhost", "127.0.0.1", "::1")
CONNECT_TIMEOUT_S = 10.0  # a LAN host answers in milliseconds; a cut-off one would take the kernel minutes


def ssh_config_path() -> Path:
    return Path(os.path.expanduser("~/.ssh/config"))


def load_ssh_config():
    import paramiko

    path = ssh_config_path()
    if path.is_file():
        try:
            return paramiko.SSHConfig.from_path(str(path))
        except Exception as e:
            raise InkctlError(f"cannot read {path}: {e}", hint="fix the line it names") from e
    return paramiko.SSHConfig()


def resolve_target(name: str, address: str, config, *, user: str | None = None, port: int | None = None,
                   identity_file: str | None = None) -> Target:
    """Apply ~/.ssh/config to ``address`` (which may be an alias); explicit values win."""
    opts = config.lookup(address)
    files = [Path(os.path.expanduser(f)) for f in (opts.get("userknownhostsfile") or "").split()]
    files += [default_known_hosts()]
    if os.path.isfile("/etc/ssh/ssh_known_hosts"):
        files.append(Path("/etc/ssh/ssh_known_hosts"))
    hashed = opts.get("hashknownhosts")
    idents = [identity_file] if identity_file else list(opts.get("identityfile") or [])
    idents = [os.path.expanduser(i) for i in idents]
    if not identity_file:
        idents = [i for i in idents if os.path.isfile(i)]  # OpenSSH skips missing defaults too
    jump = opts.get("proxyjump")
    return Target(
        host=name, hostname=opts.get("hostname", address), port=int(port or opts.get("port") or 22),
        user=user or opts.get("user") or getpass.getuser(), identity_files=idents,
        proxy_jump=[] if not jump or jump.lower() == "none" else [j.strip() for j in jump.split(",")],
        known=KnownHosts(files, hash_names=None if hashed is None else hashed.lower() == "yes"))


def _jump_target(spec: str, config, via: str) -> Target:
    """``[user@]host[:port]`` from ProxyJump, resolved through ssh_config like any host."""
    user, _, rest = spec.rpartition("@")
    host, port = rest, None
    if rest.startswith("["):
        host, _, p = rest[1:].partition("]")
        port = int(p[1:]) if p.startswith(":") else None
    elif rest.count(":") == 1:
        host, p = rest.split(":")
        port = int(p)
    t = resolve_target(f"{via} (jump host {host})", host, config, user=user or None, port=port)
    t.proxy_jump = []  # a jump host's own ProxyJump is not followed (no loops)
    return t


def connect_host(host: Host, *, accept_new: bool, config=None, timeout: float = CONNECT_TIMEOUT_S,
                 on_accept: Callable | None = None) -> Transport:
    """One transport for one inventory host: local for ``local: true`` (or a loopback address
    without a port: ``Host.runs_here``), else SSH."""
    if host.runs_here:
        from inkctl.execute.hosts.local import LocalTransport

        return LocalTransport(host.name)
    from inkctl.execute.hosts.ssh import SSHTransport, open_client

    config = config if config is not None else load_ssh_config()
    target = resolve_target(host.name, host.ssh_address, config, user=host.user, port=host.port,
                            identity_file=host.identity_file)
    jumps = []
    sock = None
    try:
        for spec in target.proxy_jump:
            jt = _jump_target(spec, config, host.name)
            jc = open_client(jt, jt.known, accept_new=accept_new, timeout=timeout, sock=sock, on_accept=on_accept)
            jumps.append(jc)
            sock = _through(jc, jt, target, timeout)
        client = open_client(target, target.known, accept_new=accept_new, timeout=timeout, sock=sock, on_accept=on_accept)
    except BaseException:
        for j in jumps:
            j.close()
        raise
    return SSHTransport(host.name, client, jumps)


def _through(jump_client, jt: Target, target: Target, timeout: float):
    """A direct-tcpip channel from the jump host to the next hop, used as that hop's socket."""
    try:
        return jump_client.get_transport().open_channel(
            "direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0), timeout=timeout)
    except Exception as e:
        raise HostError(target.host, "unreachable",
                        f"jump host {jt.hostname} cannot reach {target.hostname}:{target.port}: {e}") from e


GENERIC_HINTS = {  # one hint for several hosts failing the same way
    "changed-host-key": "if those hosts were really reinstalled, remove their old entries (ssh-keygen -R HOST) and run again",
    "unknown-host-key": "check the fingerprints out of band, then run again with --accept-new-host-keys",
    "unreachable": "check that the hosts are up and that their addresses and ports are right",
    "timeout": "are the hosts up and reachable from here (network, firewall)?",
    "auth": "check user and identity_file in the inventory or ~/.ssh/config, and the hosts' authorized_keys",
}


@dataclass
class Connected:
    transports: dict[str, Transport]
    errors: dict[str, HostError]
    seconds: float


def connect_each(hosts: list[Host], *, accept_new: bool = False, timeout: float = CONNECT_TIMEOUT_S,
                 on_host: Callable[[str, float, HostError | None], None] | None = None,
                 on_accept: Callable | None = None, then: Callable[[str, Transport], None] | None = None) -> Connected:
    """Connect to every host in parallel; return what connected and what did not.

    ``then(name, transport)`` runs in a host's own thread as soon as that host is connected (its
    first command, e.g. up's probe), so one slow handshake delays only its own host."""
    t0 = time.monotonic()
    config = load_ssh_config() if any(not h.runs_here for h in hosts) else None
    by_name = {h.name: h for h in hosts}

    def one(name: str) -> Transport:
        t = time.monotonic()
        try:
            tr = connect_host(by_name[name], accept_new=accept_new, config=config, timeout=timeout, on_accept=on_accept)
        except HostError as e:
            err = e
        except Exception as e:  # anything unexpected still names the host
            err = HostError(name, "unreachable", f"cannot connect: {type(e).__name__}: {e}")
        else:
            if on_host:
                on_host(name, time.monotonic() - t, None)
            if then:
                then(name, tr)
            return tr
        if on_host:
            on_host(name, time.monotonic() - t, err)
        raise err

    res = on_hosts(one, by_name, name="connect")
    transports, errors = res.ok, res.failed
    return Connected(transports, errors, time.monotonic() - t0)


def connect_all(hosts: list[Host], **kw) -> dict[str, Transport]:
    """All hosts or none: any failure closes what did connect and raises, naming every failed host."""
    res = connect_each(hosts, **kw)
    if res.errors:
        close_all(res.transports)
        raise connection_failure(hosts, res)
    return res.transports


def connection_failure(hosts: list[Host], res: Connected) -> HostError:
    """One error naming every host that could not be reached (``res.errors`` is not empty)."""
    order = [h.name for h in hosts if h.name in res.errors]
    if len(order) == 1:
        e = res.errors[order[0]]
        return HostError(e.host, e.cause, e.reason + "; nothing was started on any host", hint=e.hint)
    lines = "\n".join("  " + res.errors[n].message for n in order)
    causes = {res.errors[n].cause for n in order}
    hints = {GENERIC_HINTS.get(res.errors[n].cause) if len(causes) < len(order) else res.errors[n].hint
             for n in order}
    hints.discard(None)
    return HostsFailed([res.errors[n] for n in order],
                       f"{len(order)} hosts could not be reached; nothing was started on any host:\n{lines}",
                       hint="; ".join(sorted(h for h in hints if h)) or None)


def close_all(transports: dict[str, Transport]) -> None:
    """Close every connection at once: each close waits for its transport thread to stop."""
    def close(t: Transport) -> None:
        try:
            t.close()
        except Exception as e:  # the command is over; a connection that closes badly changes nothing
            log.debug("%s: closing the connection failed: %s", t.name, e)

    if len(transports) <= 1:
        for t in transports.values():
            close(t)
        return
    background(close, list(transports.values()), name="close", label=lambda t: t.name).join(CONNECT_TIMEOUT_S)
