"""The RDMA fabric of a host, read from sysfs: every device and port ("rail"), its state, link
rate and width, the MTU of its netdev, its GID table (RoCE v1/v2, the netdev of each entry), the
PCIe link of its adapter, and which rails share a physical port.

The layout is the kernel's (Documentation/ABI/stable/sysfs-class-infiniband):
``class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer}``,
``.../gids/<i>`` with ``.../gid_attrs/{types,ndevs}/<i>``, ``<dev>/sys_image_guid``, and
``<dev>/device`` (the PCI function: ``current_link_speed``/``width``, ``max_link_*`` and
``net/<netdev>``); the netdev's ``class/net/<name>/{mtu,operstate}``. sysfs has no active IB MTU
for RoCE: the kernel derives it from the netdev's MTU (``iboe_get_mtu``), and so does ``Rail``.

``SECTION`` is a part of ``probe.HOST_PROBE`` (the same one round trip); it reads the tree under
``$fab_root`` (the probe's argument; empty: ``$INKCTL_SYSFS_ROOT`` on the host, else ``/sys``),
with shell builtins only for the GID tables (hundreds of files per port).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SECTION = "\n".join([
    'fab="${fab_root:-${INKCTL_SYSFS_ROOT:-/sys}}"; echo "root|$fab"',
    'if [ -n "$fab_addr" ]; then getent ahostsv4 "$fab_addr" 2>/dev/null | { read -r a _; echo "addr|$a"; }; fi',
    'for d in "$fab"/class/infiniband/*; do [ -d "$d" ] || continue; dev=${d##*/}',
    ' read -r guid < "$d/sys_image_guid" 2>/dev/null || guid=-',
    ' pci=$(readlink "$d/device" 2>/dev/null); pci=${pci##*/}',
    ' for k in current_link_speed current_link_width max_link_speed max_link_width; do'
    ' v=-; read -r v < "$d/device/$k" 2>/dev/null; eval "pci_$k=\\$v"; done',
    ' nets=""; for n in "$d"/device/net/*; do [ -e "$n" ] && nets="$nets ${n##*/}"; done',
    ' echo "dev|$dev|$guid|${pci:--}|$pci_current_link_speed|$pci_current_link_width|$pci_max_link_speed|$pci_max_link_width|$nets"',
    ' for p in "$d"/ports/*; do [ -d "$p" ] || continue; port=${p##*/}',
    '  st=-; ph=-; ra=-; ll=-; read -r st < "$p/state" 2>/dev/null; read -r ph < "$p/phys_state" 2>/dev/null;'
    ' read -r ra < "$p/rate" 2>/dev/null; read -r ll < "$p/link_layer" 2>/dev/null',
    '  echo "port|$dev|$port|$st|$ph|$ra|$ll"',
    '  for g in "$p"/gids/*; do read -r v < "$g" 2>/dev/null || continue',
    '   case $v in 0000:0000:0000:0000:0000:0000:0000:0000|"") continue;; esac; i=${g##*/}',
    '   ty=-; nd=-; read -r ty < "$p/gid_attrs/types/$i" 2>/dev/null; read -r nd < "$p/gid_attrs/ndevs/$i" 2>/dev/null',
    '   echo "gid|$dev|$port|$i|$v|$ty|$nd"; done',
    ' done',
    ' for n in $nets; do m=-; o=-; read -r m < "$fab/class/net/$n/mtu" 2>/dev/null;'
    ' read -r o < "$fab/class/net/$n/operstate" 2>/dev/null; echo "net|$n|$m|$o"; done',
    "done",
])

# RoCE's active IB MTU from the netdev's MTU, as the kernel computes it (iboe_get_mtu): the
# netdev MTU less the RoCE v2 headers (GRH 40, UDP 8, BTH 12, XRC 4, AtomicETH 28, ICRC 4)
ROCE_OVERHEAD = 96
IB_MTUS = (4096, 2048, 1024, 512, 256)


def ib_mtu(netdev_mtu: int | None) -> int | None:
    if netdev_mtu is None:
        return None
    return next((m for m in IB_MTUS if netdev_mtu - ROCE_OVERHEAD >= m), None)


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str
    type: str  # "IB/RoCE v1" or "RoCE v2"
    netdev: str

    @property
    def roce_v2(self) -> bool:
        return self.type.strip().lower() == "roce v2"

    @property
    def ipv4(self) -> str | None:
        """The IPv4 address of an IPv4-mapped GID (``::ffff:a.b.c.d``), else None."""
        groups = self.gid.lower().split(":")
        if len(groups) != 8 or any(int(g or "0", 16) for g in groups[:5]) or groups[5] != "ffff":
            return None
        hi, lo = int(groups[6], 16), int(groups[7], 16)
        return f"{hi >> 8}.{hi & 255}.{lo >> 8}.{lo & 255}"


@dataclass(frozen=True)
class Rail:
    """One port of one RDMA device, with its netdev and the PCIe link of its adapter."""

    device: str
    port: int
    state: str  # "4: ACTIVE"
    phys_state: str  # "5: LinkUp"
    rate: str  # "200 Gb/sec (4X HDR)"
    link_layer: str
    guid: str  # sys_image_guid: one adapter
    pci: str  # the PCI function, 0000:01:00.1
    pci_now: tuple[str, str]  # current link speed, width
    pci_max: tuple[str, str]
    netdev: str
    netdev_mtu: int | None
    netdev_state: str
    gids: tuple[Gid, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"

    @property
    def active(self) -> bool:
        return self.state.strip().upper().endswith("ACTIVE")

    @property
    def gbps(self) -> float | None:
        head = self.rate.split()
        try:
            return float(head[0]) if len(head) > 1 and head[1].startswith("Gb") else None
        except ValueError:
            return None

    @property
    def width(self) -> str:
        """The link width of the rate's note, "4X" of "200 Gb/sec (4X HDR)"."""
        inner = self.rate.partition("(")[2].rstrip(")").split()
        return inner[0] if inner else ""

    @property
    def ib_mtu(self) -> int | None:
        return ib_mtu(self.netdev_mtu)

    @property
    def physical_port(self) -> tuple[str, str, int]:
        """Rails with the same adapter (sys_image_guid), PCI function number and port share one
        physical port: a DGX Spark's CX-7 shows each port as two PCIe functions in two domains
        (rocep1s0f1 on 0000:01:00.1, roceP2p1s0f1 on 0002:01:00.1)."""
        function = self.pci.rpartition(".")[2] if "." in self.pci else self.device
        return self.guid, function, self.port

    @property
    def pcie_degraded(self) -> bool:
        known = "-" not in (*self.pci_now, *self.pci_max) and "" not in (*self.pci_now, *self.pci_max)
        return known and (_num(self.pci_now[0]) < _num(self.pci_max[0]) or _num(self.pci_now[1]) < _num(self.pci_max[1]))

    def describe(self) -> str:
        mtu = f"MTU {self.netdev_mtu} (IB {self.ib_mtu})" if self.netdev_mtu else "MTU ?"
        return f"{self.name} {self.state.split(':')[-1].strip()} {self.rate} {mtu} -> {self.netdev or '?'}"


def _num(text: str) -> float:
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return 0.0


@dataclass
class Fabric:
    """What a host's sysfs says about its RDMA fabric."""

    root: str
    address: str | None  # the cluster address as the host resolves it (IPv4)
    rails: list[Rail] = field(default_factory=list)

    def carrier(self, address: str | None = None) -> tuple[Rail, Gid] | None:
        """The rail and the RoCE v2 GID that carry ``address`` (default: the host's cluster address)."""
        want = address or self.address
        for r in self.rails:
            for g in r.gids:
                if g.roce_v2 and g.ipv4 == want:
                    return r, g
        return None

    def gids_of(self, address: str) -> list[tuple[Rail, Gid]]:
        """Every GID of any type that carries ``address``."""
        return [(r, g) for r in self.rails for g in r.gids if g.ipv4 == address]

    def mates(self, rail: Rail) -> list[Rail]:
        """Every rail of ``rail``'s physical port (itself included), by device name."""
        return sorted((r for r in self.rails if r.physical_port == rail.physical_port), key=lambda r: r.device)

    def rail(self, device: str) -> Rail | None:
        return next((r for r in self.rails if r.device == device), None)

    def subnet_addresses(self, device: str) -> list[str]:
        """The IPv4 addresses of ``device``'s RoCE v2 GIDs."""
        r = self.rail(device)
        return [g.ipv4 for g in (r.gids if r else ()) if g.roce_v2 and g.ipv4]


# each record of the fabric section: its kind and how many fields it has at least
_FIELDS = {"root": 2, "addr": 2, "dev": 9, "port": 7, "gid": 7, "net": 4}


@dataclass
class _Lines:
    """The fabric section's records by kind, as ``parse`` collects them."""

    root: str = "/sys"
    address: str | None = None
    devs: dict[str, list[str]] = field(default_factory=dict)
    ports: list[list[str]] = field(default_factory=list)
    gids: dict[tuple[str, str], list[Gid]] = field(default_factory=dict)
    nets: dict[str, tuple[int | None, str]] = field(default_factory=dict)

    def add(self, f: list[str]) -> None:
        if len(f) >= _FIELDS.get(f[0], len(f) + 1):
            getattr(self, "_" + f[0])(f)

    def _root(self, f: list[str]) -> None:
        self.root = f[1]

    def _addr(self, f: list[str]) -> None:
        self.address = f[1] or None

    def _dev(self, f: list[str]) -> None:
        self.devs[f[1]] = f

    def _port(self, f: list[str]) -> None:
        self.ports.append(f)

    def _gid(self, f: list[str]) -> None:
        if f[3].isdigit():
            self.gids.setdefault((f[1], f[2]), []).append(Gid(int(f[3]), f[4], f[5], "" if f[6] == "-" else f[6]))

    def _net(self, f: list[str]) -> None:
        self.nets[f[1]] = (int(f[2]) if f[2].isdigit() else None, f[3])

    def rail(self, p: list[str]) -> Rail:
        d = self.devs.get(p[1], ["dev", p[1], "-", "-", "-", "-", "-", "-", ""])
        gids = self.gids.get((p[1], p[2]), [])
        netdev = _netdev_of(d[8].split(), gids)
        mtu, state = self.nets.get(netdev, (None, "unknown"))
        return Rail(device=p[1], port=int(p[2]) if p[2].isdigit() else 1, state=p[3], phys_state=p[4], rate=p[5],
                    link_layer=p[6], guid=d[2], pci=d[3], pci_now=(d[4], d[5]), pci_max=(d[6], d[7]), netdev=netdev,
                    netdev_mtu=mtu, netdev_state=state, gids=tuple(sorted(gids, key=lambda g: g.index)))


def parse(text: str) -> Fabric:
    """The fabric section of the probe's answer."""
    lines = _Lines()
    for line in text.splitlines():
        lines.add(line.split("|"))
    return Fabric(lines.root, lines.address, sorted((lines.rail(p) for p in lines.ports), key=lambda r: (r.device, r.port)))


def read_host(t, address: str, timeout: float = 30) -> Fabric:
    """The fabric section alone, on one host (``doctor --network``: its rails to measure)."""
    res = t.run(("sh", "-c", 'fab_root=""; fab_addr="$1"\n' + SECTION, "inkctl-fabric", address), timeout=timeout)
    return parse(res.text())


def _netdev_of(device_nets: list[str], gids: list[Gid]) -> str:
    """The netdev of a port: the one its GIDs name, else the device's only one."""
    named = [g.netdev for g in gids if g.netdev]
    if named:
        return named[0]
    return device_nets[0] if device_nets else ""


@dataclass(frozen=True)
class Derived:
    """The NCCL settings a host's fabric gives: what carries its cluster address."""

    rail: Rail
    gid: Gid
    hcas: tuple[str, ...]  # every rail of the carrier's physical port
    ifname: str
    address: str

    def values(self) -> dict[str, str]:
        return {"gid_index": str(self.gid.index), "ib_hca": ",".join(self.hcas), "socket_ifname": self.ifname,
                "host_ip": self.address}


def derive(fabric: Fabric, address: str | None = None) -> Derived | None:
    """What NCCL should use on this host, read from its fabric; None when no RoCE v2 GID carries
    the cluster address."""
    found = fabric.carrier(address)
    if found is None:
        return None
    rail, gid = found
    hcas = (rail.device, *(r.device for r in fabric.mates(rail) if r is not rail))
    return Derived(rail, gid, hcas, rail.netdev, gid.ipv4 or "")
