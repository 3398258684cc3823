"""The network check: the NCCL/Gloo interface and the RDMA adapters the plan names exist on the
host, and the interface is up."""

from __future__ import annotations

from inkctl.execute.deploy.preflight.planned import planned_env
from inkctl.execute.deploy.preflight.report import FAIL, OK, Host
from inkctl.execute.state.probe import Sections, parse_links


def check_network(h: Host, s: Sections) -> None:
    """The NCCL/Gloo interface and RDMA adapters the host's ranks are given (the plan's
    NCCL_SOCKET_IFNAME and NCCL_IB_HCA) exist on the host, and the interface is up."""
    r = h.recipe
    env = planned_env(h.plan, h.name)
    ifname, hcas = env.get("NCCL_SOCKET_IFNAME", ""), env.get("NCCL_IB_HCA", "")
    if not (r.multinode or r.network.rdma or hcas):
        h.put("network", OK, "single node: no NCCL network to check")
        return
    try:
        notes = [_interface_note(h.name, ifname, parse_links(s.get("net")[0]))]
        if hcas:
            optional = "rdma" in r.network.model_fields_set and not r.network.rdma
            notes.append(_adapters_note(h.name, hcas, [ln for ln in s.get("hcas")[0].split() if ln], optional))
    except _Unfit as e:
        h.put("network", FAIL, e.detail, e.hint)
        return
    h.put("network", OK, "; ".join(notes))


class _Unfit(Exception):
    """A network check's failure: what is wrong, and what to do."""

    def __init__(self, detail: str, hint: str):
        super().__init__(detail)
        self.detail, self.hint = detail, hint


def _interface_note(host: str, ifname: str, links: dict) -> str:
    """Every interface NCCL_SOCKET_IFNAME names exists and one of each is up (raises _Unfit)."""
    if not ifname:
        return "no NCCL_SOCKET_IFNAME: NCCL picks an interface itself"
    if ifname.startswith("^"):
        return f"NCCL_SOCKET_IFNAME={ifname} (an exclusion list: not checked)"
    have = ", ".join(f"{n} ({'up' if ln.up else ln.operstate})" for n, ln in sorted(links.items())) or "none"
    exact = ifname.startswith("=")
    notes = []
    for want in ifname.lstrip("=").split(","):
        found = [ln for n, ln in sorted(links.items()) if (n == want if exact else n.startswith(want))]
        if not found:
            raise _Unfit(f"interface {want} (NCCL_SOCKET_IFNAME) does not exist on {host}; it has: {have}",
                         f"set nccl_socket_ifname for {host} in the inventory (or network.socket_ifname) to one of its interfaces")
        if not any(ln.up for ln in found):
            ln = found[0]
            raise _Unfit(f"interface {ln.name} (NCCL_SOCKET_IFNAME) on {host} is {ln.operstate}, not up; it has: {have}",
                         f"bring it up on {host} (ip link set {ln.name} up) or choose another interface")
        notes.append(f"{', '.join(ln.name for ln in found if ln.up)} up")
    return "; ".join(notes)


def _adapters_note(host: str, hcas: str, present: list[str], optional: bool = False) -> str:
    """Every RDMA adapter NCCL_IB_HCA names is in /sys/class/infiniband (raises _Unfit);
    ``optional`` (network.rdma: false, said so): a missing one is a note, not a failure."""
    # NCCL_IB_HCA entries may carry a port (mlx5_0:1) and a ^/= prefix
    wanted = [] if hcas.startswith("^") else [x.split(":")[0] for x in hcas.lstrip("=").split(",") if x]
    missing = [x for x in wanted if x not in present]
    notes = []
    if missing and optional:
        notes.append(f"RDMA adapter {', '.join(missing)} absent: not required (network.rdma: false)")
        missing = []
        wanted = [x for x in wanted if x in present]
    if missing:
        raise _Unfit(f"RDMA adapter {', '.join(missing)} (NCCL_IB_HCA) not in /sys/class/infiniband on {host}; "
                     f"it has: {', '.join(present) or 'none (no RDMA driver loaded)'}",
                     f"set ib_hca for {host} in the inventory (or network.ib_hca) to one it has (ibv_devices lists them)")
    notes.append(f"RDMA {', '.join(wanted)} present" if wanted else f"NCCL_IB_HCA={hcas}")
    return "; ".join(notes)
