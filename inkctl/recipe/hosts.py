"""Hosts live apart from recipes: the same recipe deploys on anyone's boxes.

An inventory file (``--hosts FILE``) lists hosts in rank order; rank 0 is the head.
"""


from typing import Optional

from pydantic import Field, field_validator

from inkctl.codes import code
from inkctl.errors import Problem
from inkctl.recipe.fields import EnvName, HostName, Strict

DEFAULT_STATE_DIR = "/var/lib/inkctl"
LOOPBACK = ("localhost", "127.0.0.1", "::1")


class Host(Strict):
    """One machine of the deployment."""

    name: HostName = Field(description="Short name used in plans, logs and container labels; may be an alias from ~/.ssh/config.")
    address: Optional[str] = Field(None, description="Address to reach the host over SSH (name, IP or ssh_config alias). Default: the name.")
    cluster_address: Optional[str] = Field(None, description="Address other ranks reach this host on (the RoCE/data network), when it differs from 'address'. Used for --master-addr and friends.")
    user: Optional[str] = Field(None, description="SSH user. Default: ~/.ssh/config, then the local user.")
    port: Optional[int] = Field(None, ge=1, le=65535, description="SSH port. Default: ~/.ssh/config, then 22.")
    identity_file: Optional[str] = Field(None, description="SSH private key. Default: ~/.ssh/config and the agent.")
    state_dir: str = Field(DEFAULT_STATE_DIR, description="Directory inkctl owns on the host: env files, hotfixes, the deploy lock.")
    nccl_socket_ifname: Optional[str] = Field(None, description="Interface for NCCL/Gloo sockets on this host (NCCL_SOCKET_IFNAME), e.g. 'enp1s0f1np1'.")
    ib_hca: Optional[list[str]] = Field(None, description="RDMA adapters on this host (NCCL_IB_HCA); overrides the recipe's network.ib_hca.")
    gpus: Optional[str] = Field(None, pattern=r"^[0-9]+(,[0-9]+)*$", description="GPU indices on this host, e.g. '0,1' (one index may be a bare number: gpus: 0); available to recipes as ${GPUS}.")
    vars: dict[EnvName, str] = Field(default_factory=dict, description="Per-host values that recipes reference as ${NAME}, e.g. HF_HOME.")
    local: bool = Field(False, description="This machine, without SSH: commands run here as the user running inkctl (subprocess, argv, no shell). An address of localhost, 127.0.0.1 or ::1 without a port means the same; write local: true to say so.")

    @field_validator("gpus", mode="before")
    @classmethod
    def _one_index(cls, v: object) -> object:
        """gpus: 0 is YAML's number 0; the one GPU index it obviously means."""
        return str(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else v

    @field_validator("address", "cluster_address")
    @classmethod
    def _address(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and (not v or any(c.isspace() for c in v) or v.startswith("-")):
            raise ValueError(f"{v!r} is not a host address")
        return v

    @field_validator("state_dir")
    @classmethod
    def _state_dir(cls, v: str) -> str:
        if not v.startswith("/") or "\n" in v or ":" in v or v.rstrip("/") == "":
            raise ValueError(f"{v!r} must be an absolute directory other than '/'")
        return v.rstrip("/")

    @property
    def ssh_address(self) -> str:
        return self.address or self.name

    @property
    def runs_here(self) -> bool:
        """Reached without SSH: ``local: true``, or a loopback address without a port."""
        return self.local or (self.ssh_address in LOOPBACK and self.port is None)

    @property
    def rank_address(self) -> str:
        return self.cluster_address or self.address or self.name


class Inventory(Strict):
    """An inventory file: the hosts, in rank order."""

    hosts: list[Host] = Field(min_length=1, description="Hosts in rank order; the first is rank 0, the head.")

    def findings(self) -> list[Problem]:
        return host_findings(self.hosts, "hosts")


def host_findings(hosts: list[Host], where: str) -> list[Problem]:
    """Checks across hosts: unique names, unique addresses."""
    out: list[Problem] = []
    names: dict[str, int] = {}
    addrs: dict[tuple[str, int | None], int] = {}
    for i, h in enumerate(hosts):
        if h.name in names:
            out.append(Problem(f"host name {h.name!r} is already used by {where}[{names[h.name]}]", path=f"{where}[{i}].name", hint="host names must be unique", code=code("hosts")))
        names.setdefault(h.name, i)
        key = (h.ssh_address, h.port)
        if key in addrs and h.state_dir == hosts[addrs[key]].state_dir:
            out.append(Problem(f"address {h.ssh_address!r} is already used by {where}[{addrs[key]}]", path=f"{where}[{i}].address", hint="two ranks on one machine would fight over its GPUs", code=code("hosts")))
        addrs.setdefault(key, i)
        if h.runs_here and not h.local:
            out.append(Problem(f"host {h.name!r}: address {h.ssh_address!r} runs on this machine without SSH "
                               "(as local: true does)", path=f"{where}[{i}].address", severity="warning",
                               hint="write local: true to say so; to go through SSH to this machine, give its "
                                    "name or a non-loopback address (or a port)", code=code("hosts")))
    return out


def fit_findings(recipe, hosts: list[Host]) -> list[Problem]:
    """How an inventory does not fit a recipe: the host count (hardware.nodes) and each host's GPU
    list (hardware.gpus_per_host); every one, each at the inventory's path (hosts, hosts[i].gpus)."""
    from inkctl.errors import counted

    out: list[Problem] = []
    nodes, want = recipe.hardware.nodes, recipe.hardware.gpus_per_host
    if len(hosts) != nodes:
        given = f"{len(hosts)} {'was' if len(hosts) == 1 else 'were'} given"
        out.append(Problem(f"the recipe needs {counted(nodes, 'host')} (hardware.nodes) but {given}",
                           path="hosts", hint="list exactly that many hosts in the inventory, in rank order",
                           code=code("hosts")))
    for i, h in enumerate(hosts):
        if h.gpus and len(h.gpus.split(",")) != want:
            n = len(h.gpus.split(","))
            out.append(Problem(f"host {h.name}: gpus {h.gpus!r} selects {counted(n, 'GPU')} but hardware.gpus_per_host "
                               f"is {want}", path=f"hosts[{i}].gpus",
                               hint=f"list {counted(want, 'GPU index', 'GPU indices')} in {h.name}'s gpus (inventory), "
                                    "or change hardware.gpus_per_host", code=code("hosts")))
    return out
