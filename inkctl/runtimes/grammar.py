"""docker's grammar, which every docker-like runtime inherits (``DockerLike``), filling the one
protocol of a container runtime on a host (``protocol.Runtime``): a runtime that differs
overrides the method where it differs, and only that. Pure: argv lists, never shell text, no I/O.

A runtime also answers what depends on it outside argv: which problems a recipe has with it
(``findings``), what to do when it is installed but does not answer (``not_answering``), and
what the image relay's host-side program runs and how the runtime's store keys its layers
(``relay``: that program runs with the host's python3, without inkctl, so it gets data).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from inkctl.runtimes.labels import INSPECT_FORMAT, LABEL_PREFIX

if TYPE_CHECKING:
    from inkctl.errors import Problem
    from inkctl.runtimes.spec import ContainerSpec

Argv = tuple[str, ...]
PS_LABELS = (f"{LABEL_PREFIX}deployment", f"{LABEL_PREFIX}recipe-hash")


class DockerLike:
    """docker's grammar. A docker-compatible runtime is a subclass that sets ``name`` and
    overrides what it does otherwise."""

    name: str  # the recipe's word: each runtime's own module sets it
    daemon = ""  # the service to start when it does not answer (its name, unless said)
    default_gpus = "all"
    state_field = "{{.State}}"  # ps: the container's state (a runtime without it: its status)
    label_field = '{{.Label "%s"}}'  # ps: one label's value
    # build: ``--force-rm`` (the legacy builder otherwise leaves the stopped container of a
    # failed RUN step on the host, one per failed build, forever); ``build_pull``: after the tag
    build_flags: tuple[str, ...] = ("--force-rm",)
    build_pull: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        return self.name

    # --- containers ---------------------------------------------------------------------------
    def _run_body(self, spec: ContainerSpec) -> list[str]:
        """What follows ``run``'s own flags: labels, network, options, mounts, env, the
        entrypoint, the image and its command."""
        argv: list[str] = []
        for k, v in spec.labels:
            argv += ["--label", f"{k}={v}"]
        if spec.network == "host":
            argv += ["--network", "host"]
        else:
            for host_port, container_port in spec.ports:
                argv += ["--publish", f"{host_port}:{container_port}"]
        argv += spec.options
        for m in spec.mounts:
            argv += ["--volume", m.volume()]
        for k, v in spec.env:
            argv += ["--env", f"{k}={v}"]
        if spec.env_file:
            argv += ["--env-file", spec.env_file]
        argv += spec.extra
        argv += ["--entrypoint", spec.entrypoint, spec.image, *spec.command]
        return argv

    def run(self, spec: ContainerSpec) -> Argv:
        """A detached container that is never restarted: the engines."""
        return (self.command, "run", "--detach", "--name", spec.name, "--pull", "never", "--restart", "no",
                *self._run_body(spec))

    def run_once(self, spec: ContainerSpec) -> Argv:
        """A container in the foreground (its output streams back), removed when it exits: a job
        such as the weights copy."""
        return (self.command, "run", "--rm", "--name", spec.name, "--pull", "never", *self._run_body(spec))

    def exec(self, container: str, *argv: str, detach: bool = False) -> Argv:
        return (self.command, "exec", *(("--detach",) if detach else ()), container, *argv)

    def remove(self, *containers: str) -> Argv:
        """Remove containers, running or not; one that is already gone exits 1 (callers list it
        in ok_codes)."""
        return (self.command, "rm", "--force", *containers)

    def wait(self, container: str) -> Argv:
        """Block until the container exits; prints its exit code."""
        return (self.command, "wait", container)

    def kill(self, *containers: str) -> Argv:
        return (self.command, "kill", *containers)

    def logs(self, container: str, *, follow: bool = False, timestamps: bool = False,
             tail: str | int | None = None, since: str | None = None) -> Argv:
        argv = [self.command, "logs"]
        if follow:
            argv.append("--follow")
        if timestamps:
            argv.append("--timestamps")
        if tail is not None:
            argv += ["--tail", str(tail)]
        if since is not None:
            argv += ["--since", since]
        return (*argv, container)

    def ps_format(self) -> str:
        """One line per container: name, state, and its deployment and recipe-hash labels, tab-separated."""
        return "\t".join(["{{.Names}}", self.state_field, *(self.label_field % k for k in PS_LABELS)])

    def ps(self, *, deployment: str | None = None, quiet: bool = False,
           label: tuple[str, str] | None = None) -> Argv:
        """``ps --all``: of one deployment (by label), of the containers with ``label`` (key
        without the prefix, value), or every container; ids only, or ``ps_format`` lines."""
        argv = [self.command, "ps", "--all"]
        if deployment is not None:
            argv += ["--filter", f"label={LABEL_PREFIX}deployment={deployment}"]
        if label is not None:
            argv += ["--filter", f"label={LABEL_PREFIX}{label[0]}={label[1]}"]
        argv += ["--quiet"] if quiet else ["--format", self.ps_format()]
        return tuple(argv)

    def ps_names(self, prefix: str) -> Argv:
        """``ps --all`` names only, of the containers whose name contains ``prefix``."""
        return (self.command, "ps", "--all", "--filter", f"name={prefix}", "--format", "{{.Names}}")

    def inspect(self, *containers: str, format: str | None = INSPECT_FORMAT) -> Argv:
        """``inspect`` of containers: one ``INSPECT_FORMAT`` line each, or the JSON array (``format=None``)."""
        if format is None:
            return (self.command, "container", "inspect", *containers)
        return (self.command, "inspect", "--format", format, *containers)

    def create(self, image: str, *, label: str, entrypoint: str) -> Argv:
        """A container that is never started (to copy files out of an image)."""
        return (self.command, "create", "--label", label, "--entrypoint", entrypoint, image)

    def copy_out(self, container: str, path: str) -> Argv:
        """``cp CONTAINER:PATH -``: the file as a tar stream on stdout."""
        return (self.command, "cp", f"{container}:{path}", "-")

    # --- images -------------------------------------------------------------------------------
    def image_inspect(self, ref: str, *, format: str | None = None) -> Argv:
        """``image inspect``: the JSON array, or one ``format`` line."""
        return (self.command, "image", "inspect", *(("--format", format) if format is not None else ()), ref)

    def tag(self, source: str, target: str) -> Argv:
        return (self.command, "tag", source, target)

    def push(self, ref: str) -> Argv:
        return (self.command, "push", ref)

    def build(self, tag: str, build_args: dict[str, str]) -> Argv:
        """``build -``: the (gzipped) context on stdin; the base image is already on the host."""
        argv = [self.command, "build", *self.build_flags, "--tag", tag, *self.build_pull]
        for k, v in sorted(build_args.items()):
            argv += ["--build-arg", f"{k}={v}"]
        return (*argv, "-")

    def load(self) -> Argv:
        """``load``: an image archive on stdin."""
        return (self.command, "load")

    def save(self, image: str) -> Argv:
        """``save``: the image archive on stdout."""
        return (self.command, "save", image)

    # --- what depends on the runtime outside argv ---------------------------------------------
    def findings(self, gpus: str, security_opt: Sequence[str]) -> list[Problem]:
        """What a recipe's container section gets wrong for this runtime (``recipe/checks/rules.py``)."""
        return []

    def not_answering(self, host: str) -> str:
        """What to do when it is installed but does not answer (preflight's hint)."""
        return f"start it on {host} (systemctl start {self.daemon or self.name}) and check with `{self.command} version`"

    def relay(self) -> dict[str, Any]:
        """What the image relay's host-side program runs (argv prefixes) and how this runtime's
        store keys the layers it has: ``by`` "chain" (chain ids: docker's layer store) or "diff"
        (diff ids, a layer reused by its content whatever is below it); ``whole``: why it loads
        whole archives only (then no layer is skipped), or ""; ``whole_if``: [argv, text, why]:
        whole when that argv's output holds the text."""
        c = self.command
        return {"name": self.name, "save": [c, "save"], "load": [c, "load"], "tag": [c, "tag"],
                "inspect": [c, "image", "inspect", "--format"], "ls": [c, "image", "ls", "--all", "--quiet", "--no-trunc"],
                "by": "chain", "whole": "",
                "whole_if": [[c, "info", "--format", "{{json .DriverStatus}}"], "io.containerd.snapshotter",
                             f"{self.name}'s containerd image store loads whole archives only"]}
