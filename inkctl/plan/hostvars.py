"""Per-host values for ``${NAME}`` references in recipes (mount sources, env, extra args)."""

from __future__ import annotations

from dataclasses import dataclass

from inkctl.errors import InkctlError
from inkctl.recipe.fields import VAR_RE
from inkctl.recipe.hosts import Host


@dataclass(frozen=True)
class HostContext:
    """Everything a rank's commands may depend on about its host."""

    host: Host
    rank: int
    head: Host
    placeholder: bool

    def _placeholder(self, key: str) -> str:
        return f"<host{self.rank}.{key}>"

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def ssh_address(self) -> str:
        return self._placeholder("address") if self.placeholder else self.host.ssh_address

    @property
    def rank_address(self) -> str:
        # what other ranks reach this host on: cluster_address, else address (Host.rank_address)
        return self._placeholder("cluster_address") if self.placeholder else self.host.rank_address

    @property
    def head_address(self) -> str:
        return "<host0.cluster_address>" if self.placeholder else self.head.rank_address

    def var(self, name: str, where: str) -> str:
        h = self.host
        if name in h.vars:
            return h.vars[name]
        builtin = {
            "HOST": h.name,
            "HOST_ADDRESS": self.rank_address,
            "HEAD_ADDRESS": self.head_address,
            "RANK": str(self.rank),
        }
        if name in builtin:
            return builtin[name]
        if name == "GPUS" and h.gpus:
            return h.gpus
        if name == "NCCL_SOCKET_IFNAME" and h.nccl_socket_ifname:
            return h.nccl_socket_ifname
        if name == "HOME" and h.user and not self.placeholder:
            return "/root" if h.user == "root" else f"/home/{h.user}"
        if self.placeholder:
            return self._placeholder(name)
        raise InkctlError(
            f"{where}: host {h.name} (rank {self.rank}) has no value for ${{{name}}}",
            hint=f"add it to that host's vars in the inventory, e.g. vars: {{{name}: ...}}",
            exit_code=2,
        )

    def expand(self, text: str, where: str) -> str:
        return VAR_RE.sub(lambda m: self.var(m.group(1), where), text)
