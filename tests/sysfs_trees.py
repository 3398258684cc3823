"""sysfs trees of RDMA hosts, written as the kernel lays them out (Documentation/ABI/stable/
sysfs-class-infiniband; drivers/infiniband/core/sysfs.c) for what the DGX Spark playbooks show
(NVIDIA/dgx-spark-playbooks, connect-two-sparks):

    $ ibdev2netdev
    roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)
    roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)
    rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)
    rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)

each physical CX-7 port being two rails (enp1s0f1np1 and enP2p1s0f1np1 are the same port), the
two rails of the port in use on 192.168.100.0/24 and 192.168.101.0/24. Each up rail's GID table is
what show_gids prints for an mlx5 RoCE port with one IPv4 address: the link-local GID as RoCE v1
and v2 (0, 1), then the IPv4-mapped one as v1 and v2 (2, 3); an IPv6 address added before the
IPv4 one moves the IPv4 RoCE v2 entry further down (the index that "moves after a reboot").

Used by the unit tests (``write`` under tmp_path) and by the test cluster (each host's tree under
its state directory, pointed at by INKCTL_SYSFS_ROOT in its SSH sessions).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

GUID = "3c6d:6603:00cc:b3b6"  # sys_image_guid: one adapter for all four rails
ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"
V1, V2 = "IB/RoCE v1", "RoCE v2"
HDR200 = "200 Gb/sec (4X HDR)"


@dataclass(frozen=True)
class RailSpec:
    device: str
    pci: str  # 0000:01:00.1
    netdev: str
    address: str | None = None  # IPv4 on the netdev (None: no address, no IPv4 GIDs)
    state: str = "4: ACTIVE"
    phys_state: str = "5: LinkUp"
    rate: str = HDR200
    mtu: int = 9000
    ipv6: tuple[str, ...] = ()  # global IPv6 GIDs listed before the IPv4 one
    pcie: tuple[str, str, str, str] = ("32.0 GT/s PCIe", "4", "32.0 GT/s PCIe", "4")  # now speed, width, max...
    guid: str = GUID
    v1_only: bool = False  # no RoCE v2 entry for the IPv4 address


@dataclass
class HostTree:
    rails: list[RailSpec] = field(default_factory=list)

    def rail(self, device: str, **changes) -> HostTree:
        """The same tree with one rail changed."""
        return HostTree([replace(r, **changes) if r.device == device else r for r in self.rails])


def spark(address: str, second: str | None = None, **up) -> HostTree:
    """A DGX Spark with its cable in the second port (f1): rocep1s0f1 carries ``address``, its
    mate roceP2p1s0f1 ``second`` (default: the same host number on 192.168.101.0/24); the f0
    rails are down. ``up`` changes both rails of the port in use (rate, mtu, ...)."""
    second = second or "192.168.101." + address.rsplit(".", 1)[1]
    down = {"state": "1: DOWN", "phys_state": "3: Disabled"}
    return HostTree([
        RailSpec("roceP2p1s0f0", "0002:01:00.0", "enP2p1s0f0np0", **down),
        RailSpec("roceP2p1s0f1", "0002:01:00.1", "enP2p1s0f1np1", second, **up),
        RailSpec("rocep1s0f0", "0000:01:00.0", "enp1s0f0np0", **down),
        RailSpec("rocep1s0f1", "0000:01:00.1", "enp1s0f1np1", address, **up),
    ])


def _mapped(ipv4: str) -> str:
    a, b, c, d = (int(x) for x in ipv4.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a << 8 | b:04x}:{c << 8 | d:04x}"


def _gids(r: RailSpec) -> list[tuple[str, str]]:
    mac_eui = "fe80:0000:0000:0000:3e6d:66ff:fecc:" + f"{sum(map(ord, r.device)) & 0xffff:04x}"
    out = [(mac_eui, V1), (mac_eui, V2)]
    for g in r.ipv6:
        out += [(g, V1), (g, V2)]
    if r.address:
        out += [(_mapped(r.address), V1)] + ([] if r.v1_only else [(_mapped(r.address), V2)])
    return out


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def write(root: Path, tree: HostTree, gid_table: int = 16) -> Path:
    """The tree under ``root`` (a directory standing for /sys): class/infiniband/<dev> links to
    the PCI function's infiniband/<dev>, as the kernel's do; returns ``root``."""
    for r in tree.rails:
        func = root / "devices" / "pci0000:00" / r.pci
        dev = func / "infiniband" / r.device
        for name, value in zip(("current_link_speed", "current_link_width", "max_link_speed", "max_link_width"), r.pcie):
            _put(func / name, value)
        (func / "net" / r.netdev).mkdir(parents=True, exist_ok=True)
        _put(dev / "sys_image_guid", r.guid)
        _put(dev / "node_type", "1: CA")
        (dev / "device").symlink_to(Path("..") / ".." / ".." / r.pci)  # <dev>/device -> the PCI function
        port = dev / "ports" / "1"
        for name, value in (("state", r.state), ("phys_state", r.phys_state), ("rate", r.rate), ("link_layer", "Ethernet")):
            _put(port / name, value)
        gids = _gids(r) if r.state.endswith("ACTIVE") else []
        for i in range(gid_table):
            gid, kind = gids[i] if i < len(gids) else (ZERO, "")
            _put(port / "gids" / str(i), gid)
            if kind:  # the kernel answers EINVAL for the attributes of an empty entry: no file here
                _put(port / "gid_attrs" / "types" / str(i), kind)
                _put(port / "gid_attrs" / "ndevs" / str(i), r.netdev)
        link = root / "class" / "infiniband" / r.device
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path("..") / ".." / dev.relative_to(root))
        net = root / "class" / "net" / r.netdev
        _put(net / "mtu", str(r.mtu))
        _put(net / "operstate", "up" if r.state.endswith("ACTIVE") else "down")
    return root


def no_rdma(root: Path) -> Path:
    """A host without any RDMA device: /sys/class/net only."""
    _put(root / "class" / "net" / "eth0" / "mtu", "1500")
    return root
