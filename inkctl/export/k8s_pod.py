"""One rank's container, as its Run step's ``ContainerSpec`` has it, read as a Kubernetes container.

The plan's spec is the source of truth (the same one ``runtime.run`` turns into argv): every
option it carries either becomes its usual Kubernetes form or a ``Gap`` that the export reports.
Nothing is dropped silently. Pure: no I/O.

Values inside the spec may carry rendezvous tokens (``@@inkctl:leader@@``...) put there by
planning on stand-in hosts; ``k8s_text`` turns them into ``$(VAR)`` references that the
kubelet expands, after escaping every literal ``$`` so that recipe values arrive unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from inkctl.runtimes.spec import ContainerSpec

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
    """A container's run settings as the export reads them: each list keeps the plan's order."""

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
    group_add: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    ulimits: list[str] = field(default_factory=list)
    privileged: bool = False
    volumes: list[tuple[str, str, bool]] = field(default_factory=list)
    env: list[tuple[str, str]] = field(default_factory=list)
    env_files: list[str] = field(default_factory=list)
    pull: str | None = None
    unknown: list[str] = field(default_factory=list)  # flags (and their values) not known to the export


# the option flags a ContainerSpec carries (plan/container.py): each has its Kubernetes form
_WITH_VALUE = {"--ipc", "--shm-size", "--gpus", "--security-opt", "--cap-add", "--device", "--ulimit", "--group-add",
               # and what container.extra_args may also hold
               "--label", "--network", "--publish", "--volume", "--env", "--env-file", "--pull"}
_FLAGS = {"--privileged"}


def from_spec(spec: ContainerSpec, text: Callable[[str], str] = lambda a: a) -> RunArgs:
    """One rank's container from its Run step's spec; ``text`` maps every value (rendezvous
    tokens). The spec's options are what the plan emits: a flag the export was not taught is a
    ValueError, never a silent drop. The recipe's ``extra_args`` may hold any flag: those the
    export knows are read, the others are kept in ``unknown``."""
    out = RunArgs(image=text(spec.image), entrypoint=text(spec.entrypoint), command=[text(a) for a in spec.command],
                  pull="never")  # runtime.run: the image is on the host, never pulled
    out.labels = {k: text(v) for k, v in spec.labels}
    out.network = spec.network if spec.network == "host" else None
    out.publish = [] if spec.network == "host" else list(spec.ports)
    _take_options([text(a) for a in spec.options], out, strict=True)
    out.volumes = [(text(m.source), m.target, m.read_only) for m in spec.mounts]
    out.env = [(k, text(v)) for k, v in spec.env]
    out.env_files = [text(spec.env_file)] if spec.env_file else []
    _take_options([text(a) for a in spec.extra], out, strict=False)
    return out


def _take_options(argv: list[str], out: RunArgs, *, strict: bool) -> None:
    i = 0
    while i < len(argv):
        flag = argv[i]
        if flag in _FLAGS:
            out.privileged |= flag == "--privileged"
            i += 1
            continue
        if flag not in _WITH_VALUE or i + 1 >= len(argv):
            if strict:
                raise ValueError(f"the plan's runtime flag {flag!r} has no Kubernetes mapping in inkctl.export.k8s_pod")
            out.unknown.append(flag)
            i += 1
            continue
        value = argv[i + 1]
        i += 2
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
        elif flag == "--group-add":
            out.group_add.append(value)
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


def quantity(size: str) -> str:
    """A docker size ('32g', '512m', '1024') as a Kubernetes quantity ('32Gi', '512Mi', '1024')."""
    unit = size[-1].lower()
    if unit.isdigit():
        return size
    number = size[:-1]
    return {"b": number, "k": f"{number}Ki", "m": f"{number}Mi", "g": f"{number}Gi"}[unit]
