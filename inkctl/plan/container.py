"""One rank's container from the recipe: its name, labels, environment and run spec (``inkctl.runtimes`` makes the argv)."""

from __future__ import annotations

from inkctl.plan import fabric
from inkctl.plan.hostvars import HostContext
from inkctl.runtimes.spec import LABEL_PREFIX, ContainerSpec, Mount
from inkctl.recipe.model import Recipe


def container_name(deployment: str, rank: int) -> str:
    return f"inkctl-{deployment}-r{rank}"


def labels(deployment: str, recipe_hash: str, rank: int, host: str, role: str) -> list[tuple[str, str]]:
    return [
        (LABEL_PREFIX + "deployment", deployment),
        (LABEL_PREFIX + "recipe-hash", recipe_hash),
        (LABEL_PREFIX + "rank", str(rank)),
        (LABEL_PREFIX + "host", host),
        (LABEL_PREFIX + "role", role),
    ]


def rank_env(r: Recipe, ctx: HostContext) -> list[tuple[str, str]]:
    """Environment for one rank: the recipe's env (with ${VARS}), then what the network implies."""
    env: list[tuple[str, str]] = [(k, ctx.expand(v, f"container.env.{k}")) for k, v in r.container.env.items()]
    n, h = r.network, ctx.host
    ifname = h.nccl_socket_ifname or n.socket_ifname
    if ctx.placeholder and not ifname and r.multinode and not fabric.wanted(r):  # else read at up
        ifname = f"<host{ctx.rank}.nccl_socket_ifname>"
    if ifname:
        env += [("NCCL_SOCKET_IFNAME", ifname), ("GLOO_SOCKET_IFNAME", ifname)]
    hcas = h.ib_hca if h.ib_hca is not None else n.ib_hca
    if hcas:
        env.append(("NCCL_IB_HCA", ",".join(hcas)))
    if n.ib_disable is not None:
        env.append(("NCCL_IB_DISABLE", "1" if n.ib_disable else "0"))
    if n.p2p_disable is not None:
        env.append(("NCCL_P2P_DISABLE", "1" if n.p2p_disable else "0"))
    if n.host_ip_env:
        env.append((n.host_ip_env, ctx.rank_address))
    env += [(k, ctx.expand(v, f"network.nccl_env.{k}")) for k, v in n.nccl_env.items()]
    env += nccl_debug_env(r)  # with RDMA asked for, NCCL must say which transport it chose
    from inkctl.plan import compilecache

    env += compilecache.env(r)

    from inkctl.recipe.engine_registry import spec_of

    env += spec_of(r.engine.kind).env(r)
    if r.container.gpus == "rocm" and h.gpus:
        env.append(("ROCR_VISIBLE_DEVICES", h.gpus))
    return env


def nccl_debug_env(r: Recipe) -> list[tuple[str, str]]:
    """With network.rdma, NCCL_DEBUG=INFO unless the recipe sets it: the boot reads NCCL's
    transport choice from the log."""
    if not r.network.rdma:
        return []
    have = set(r.container.env) | set(r.network.nccl_env)
    if "NCCL_DEBUG" in have:
        return []
    return [("NCCL_DEBUG", "INFO")]


def gpu_args(mode: str, indices: str | None) -> list[str]:
    """The GPUs a rank gets, in the runtime's own terms: the host's ``gpus`` indices (inventory)
    select devices, else every GPU. Docker's ``--gpus`` value is CSV, so a list of devices is
    quoted inside the value (``"device=0,1"``); CDI names one device per ``--device``."""
    ids = [i for i in (indices or "").split(",") if i]
    if mode == "all":
        return ["--gpus", f'"device={",".join(ids)}"' if ids else "all"]
    if mode == "cdi":
        return [x for i in (ids or ["all"]) for x in ("--device", f"nvidia.com/gpu={i}")]
    if mode == "rocm":
        return list(ROCM_ARGS)
    return []


# AMD GPUs in a container (ROCm's and vLLM's documented docker run): the compute interface
# (/dev/kfd), the render nodes (/dev/dri), the video group that owns them, and the ptrace and
# seccomp relaxations ROCm's debugger/profiler hooks need. The inventory's gpus select devices
# through ROCR_VISIBLE_DEVICES (rank_env), since /dev/dri holds every card.
ROCM_ARGS = ("--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video",
             "--cap-add", "SYS_PTRACE", "--security-opt", "seccomp=unconfined")


def container_spec(r: Recipe, ctx: HostContext, *, name: str, image: str, labels: list[tuple[str, str]],
                   entrypoint: str, command: list[str], env_file: str | None = None,
                   extra_mounts: tuple[Mount, ...] = ()) -> ContainerSpec:
    """One rank's container, as data: the recipe's container section with this host's values."""
    c = r.container
    opts: list[str] = []
    if c.ipc:
        opts += ["--ipc", c.ipc]
    if c.shm_size:
        opts += ["--shm-size", c.shm_size]
    opts += gpu_args(c.gpus, ctx.host.gpus)
    for opt in c.security_opt:
        opts += ["--security-opt", opt]
    caps, devices, ulimits = list(c.cap_add), list(c.devices), dict(c.ulimits)
    if r.network.rdma:
        devices += [] if "/dev/infiniband" in devices else ["/dev/infiniband"]
        caps += [] if "IPC_LOCK" in caps else ["IPC_LOCK"]
        if "memlock" not in ulimits:
            from inkctl.recipe.container import Ulimit

            ulimits["memlock"] = Ulimit(soft=-1, hard=-1)
    for cap in caps:
        opts += ["--cap-add", cap]
    for dev in devices:
        opts += ["--device", dev]
    for u_name, u in ulimits.items():
        opts += ["--ulimit", f"{u_name}={u.soft}:{u.hard}"]
    if c.privileged:
        opts.append("--privileged")
    mounts = [Mount(ctx.expand(m.source, f"container.mounts[{i}].source"), m.target, m.read_only)
              for i, m in enumerate(c.mounts)]
    mounts += [Mount(v.name, v.target, v.read_only) for v in c.volumes]
    return ContainerSpec(
        name=name, image=image, entrypoint=entrypoint, command=tuple(command), labels=tuple(labels),
        network=c.network, ports=tuple((p.host, p.container) for p in c.ports),
        options=tuple(opts), mounts=(*mounts, *extra_mounts), env=tuple(rank_env(r, ctx)), env_file=env_file,
        extra=tuple(ctx.expand(x, "container.extra_args") for x in c.extra_args))
