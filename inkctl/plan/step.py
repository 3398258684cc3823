"""The step objects a plan is made of.

``inkctl plan`` renders these and ``inkctl up`` executes these: the very same objects.
Steps are pure data. Nothing here touches a host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from inkctl.runtimes.spec import ContainerSpec
from inkctl.plan.smoke import SmokeCheck


@dataclass(frozen=True)
class SecretRef:
    """A placeholder for a secret's value inside a file to upload; resolved only by the executor."""

    name: str

    def __str__(self) -> str:
        return "***"


@dataclass(frozen=True)
class FabricRef:
    """A value read from the host's RDMA fabric at ``up`` (``plan/fabric.py``), inside a file to
    upload; the executor writes what the host's preflight read, or leaves the line out."""

    what: str  # gid_index | ib_hca | socket_ifname | host_ip
    note: str  # what it is, for the plan

    def __str__(self) -> str:
        return f"<read at up: {self.note}>"


@dataclass(frozen=True)
class EnvFile:
    """Content of a ``--env-file``: ``NAME=value`` lines; secret values and values read from the
    host (the fabric) stay references until upload."""

    entries: tuple[tuple[str, Union[str, SecretRef, FabricRef]], ...]

    def render(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in self.entries)

    @property
    def secret_names(self) -> tuple[str, ...]:
        return tuple(v.name for _, v in self.entries if isinstance(v, SecretRef))


@dataclass(frozen=True)
class Put:
    """Upload a file to one host (parent directories created), then set its mode."""

    host: str
    purpose: str
    path: str
    content: Union[str, bytes, EnvFile]
    mode: int = 0o644
    rank: int | None = None
    sha256: str | None = None  # expected digest of ``content`` once written (hotfixes, patches)
    kind: str = "put"


@dataclass(frozen=True)
class Run:
    """Run one argv on one host. ``ok_codes`` lists exit codes that count as success.

    A container's start also carries ``container``, the spec its argv was made from
    (a runtime's ``run``): what checks read (image, mounts, ports) instead of parsing argv.

    ``files`` are written on the host by the same remote command, before ``argv`` runs (a
    rank's env file, hotfixes and the plan record beside its ``docker run``): one round trip,
    the contents on stdin, never on a command line. ``inkctl.plan.files`` builds that command."""

    host: str
    purpose: str
    argv: tuple[str, ...]
    rank: int | None = None
    ok_codes: tuple[int, ...] = (0,)
    files: tuple[Put, ...] = ()
    kind: str = "run"
    container: ContainerSpec | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class WaitFor:
    """Poll ``argv`` on a host until it exits 0 (and its output contains ``expect``), or time out."""

    host: str
    purpose: str
    argv: tuple[str, ...]
    timeout_s: float
    interval_s: float = 1.0
    expect: str | None = None
    expect_count: int = 1  # ``expect`` must occur at least this many times
    rank: int | None = None
    kind: str = "wait"


@dataclass(frozen=True)
class WaitHealth:
    """Poll an HTTP endpoint from the control machine until it answers 200, watching every rank's
    container meanwhile: an exited container fails the wait at once."""

    host: str
    purpose: str
    url: str
    timeout_s: float
    interval_s: float = 1.0
    rank: int | None = None
    watch: tuple[tuple[str, str, int], ...] = ()  # (host, container, rank) kept alive during the wait
    # readiness means it answers: after the 200, one chat completion to answer_url must stream back
    answer_url: str = ""
    model: str = ""
    # the secret (its name) the answer is asked with; a request without it must then get 401
    api_key: str | None = None
    kind: str = "health"


@dataclass(frozen=True)
class Smoke:
    """Send each check's prompt to the OpenAI-compatible chat endpoint; each answer must pass its check."""

    host: str
    purpose: str
    url: str
    model: str
    checks: tuple[SmokeCheck, ...]
    timeout_s: float = 120.0
    rank: int | None = None
    api_key: str | None = None  # the secret (its name) every check is sent with
    kind: str = "smoke"


@dataclass(frozen=True)
class Register:
    """Tell a multi-model router which engine serves which model, from the control machine:
    ``workers`` (engine URL, model) are registered at ``url`` (the router's ``/workers``), those
    it lists beyond them removed. Run again, it changes nothing (a restarted router has none)."""

    host: str
    purpose: str
    url: str
    workers: tuple[tuple[str, str], ...]
    rank: int | None = None
    kind: str = "register"


Step = Union[Run, Put, WaitFor, WaitHealth, Smoke, Register]


@dataclass(frozen=True)
class Stage:
    """Steps that may run in parallel across hosts (in order on any one host).

    Every stage ends with a barrier: the next stage starts only when all of this one is done.
    So a plan has as many stages as the engine needs barriers, and no more.
    """

    name: str
    description: str
    steps: tuple[Step, ...]

    def hosts(self) -> list[str]:
        seen: list[str] = []
        for s in self.steps:
            if s.host not in seen:
                seen.append(s.host)
        return seen


@dataclass(frozen=True)
class Container:
    """A container the plan starts: what ``down`` and rollback remove, what ``status`` reports."""

    host: str
    rank: int
    name: str
    role: str  # "head" | "worker"


@dataclass(frozen=True)
class PlannedHost:
    name: str
    address: str
    rank: int
    runtime: str  # the recipe's container.runtime: inkctl.runtimes.get(runtime) builds its argv
    state_dir: str  # inkctl's directory for this deployment on the host
    placeholder: bool = False  # True when no inventory was given
    cluster_address: str = ""  # what the other ranks reach it on (the fabric is read for it)


@dataclass(frozen=True)
class Plan:
    deployment: str
    recipe_hash: str
    hosts: tuple[PlannedHost, ...]
    stages: tuple[Stage, ...]
    containers: tuple[Container, ...]
    # steps that undo the launch on each host (rollback and ``down``), in order
    teardown: tuple[Run, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())

    def host(self, name: str) -> PlannedHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def steps(self):
        for stage in self.stages:
            yield from stage.steps

    def puts(self):
        """Every file the plan writes: Put steps and the files of Run steps."""
        for s in self.steps():
            if isinstance(s, Put):
                yield s
            elif isinstance(s, Run):
                yield from s.files

    @property
    def health_url(self) -> str | None:
        """The URL whose 200 means the deployment serves."""
        return next((s.url for s in self.steps() if isinstance(s, WaitHealth)), None)
