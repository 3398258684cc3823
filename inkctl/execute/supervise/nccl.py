"""NCCL transport truth: which network each rank's NCCL really chose.

NCCL falls back to TCP sockets silently when the RDMA device it was pointed at is missing or
misnamed (``NET/IB : No device found.`` then ``Using network Socket``): the deployment boots
and crawls. When a recipe asks for RDMA (``network.rdma``), the plan sets ``NCCL_DEBUG=INFO``
(unless the recipe sets it) and the boot reads each rank's log for NCCL's own words
(NCCL 2.28 format, tests/fixtures/nccl/):

    host:pid:tid [dev] NCCL INFO NET/IB : No device found.
    host:pid:tid [dev] NCCL INFO NET/Socket : Using [0]eth0:192.0.2.2<0>
    host:pid:tid [dev] NCCL INFO Using network Socket
    host:pid:tid [dev] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>
    host:pid:tid [dev] NCCL INFO Using network IB

Sockets where RDMA was asked fail the bring-up, naming host, rank and interface
(``--allow-socket-fallback`` makes it a warning).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Callable

_USING_NETWORK = re.compile(r"NCCL INFO Using network (\w+)")
_SOCKET_IF = re.compile(r"NCCL INFO NET/Socket : Using \[\d+\]([^:\s]+):(\S+)")
_IB_DEV = re.compile(r"NCCL INFO NET/IB : Using \[\d+\]([^:\s;]+)")
_NO_IB = re.compile(r"NCCL INFO NET/IB : No device found")
_NO_IF = re.compile(r"NCCL WARN Bootstrap : no socket interface found")


@dataclass
class RankNet:
    """What one rank's NCCL said about the network."""

    network: str | None = None  # "IB" | "Socket" | a plugin's name
    interface: str | None = None  # NET/Socket's interface, e.g. eth0
    address: str | None = None
    ib_device: str | None = None
    no_ib_device: bool = False
    no_interface: bool = False

    def feed(self, line: str) -> bool:
        """Read one log line; True when it settled which network NCCL uses."""
        if "NCCL" not in line:
            return False
        if m := _SOCKET_IF.search(line):
            self.interface, self.address = m.group(1), m.group(2)
        elif m := _IB_DEV.search(line):
            self.ib_device = m.group(1)
        elif _NO_IB.search(line):
            self.no_ib_device = True
        elif _NO_IF.search(line):
            self.no_interface = True
        elif m := _USING_NETWORK.search(line):
            self.network = m.group(1)
            return True
        return False


def fallback_message(host: str, rank: int, net: RankNet, hcas: list[str]) -> str:
    asked = f"RDMA (NET/IB{' on ' + ', '.join(hcas) if hcas else ''})"
    over = f" over {net.interface}" + (f" ({net.address})" if net.address else "") if net.interface else ""
    why = "; NCCL said: NET/IB : No device found." if net.no_ib_device else ""
    return (f"rank {rank} on {host}: NCCL fell back to TCP sockets (NET/Socket{over}) where network.rdma asked for "
            f"{asked}{why}")


FALLBACK_HINT = ("check the host's RDMA adapters (ls /sys/class/infiniband; ibv_devices) and the recipe's or inventory's "
                 "ib_hca, and that the container gets /dev/infiniband; --allow-socket-fallback boots anyway (slowly)")


@dataclass
class TransportCheck:
    """Fed every followed log line of the boot (``HealthWait(on_line=...)``). Returns the
    failure text for a rank on sockets; with ``allow`` it warns once per rank instead."""

    hcas_of: dict  # host -> the RDMA adapters asked for there
    allow: bool = False
    warn: Callable[[str], None] | None = None  # called with a warning's text
    nets: dict = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def settled(self, watched) -> bool:
        """This rank's NCCL has said which network it uses."""
        net = self.nets.get((watched.host, watched.rank))
        return net is not None and net.network is not None

    def __call__(self, watched, line: str) -> str | None:
        key = (watched.host, watched.rank)
        with self._lock:
            net = self.nets.setdefault(key, RankNet())
            if not net.feed(line) or net.network != "Socket":
                return None
        text = fallback_message(watched.host, watched.rank, net, self.hcas_of.get(watched.host) or [])
        if self.allow:
            if self.warn is not None:
                self.warn(text + " (allowed by --allow-socket-fallback)")
            return None
        return text
