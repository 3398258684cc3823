"""How the engine's container runs: runtime, GPU exposure, IPC, mounts, env; and the network."""


from typing import TYPE_CHECKING, Literal, Optional

from pydantic import Field, field_validator

from inkctl import runtimes
from inkctl.recipe.fields import ContainerPath, EnvName, EnvValue, HostPath, Name, Strict, empty_list

if TYPE_CHECKING:
    RuntimeName = str
else:  # the registered runtimes' names: a runtime added is a word the recipe takes (inkctl/runtimes/)
    RuntimeName = Literal[runtimes.names()]

ULIMIT_NAMES = {"memlock", "stack", "nofile", "nproc", "core", "rtprio", "msgqueue", "sigpending"}


class Mount(Strict):
    """A host path bind-mounted into the container."""

    source: HostPath = Field(description="Path on the host; may use ${VARS} from the host inventory (e.g. ${HF_HOME}, ${HOME}).")
    target: ContainerPath = Field(description="Path inside the container.")
    read_only: bool = Field(False, description="Mount read-only (':ro').")
    required: bool = Field(True, description="Preflight fails when the mount's source path is missing on a host.")


class Volume(Strict):
    """A named volume of the container runtime (kept across restarts, e.g. a kernel cache)."""

    name: Name = Field(description="Volume name.")
    target: ContainerPath = Field(description="Path inside the container.")
    read_only: bool = Field(False, description="Mount read-only.")


class Port(Strict):
    """A published port (only with network: bridge)."""

    host: int = Field(ge=1, le=65535, description="Port on the host.")
    container: int = Field(ge=1, le=65535, description="Port in the container.")


class Ulimit(Strict):
    soft: int = Field(description="Soft limit; -1 means unlimited.")
    hard: int = Field(description="Hard limit; -1 means unlimited.")


class ContainerSpec(Strict):
    """The container runtime and every flag of the engine's container."""

    runtime: RuntimeName = Field(runtimes.DEFAULT, description="Container engine on the hosts.")
    gpus: Literal["all", "cdi", "rocm", "none"] = Field(
        "all",
        description="GPU exposure: 'all' is docker's --gpus all; 'cdi' is --device nvidia.com/gpu=all (podman, or docker with CDI); 'rocm' (AMD) is --device /dev/kfd --device /dev/dri --group-add video --cap-add SYS_PTRACE --security-opt seccomp=unconfined, the inventory's gpus becoming ROCR_VISIBLE_DEVICES; 'none' exposes no GPU.",
    )
    ipc: Optional[Literal["host", "private", "shareable"]] = Field("host", description="IPC namespace (--ipc). NCCL wants host or a large shm.")
    shm_size: Optional[str] = Field(None, pattern=r"^[0-9]+[bkmgBKMG]?$", description="Size of /dev/shm (--shm-size), e.g. '32g'.")
    network: Literal["host", "bridge"] = Field("host", description="Network mode. Multi-node needs host networking.")
    ports: list[Port] = Field(default_factory=empty_list, description="Published ports (network: bridge).")
    env: dict[EnvName, EnvValue] = Field(default_factory=dict, description="Environment variables (values may use ${VARS} from the host inventory). Secrets go in 'secrets', never here.")
    mounts: list[Mount] = Field(default_factory=empty_list, description="Host paths mounted into the container.")
    volumes: list[Volume] = Field(default_factory=empty_list, description="Named volumes.")
    security_opt: list[str] = Field(default_factory=empty_list, description="--security-opt values, e.g. 'label=disable' on SELinux hosts with CDI.")
    cap_add: list[str] = Field(default_factory=empty_list, description="Linux capabilities to add, e.g. IPC_LOCK.")
    devices: list[str] = Field(default_factory=empty_list, description="Host devices (--device), e.g. /dev/infiniband.")
    ulimits: dict[str, Ulimit] = Field(default_factory=dict, description="--ulimit settings by name, e.g. memlock: {soft: -1, hard: -1}.")
    privileged: bool = Field(False, description="Run privileged. Avoid: prefer devices and cap_add.")
    extra_args: list[str] = Field(default_factory=empty_list, description="Further runtime flags before the image, passed verbatim.")

    @field_validator("ulimits")
    @classmethod
    def _known_ulimits(cls, v: dict[str, Ulimit]) -> dict[str, Ulimit]:
        for name in v:
            if name not in ULIMIT_NAMES:
                raise ValueError(f"unknown ulimit {name!r}; known: {', '.join(sorted(ULIMIT_NAMES))}")
        return v


class NetworkSpec(Strict):
    """Inter-node transport for NCCL and Gloo. Per-host interface names live in the inventory."""

    socket_ifname: Optional[str] = Field(None, description="Default interface for NCCL/Gloo sockets (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME); a host's nccl_socket_ifname wins.")
    rdma: bool = Field(False, description="Use RDMA (RoCE/InfiniBand): adds /dev/infiniband, IPC_LOCK and unlimited memlock to the container.")
    ib_hca: list[str] = Field(default_factory=empty_list, description="RDMA adapters for NCCL_IB_HCA, e.g. ['rocep1s0f1'].")
    ib_disable: Optional[bool] = Field(None, description="Set NCCL_IB_DISABLE (1 disables InfiniBand/RoCE).")
    p2p_disable: Optional[bool] = Field(None, description="Set NCCL_P2P_DISABLE (the bundled RTX PRO 6000 recipe sets it: on an AM5 board NCCL init hung 26 min without it).")
    host_ip_env: Optional[EnvName] = Field(None, description="Variable that receives each host's own address, e.g. VLLM_HOST_IP.")
    rail_gbps: Optional[float] = Field(None, gt=0, description="Link rate each RDMA rail should have (Gb/s): preflight refuses a rail below 90% of it, and doctor --network measures against it. Default: the fastest rail of the group.")
    bandwidth_floor: float = Field(0.8, gt=0, le=1, description="Share of a rail's link rate that doctor --network's RDMA bandwidth test (ib_write_bw) must reach.")
    nccl_env: dict[EnvName, EnvValue] = Field(default_factory=dict, description="Further NCCL_* or transport variables, e.g. NCCL_P2P_LEVEL: SYS.")


class SecretSource(Strict):
    """Where a secret's value comes from on the machine running inkctl. Never its value."""

    env: Optional[EnvName] = Field(None, description="Read from this environment variable.")
    file: Optional[str] = Field(None, description="Read from this file (first line, stripped); '~' expands.")

    def describe(self) -> str:
        return f"env {self.env}" if self.env else f"file {self.file}"

