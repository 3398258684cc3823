"""Where and how to reach one host: what ``connect`` resolves and ``ssh`` dials."""

from __future__ import annotations

import getpass
from dataclasses import dataclass, field

from inkctl.execute.hosts.hostkeys import KnownHosts, default_known_hosts


@dataclass
class Target:
    """Where and how to reach one host over SSH, after ~/.ssh/config is applied."""

    host: str  # the inventory name (used in every message)
    hostname: str
    port: int = 22
    user: str = field(default_factory=getpass.getuser)
    identity_files: list[str] = field(default_factory=list)
    proxy_jump: list[str] = field(default_factory=list)  # jump specs, outermost first
    known: KnownHosts = field(default_factory=lambda: KnownHosts([default_known_hosts()]))
