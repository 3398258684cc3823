"""The fabric check: every host's RDMA rails as its sysfs has them (``execute/state/fabric.py``),
the NCCL settings they give (``plan/fabric.py``), pins that contradict the host, and a fabric that
cannot deliver, refused before any rank starts.

Judged over the whole group at once: an MTU differs between hosts, one host has RDMA and another
not, a rail links below the rate the others (or ``network.rail_gbps``) say it should.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inkctl.execute.deploy.preflight.planned import containers, planned_env
from inkctl.execute.deploy.preflight.report import FAIL, OK, WARN
from inkctl.execute.state import fabric as fab
from inkctl.execute.state.probe import HostAnswer, Sections
from inkctl.plan import fabric as planfabric
from inkctl.plan.step import EnvFile, FabricRef, Plan
from inkctl.recipe.model import Recipe

SKIP = "or waive it knowingly with --skip-check fabric"
RAILS = " [rails as read: "  # a failed row: what is wrong, then the rails as read


def read(s: Sections) -> fab.Fabric:
    return fab.parse(s.get("fabric")[0])


@dataclass
class _View:
    """One host's fabric beside what its plan pins and reads."""

    name: str
    fabric: fab.Fabric
    address: str
    pins: dict[str, str]  # NCCL variables the plan sets on this host
    reads: set[str]  # what the plan reads at up (FabricRef.what)
    derived: fab.Derived | None
    problems: list[tuple[str, str]] = field(default_factory=list)  # (detail, hint)

    @property
    def used(self) -> list[fab.Rail]:
        """The rails NCCL gets: the pinned NCCL_IB_HCA, or the derived ones."""
        names = _hca_names(self.pins.get("NCCL_IB_HCA", "")) if "ib_hca" not in self.reads else \
            list(self.derived.hcas if self.derived else ())
        return [r for n in names if (r := self.fabric.rail(n)) is not None]


def _hca_names(value: str) -> list[str]:
    if not value or value.startswith("^"):
        return []
    return [x.split(":")[0] for x in value.lstrip("=").split(",") if x]


def reads(plan: Plan, host: str) -> set[str]:
    """What the plan reads from this host's fabric at up (the FabricRefs of its env file)."""
    spec = next(containers(plan, host), None)
    if spec is None or not spec.env_file:
        return set()
    for p in plan.puts():
        if p.host == host and p.path == spec.env_file and isinstance(p.content, EnvFile):
            return {v.what for _, v in p.content.entries if isinstance(v, FabricRef)}
    return set()


def pinned_hcas(plan: Plan, host: str) -> list[str]:
    """The RDMA devices the plan pins for this host's NCCL (empty: read at up, or none)."""
    return [] if "ib_hca" in reads(plan, host) else _hca_names(planned_env(plan, host).get("NCCL_IB_HCA", ""))


def values(plan: Plan, answers: dict[str, HostAnswer]) -> dict[str, dict[str, str]]:
    """Per host, what its fabric gives for each value the plan reads at up (what -> value)."""
    out: dict[str, dict[str, str]] = {}
    for h in plan.hosts:
        a = answers.get(h.name)
        if a is None or a.sections is None or not reads(plan, h.name):
            continue
        f = read(a.sections)
        d = fab.derive(f, f.address or h.cluster_address)
        if d is not None:
            out[h.name] = d.values()
    return out


def problems(row) -> str:
    """What is wrong, from a failed fabric row (without the rails as read)."""
    return row.detail.split(RAILS)[0]


def as_data(f: fab.Fabric, address: str) -> dict:
    """The fabric as read, for ``-o json``: every rail, and what carries the cluster address."""
    d = fab.derive(f, address)
    rails = [{"device": r.device, "port": r.port, "state": r.state, "phys_state": r.phys_state, "rate": r.rate,
              "gbps": r.gbps, "width": r.width, "netdev": r.netdev, "mtu": r.netdev_mtu, "ib_mtu": r.ib_mtu,
              "pci": r.pci, "pcie": {"now": list(r.pci_now), "max": list(r.pci_max)},
              "port_mates": [m.device for m in f.mates(r) if m is not r],
              "gids": [{"index": g.index, "gid": g.gid, "type": g.type, "ipv4": g.ipv4, "netdev": g.netdev} for g in r.gids]}
             for r in f.rails]
    return {"root": f.root, "address": address, "rails": rails, "derived": d.values() if d else None}


def judge(recipe: Recipe, plan: Plan, fabrics: dict[str, fab.Fabric]) -> dict[str, tuple[str, str, str | None]]:
    """Per host that answered: (status, detail, hint) of its fabric check."""
    views = {}
    for name, f in fabrics.items():
        address = f.address or plan.host(name).cluster_address
        views[name] = _View(name, f, address, planned_env(plan, name), reads(plan, name), fab.derive(f, address))
    if not planfabric.wanted(recipe):
        return {n: (OK, _describe(v), None) for n, v in views.items()}
    none = not any(v.fabric.rails for v in views.values())
    if none:
        return {n: (WARN, f"network.rdma is on but {n} has no RDMA device (nothing in {v.fabric.root}/class/infiniband): "
                    "NCCL will use TCP sockets", "load the adapter's RDMA driver, or set network.rdma: false")
                for n, v in views.items()}
    for v in views.values():
        _carrier(v, views)
        _pins(v, views)
        _deliver(v, views, recipe.network.rail_gbps)
    _mtu(views)
    out: dict[str, tuple[str, str, str | None]] = {}
    for n, v in views.items():
        if v.problems:
            detail = "; ".join(d for d, _ in v.problems)
            hint = "; ".join(dict.fromkeys(h for _, h in v.problems)) + f"; {SKIP}"
            out[n] = (FAIL, detail + RAILS + _describe(v) + "]", hint)
        else:
            out[n] = (OK, _describe(v), None)
    return out


def _describe(v: _View) -> str:
    f = v.fabric
    if not f.rails:
        return f"no RDMA device ({f.root}/class/infiniband)"
    rails = "; ".join(r.describe() for r in f.rails)
    ports: dict[tuple, list[str]] = {}
    for r in f.rails:
        ports.setdefault(r.physical_port, []).append(r.device)
    shared = [" + ".join(d) for d in ports.values() if len(d) > 1]
    text = rails + (f"; one port: {', '.join(shared)}" if shared else "")
    d = v.derived
    if d is not None:
        text += (f"; RoCE v2 GID {d.gid.index} of {d.rail.name} carries {d.address}: NCCL_IB_GID_INDEX={d.gid.index}"
                 f" NCCL_IB_HCA={','.join(d.hcas)} NCCL_SOCKET_IFNAME={d.ifname}")
        if v.reads:
            text += f" (read: {', '.join(sorted(v.reads))})"
    return text


def _carrier(v: _View, views: dict[str, _View]) -> None:
    """One host RDMA and another not; an address no RoCE v2 GID carries."""
    if not v.fabric.rails:
        others = [o.name for o in views.values() if o.fabric.rails]
        v.problems.append((f"{v.name} has no RDMA device (nothing in {v.fabric.root}/class/infiniband) while "
                           f"{', '.join(others)} {'has' if len(others) == 1 else 'have'} one: NCCL would fall back to "
                           "TCP sockets for the whole group",
                           f"load the RDMA driver on {v.name} (modprobe mlx5_ib) and check the cable, or set network.rdma: false"))
        return
    if v.derived is None and v.reads:
        found = v.fabric.gids_of(v.address)
        seen = ", ".join(f"GID {g.index} of {r.name} ({g.type})" for r, g in found) or "none"
        v.problems.append((f"no RoCE v2 GID on {v.name} carries its cluster address {v.address} (GIDs with it: {seen})",
                           f"give {v.address} to the RoCE port's netdev on {v.name}, or set that host's cluster_address "
                           "in the inventory to the address its RoCE port has"))


def _pins(v: _View, views: dict[str, _View]) -> None:
    """A pinned GID index that is not RoCE v2 on the cluster address; a pinned HCA on another subnet."""
    pin = v.pins.get("NCCL_IB_GID_INDEX")
    if pin is not None and "gid_index" not in v.reads and v.fabric.rails:
        _pinned_gid(v, pin)
    if "ib_hca" not in v.reads:
        _pinned_hcas(v, views)


def _carries(r: fab.Rail, index: int, address: str | None) -> bool:
    """GID ``index`` of the rail is RoCE v2 on an IPv4 address (``address`` when given)."""
    return any(g.index == index and g.roce_v2 and g.ipv4 and address in (None, g.ipv4) for g in r.gids)


def _pinned_gid(v: _View, pin: str) -> None:
    d = v.derived
    carrier = d.rail if d else None
    rails = v.used or ([carrier] if carrier else [])
    bad = [r for r in rails if not _carries(r, _int(pin), v.address if r is carrier else None)]
    if not bad:
        return
    r = bad[0]
    g = next((g for g in r.gids if g.index == _int(pin)), None)
    what = f"{g.type} {g.ipv4 or g.gid}" if g else "empty"
    works = f"NCCL_IB_GID_INDEX={d.gid.index}" if d else "the RoCE v2 index of the cluster address (show_gids)"
    v.problems.append((f"NCCL_IB_GID_INDEX={pin} (pinned) on {v.name}: GID {pin} of {r.name} is {what}, "
                       f"not RoCE v2 on {v.address}", f"set {works}, or remove the pin and let up read it"))


def _pinned_hcas(v: _View, views: dict[str, _View]) -> None:
    others = {_net(a) for o in views.values() if o is not v for r in o.used for a in o.fabric.subnet_addresses(r.device)}
    d = v.derived
    for r in v.used:
        mine = {_net(a) for a in v.fabric.subnet_addresses(r.device)}
        if mine and (not others or mine & others):
            continue
        nets = ", ".join(sorted(f"{n}.0/24" for n in mine)) or "no IPv4 RoCE v2 address"
        works = f"ib_hca: [{', '.join(d.hcas)}]" if d else "an HCA on the cluster's subnet"
        v.problems.append((f"NCCL_IB_HCA names {r.device} (pinned) on {v.name}: it is on {nets}, which no other "
                           "host's HCA reaches", f"set {works} for {v.name} in the inventory, or remove the pin"))


def _deliver(v: _View, views: dict[str, _View], rated: float | None) -> None:
    """A rail down, a link below its rating, a PCIe link trained below its own."""
    best = max((r.gbps or 0.0 for o in views.values() for r in o.used), default=0.0)
    want = rated or best
    for r in v.used:
        if not r.active:
            v.problems.append((f"rail {r.name} ({r.netdev}) on {v.name} is {r.state.split(':')[-1].strip()} "
                               f"({r.phys_state.split(':')[-1].strip()}), and NCCL_IB_HCA uses it",
                               f"bring it up on {v.name} (the cable; ip link set {r.netdev} up), or leave it out of ib_hca"))
            continue
        if r.gbps is not None and want and r.gbps < 0.9 * want:
            by = "network.rail_gbps" if rated else "the other rails of the group"
            v.problems.append((f"rail {r.name} on {v.name} links at {r.rate}, below the {want:g} Gb/sec {by} say",
                               f"reseat or replace the cable of {r.netdev} on {v.name} and check its link (ethtool {r.netdev})"))
        if r.pcie_degraded:
            v.problems.append((f"the PCIe link of {r.device} ({r.pci}) on {v.name} trained at {' x'.join(r.pci_now)} "
                               f"of {' x'.join(r.pci_max)}", f"check the slot's PCIe settings in the BIOS of {v.name} "
                                                              "(link speed and width) and reseat the adapter"))


def _mtu(views: dict[str, _View]) -> None:
    """The netdev MTU of the carrying rail is the same on every host of the group."""
    mtus = {n: v.derived.rail.netdev_mtu for n, v in views.items() if v.derived and v.derived.rail.netdev_mtu}
    if len(set(mtus.values())) < 2:
        return
    top = max(mtus.values())
    for n, m in mtus.items():
        if m < top:
            v = views[n]
            assert v.derived is not None
            dev = v.derived.rail.netdev
            high = ", ".join(f"{o} {mm}" for o, mm in mtus.items() if mm == top)
            v.problems.append((f"MTU {m} on {dev} of {n} where {high} (IB MTU {fab.ib_mtu(m)} against {fab.ib_mtu(top)})",
                               f"set MTU {top} on {n} (ip link set {dev} mtu {top}; in netplan: mtu: {top})"))


def _int(text: str) -> int:
    return int(text) if text.strip().isdigit() else -1


def _net(ipv4: str) -> str:
    """The /24 of an address: sysfs has no prefix length, and RoCE rails are /24s in every layout
    the playbooks show (a DGX Spark: 192.168.100.0/24 and 192.168.101.0/24 for the two rails)."""
    return ipv4.rpartition(".")[0]

