"""One rank's ``docker run`` / ``podman run`` argv, read back as a Kubernetes container.

The plan's run argv is the source of truth: every flag it carries either becomes its usual
Kubernetes form or a ``Gap`` that the export reports. Nothing is dropped silently. Pure: no I/O.

Values inside the argv may carry rendezvous tokens (``@@inkctl:leader@@``...) put there by
planning on stand-in hosts; ``k8s_text`` turns them into ``$(VAR)`` references that the
kubelet expands, after escaping every literal ``$`` so that recipe values arrive unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TOKEN_RE = re.compile(r"@@inkctl:([A-Za-z0-9_:]+)@@")
LEADER = "@@inkctl:leader@@"
POD_IP = "@@inkctl:pod_ip@@"
POD_NAME = "@@inkctl:pod_name@@"
RANK = "@@inkctl:rank@@"
GROUP_SIZE = "@@inkctl:group_size@@"

# token -> the variable Kubernetes provides; LWS_* come from LeaderWorkerSet, INKCTL_POD_* from
# the downward API (declared in the container's env when used)
TOKEN_VARS = {
    "leader": "LWS_LEADER_ADDRESS",
    "pod_ip": "INKCTL_POD_IP",
    "pod_name": "INKCTL_POD_NAME",
    "rank": "LWS_WORKER_INDEX",
    "group_size": "LWS_GROUP_SIZE",
}
DOWNWARD = {"INKCTL_POD_IP": "status.podIP", "INKCTL_POD_NAME": "metadata.name"}


def var_token(name: str) -> str:
    """Stands for a host variable (``${NAME}``) that has no value on Kubernetes."""
    return f"@@inkctl:var:{name}@@"


def unresolved_vars(text: str) -> list[str]:
    return [m.group(1)[4:] for m in TOKEN_RE.finditer(text) if m.group(1).startswith("var:")]


def k8s_text(text: str) -> str:
    """A value for command/args/env: literal ``$`` escaped (``$$``), tokens as ``$(VAR)``."""
    escaped = text.replace("$", "$$")
    return TOKEN_RE.sub(lambda m: f"$({TOKEN_VARS[m.group(1)]})", escaped)


def shown(text: str) -> str:
    """A planned value for people: host variables as ``${NAME}``, rendezvous tokens as ``$(VAR)``."""
    return TOKEN_RE.sub(lambda m: "${%s}" % m.group(1)[4:] if m.group(1).startswith("var:") else f"$({TOKEN_VARS[m.group(1)]})", text)


def used_vars(texts: list[str]) -> set[str]:
    return {TOKEN_VARS[m.group(1)] for t in texts for m in TOKEN_RE.finditer(t) if m.group(1) in TOKEN_VARS}


@dataclass(frozen=True)
class Gap:
    """A recipe setting and what became of it on Kubernetes.

    ``expressed`` False means the manifests do not carry it: the user must provide it another way.
    """

    field: str  # recipe field path, e.g. "container.ulimits.memlock"
    docker: str  # the runtime flag, as the plan has it
    kubernetes: str  # what the export did, or what to do instead
    expressed: bool = True

    def as_dict(self) -> dict:
        return {"field": self.field, "docker": self.docker, "kubernetes": self.kubernetes, "expressed": self.expressed}


@dataclass
class RunArgs:
    """A run argv taken apart: each list keeps the plan's order."""

    image: str = ""
    entrypoint: str = ""
    command: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    network: str | None = None
    publish: list[tuple[int, int]] = field(default_factory=list)
    ipc: str | None = None
    shm_size: str | None = None
    gpus: bool = False
    security_opt: list[str] = field(default_factory=list)
    cap_add: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    ulimits: list[str] = field(default_factory=list)
    privileged: bool = False
    volumes: list[tuple[str, str, bool]] = field(default_factory=list)
    env: list[tuple[str, str]] = field(default_factory=list)
    env_files: list[str] = field(default_factory=list)
    pull: str | None = None
    unknown: list[str] = field(default_factory=list)  # flags (and their values) not known to the export


_WITH_VALUE = {"--name", "--pull", "--restart", "--label", "--network", "--publish", "--ipc", "--shm-size", "--gpus",
               "--security-opt", "--cap-add", "--device", "--ulimit", "--volume", "--env", "--env-file", "--entrypoint"}
_FLAGS = {"--detach", "--privileged"}


def parse_run(argv: tuple[str, ...] | list[str], extra_args: int = 0) -> RunArgs:
    """Take apart the argv that ``inkctl.plan.container.run_argv`` builds. The recipe's
    ``extra_args`` (``extra_args`` tokens, just before ``--entrypoint``) may hold flags the export
    does not know: those are kept in ``unknown``. An unknown flag anywhere else is a flag the plan
    emits that the export was not taught: a ValueError, never a silent drop."""
    if len(argv) < 2 or argv[1] != "run" or "--entrypoint" not in argv:
        raise ValueError(f"not a container run argv: {list(argv[:3])}")
    extra_from = argv.index("--entrypoint") - extra_args
    out = RunArgs()
    i = 2
    while i < len(argv):
        flag = argv[i]
        if flag in _FLAGS:
            out.privileged |= flag == "--privileged"
            i += 1
            continue
        if flag not in _WITH_VALUE or i + 1 >= len(argv):
            if i < extra_from:
                raise ValueError(f"the plan's runtime flag {flag!r} has no Kubernetes mapping in inkctl.export.k8s_pod")
            out.unknown.append(flag)
            i += 1
            continue
        value = argv[i + 1]
        i += 2
        if flag == "--entrypoint":
            out.entrypoint, out.image, out.command = value, argv[i], list(argv[i + 1:])
            break
        if flag == "--label":
            k, _, v = value.partition("=")
            out.labels[k] = v
        elif flag == "--network":
            out.network = value
        elif flag == "--publish":
            h, _, c = value.partition(":")
            out.publish.append((int(h), int(c)))
        elif flag == "--ipc":
            out.ipc = value
        elif flag == "--shm-size":
            out.shm_size = value
        elif flag == "--gpus":
            out.gpus = True
        elif flag == "--device":
            if value == "nvidia.com/gpu=all":
                out.gpus = True
            else:
                out.devices.append(value)
        elif flag == "--security-opt":
            out.security_opt.append(value)
        elif flag == "--cap-add":
            out.cap_add.append(value)
        elif flag == "--ulimit":
            out.ulimits.append(value)
        elif flag == "--volume":
            ro = value.endswith(":ro")
            src, _, dst = (value[:-3] if ro else value).rpartition(":")
            out.volumes.append((src, dst, ro))
        elif flag == "--env":
            k, _, v = value.partition("=")
            out.env.append((k, v))
        elif flag == "--env-file":
            out.env_files.append(value)
        elif flag == "--pull":
            out.pull = value
        # --name and --restart: the pod's name and restarts belong to LeaderWorkerSet
    if not out.image:
        raise ValueError("the run argv has no --entrypoint and image")
    return out


def quantity(size: str) -> str:
    """A docker size ('32g', '512m', '1024') as a Kubernetes quantity ('32Gi', '512Mi', '1024')."""
    unit = size[-1].lower()
    if unit.isdigit():
        return size
    number = size[:-1]
    return {"b": number, "k": f"{number}Ki", "m": f"{number}Mi", "g": f"{number}Gi"}[unit]
