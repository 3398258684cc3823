"""Every host of a command that reads what is there (``doctor``, ``status``, ``logs``), connected
in parallel; a host that cannot be reached is a stand-in that answers with its error, so the
others' answers are reported next to it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inkctl.execute.hosts.transport import Transport
    from inkctl.recipe.hosts import Host

# on_accept(host, name in known_hosts, key type, fingerprint): a new host key was trusted
OnAccept = Callable[[str, str, str, str], None]


def connect(hosts: Iterable[Host], accept_new: bool, on_accept: OnAccept | None = None) -> dict[str, Transport]:
    """name -> transport; an unreachable host's is ``preflight.Unreachable`` (its ``error``)."""
    from inkctl.execute.deploy.preflight import Unreachable
    from inkctl.execute.hosts.connect import connect_each

    conn = connect_each(list(hosts), accept_new=accept_new, on_accept=on_accept)
    transports: dict[str, Transport] = dict(conn.transports)
    transports.update({name: Unreachable(err) for name, err in conn.errors.items()})
    return transports


def close(transports: dict[str, Transport]) -> None:
    from inkctl.execute.hosts.connect import close_all

    close_all(transports)
