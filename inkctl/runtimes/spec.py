"""What a container is, as data, whichever runtime starts it: the image, the mounts, the ports,
the environment's names. The plan's Run step carries a ``ContainerSpec``; executors and exports
read it, never argv. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from inkctl.runtimes.labels import INSPECT_FORMAT, LABEL_PREFIX  # noqa: F401 - the container's names, here too


@dataclass(frozen=True)
class Mount:
    """A bind mount or named volume of a container: ``--volume source:target[:ro]``."""

    source: str
    target: str
    read_only: bool = False

    def volume(self) -> str:
        return f"{self.source}:{self.target}" + (":ro" if self.read_only else "")


@dataclass(frozen=True)
class ContainerSpec:
    """What a ``run`` starts, as data: the plan's Run step carries it so that nobody re-parses
    argv for the image, the mounts, the ports or the environment's names."""

    name: str
    image: str
    entrypoint: str
    command: tuple[str, ...]
    labels: tuple[tuple[str, str], ...] = ()
    network: str = "bridge"  # "host" | "bridge"
    ports: tuple[tuple[int, int], ...] = ()  # (host, container), published on a bridge network
    options: tuple[str, ...] = ()  # ipc, shm, GPUs, devices, capabilities, limits: as argv, in order
    mounts: tuple[Mount, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # --env NAME=value (recipe values; secrets only by env_file)
    env_file: str | None = None
    extra: tuple[str, ...] = ()  # container.extra_args, as written

    @property
    def env_names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.env)


def repository(ref: str) -> str:
    """'reg:5000/ns/img:tag@sha256:..' -> 'reg:5000/ns/img' (a ':' before the last '/' is a registry port)."""
    ref = ref.split("@", 1)[0]
    slash, colon = ref.rfind("/"), ref.rfind(":")
    return ref[:colon] if colon > slash else ref
