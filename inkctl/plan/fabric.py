"""The NCCL settings of each host, pinned or read from its fabric at ``up``.

With ``network.rdma`` on a multi-node recipe, a value the recipe or the inventory does not pin is
read from the host's sysfs by the preflight (``execute/state/fabric.py``) every time ``up`` runs:
the RoCE v2 GID index that carries the host's cluster address (it moves between boards and after a
reboot), every rail of the physical port that carries it (a DGX Spark's CX-7 port is two rails:
naming one tops out near 100 Gb/s), that port's netdev for NCCL's and Gloo's sockets, and the
engine's host-IP variable. The plan writes them as ``FabricRef``s in the rank's env file, so
``plan`` shows what will be read and ``up`` writes the values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Union

from inkctl.plan.hostvars import HostContext
from inkctl.plan.step import FabricRef
from inkctl.recipe.model import Recipe


NOTES = {
    "gid_index": "the RoCE v2 GID index that carries {address}",
    "ib_hca": "every rail of the port that carries {address}",
    "socket_ifname": "the netdev that carries {address}",
    "host_ip": "{address} as the host resolves it",
}


@dataclass(frozen=True)
class Setting:
    """One NCCL variable of one host: its value (or what is read at up) and where it comes from."""

    name: str
    value: Union[str, FabricRef]
    source: str

    @property
    def derived(self) -> bool:
        return isinstance(self.value, FabricRef)


def wanted(r: Recipe) -> bool:
    """Does the plan read the fabric (RDMA between several hosts)?"""
    return r.network.rdma and r.multinode


def host_ip_name(r: Recipe) -> str | None:
    from inkctl.recipe.engine_registry import spec_of

    # the engine's own variable for the address it advertises to the other ranks
    return r.network.host_ip_env or next(iter(spec_of(r.engine.kind).host_ip_env), None)


def settings(r: Recipe, ctx: HostContext) -> list[Setting]:
    """Every NCCL setting of this host and where it comes from (empty without ``wanted``)."""
    if not wanted(r):
        return []
    n, h = r.network, ctx.host
    env = {**r.container.env, **n.nccl_env}
    where = f"inventory {h.name}"
    out = []

    def ref(what: str) -> FabricRef:
        return FabricRef(what, NOTES[what].format(address=ctx.rank_address))

    def pick(name: str, what: str, pins: Sequence[tuple[object, str]]) -> None:
        for value, source in pins:
            if value:
                out.append(Setting(name, value if isinstance(value, str) else ",".join(value), source))  # type: ignore[arg-type]
                return
        out.append(Setting(name, ref(what), "resolved on the host at up" if what == "host_ip" else "read from the host's sysfs at up"))

    pick("NCCL_IB_GID_INDEX", "gid_index", [(env.get("NCCL_IB_GID_INDEX"), "recipe (env)")])
    pick("NCCL_IB_HCA", "ib_hca", [(h.ib_hca, f"{where}: ib_hca"), (n.ib_hca, "recipe network.ib_hca"),
                                   (env.get("NCCL_IB_HCA"), "recipe (env)")])
    ifname: list[tuple[object, str]] = [(h.nccl_socket_ifname, f"{where}: nccl_socket_ifname"), (n.socket_ifname, "recipe network.socket_ifname")]
    pick("NCCL_SOCKET_IFNAME", "socket_ifname", ifname + [(env.get("NCCL_SOCKET_IFNAME"), "recipe (env)")])
    pick("GLOO_SOCKET_IFNAME", "socket_ifname", ifname + [(env.get("GLOO_SOCKET_IFNAME"), "recipe (env)")])
    ip = host_ip_name(r)
    if ip:
        # network.host_ip_env names the variable: the inventory's address is its value (as before)
        source = f"{where}: {'cluster_address' if h.cluster_address else 'address'} (network.host_ip_env)"
        pick(ip, "host_ip", [(ctx.rank_address if n.host_ip_env else None, source), (env.get(ip), "recipe (env)")])
    return out


def derived(r: Recipe, ctx: HostContext) -> list[tuple[str, FabricRef]]:
    """The env file's lines that ``up`` fills from the host's fabric."""
    return [(s.name, s.value) for s in settings(r, ctx) if isinstance(s.value, FabricRef)]
