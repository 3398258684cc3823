"""Every docker and podman command inkctl runs, in one place: argv lists, never shell text.

The plan (``run``, ``exec``, the teardown's ``rm``) and every executor (``kill``, ``logs``,
``ps``, ``inspect``, ``build``, ``load``, ``image inspect``, ``tag``, ``push``, the weights
copy's ``run --rm``) build their argv here, so a difference between the runtimes is written
once. Pure: no I/O.

The two runtimes take the same argv except where noted:
- ``rm --force`` of a container that is gone: docker exits 1 (callers list it in ok_codes),
  podman exits 1 too unless ``--ignore`` is given, which it is;
- ``ps --format``: podman's Go template reads labels with ``index .Labels``, docker's with
  ``.Label``;
- ``build``: podman pulls the base image unless told ``--pull=never`` (the base is there).
"""

from __future__ import annotations

from dataclasses import dataclass

LABEL_PREFIX = "inkctl."
INSPECT_FORMAT = "{{.Name}}|{{.State.Status}}|{{.State.ExitCode}}|{{.State.FinishedAt}}"


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


def _run_body(spec: ContainerSpec) -> list[str]:
    """What follows ``run``'s own flags: labels, network, options, mounts, env, the entrypoint,
    the image and its command."""
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


def run(runtime: str, spec: ContainerSpec) -> tuple[str, ...]:
    """A detached container that is never restarted: the engines."""
    return (runtime, "run", "--detach", "--name", spec.name, "--pull", "never", "--restart", "no", *_run_body(spec))


def run_once(runtime: str, spec: ContainerSpec) -> tuple[str, ...]:
    """A container in the foreground (its output streams back), removed when it exits: a job
    such as the weights copy."""
    return (runtime, "run", "--rm", "--name", spec.name, "--pull", "never", *_run_body(spec))


def exec_(runtime: str, container: str, *argv: str, detach: bool = False) -> tuple[str, ...]:
    return (runtime, "exec", *(("--detach",) if detach else ()), container, *argv)


def remove(runtime: str, *containers: str) -> tuple[str, ...]:
    """Remove containers, running or not; podman is told to ignore one that is already gone."""
    return (runtime, "rm", "--force", *containers) + (("--ignore",) if runtime == "podman" else ())


def wait(runtime: str, container: str) -> tuple[str, ...]:
    """Block until the container exits; prints its exit code."""
    return (runtime, "wait", container)


def kill(runtime: str, *containers: str) -> tuple[str, ...]:
    return (runtime, "kill", *containers)


def logs(runtime: str, container: str, *, follow: bool = False, timestamps: bool = False,
         tail: str | int | None = None, since: str | None = None) -> tuple[str, ...]:
    argv = [runtime, "logs"]
    if follow:
        argv.append("--follow")
    if timestamps:
        argv.append("--timestamps")
    if tail is not None:
        argv += ["--tail", str(tail)]
    if since is not None:
        argv += ["--since", since]
    return (*argv, container)


def ps_format(runtime: str) -> str:
    """One line per container: name, state, and its deployment and recipe-hash labels, tab-separated."""
    keys = [f"{LABEL_PREFIX}deployment", f"{LABEL_PREFIX}recipe-hash"]
    if runtime == "podman":
        return "\t".join(["{{.Names}}", "{{.State}}", *('{{index .Labels "%s"}}' % k for k in keys)])
    return "\t".join(["{{.Names}}", "{{.State}}", *('{{.Label "%s"}}' % k for k in keys)])


def ps(runtime: str, *, deployment: str | None = None, quiet: bool = False,
       label: tuple[str, str] | None = None) -> tuple[str, ...]:
    """``ps --all``: of one deployment (by label), of the containers with ``label`` (key without
    the prefix, value), or every container; ids only, or ``ps_format`` lines."""
    argv = [runtime, "ps", "--all"]
    if deployment is not None:
        argv += ["--filter", f"label={LABEL_PREFIX}deployment={deployment}"]
    if label is not None:
        argv += ["--filter", f"label={LABEL_PREFIX}{label[0]}={label[1]}"]
    argv += ["--quiet"] if quiet else ["--format", ps_format(runtime)]
    return tuple(argv)


def ps_names(runtime: str, prefix: str) -> tuple[str, ...]:
    """``ps --all`` names only, of the containers whose name contains ``prefix``."""
    return (runtime, "ps", "--all", "--filter", f"name={prefix}", "--format", "{{.Names}}")


def inspect(runtime: str, *containers: str, format: str | None = INSPECT_FORMAT) -> tuple[str, ...]:
    """``inspect`` of containers: one ``INSPECT_FORMAT`` line each, or the JSON array (``format=None``)."""
    if format is None:
        return (runtime, "container", "inspect", *containers)
    return (runtime, "inspect", "--format", format, *containers)


def image_inspect(runtime: str, ref: str, *, format: str | None = None) -> tuple[str, ...]:
    """``image inspect``: the JSON array, or one ``format`` line."""
    return (runtime, "image", "inspect", *(("--format", format) if format is not None else ()), ref)


def tag(runtime: str, source: str, target: str) -> tuple[str, ...]:
    return (runtime, "tag", source, target)


def push(runtime: str, ref: str) -> tuple[str, ...]:
    return (runtime, "push", ref)


def create(runtime: str, image: str, *, label: str, entrypoint: str) -> tuple[str, ...]:
    """A container that is never started (to copy files out of an image)."""
    return (runtime, "create", "--label", label, "--entrypoint", entrypoint, image)


def copy_out(runtime: str, container: str, path: str) -> tuple[str, ...]:
    """``cp CONTAINER:PATH -``: the file as a tar stream on stdout."""
    return (runtime, "cp", f"{container}:{path}", "-")


def build(runtime: str, tag: str, build_args: dict[str, str]) -> tuple[str, ...]:
    """``build -``: the (gzipped) context on stdin; the base image is already on the host.
    ``--force-rm``: the legacy builder otherwise leaves the stopped container of a failed RUN
    step on the host (one per failed build, forever)."""
    argv = [runtime, "build", "--force-rm", "--tag", tag]
    if runtime == "podman":
        argv += ["--pull=never"]
    for k, v in sorted(build_args.items()):
        argv += ["--build-arg", f"{k}={v}"]
    return (*argv, "-")


def load(runtime: str) -> tuple[str, ...]:
    """``load``: an image archive on stdin."""
    return (runtime, "load")
