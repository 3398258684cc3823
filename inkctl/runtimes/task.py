"""A rank's container under Slurm without a runtime on the node: the engine starts in the
foreground of the rank's task, on the node's network (as the recipes' ``network: host``), so
Slurm's own signals end it. Two: pyxis (``srun --container-image``, on enroot: the task itself
runs inside the image) and apptainer (``apptainer exec``). Neither has docker's run options (ipc,
shm size, capabilities, ulimits, ...): ``not_expressed`` lists them, never dropped silently.
Pure: the plan's ``ContainerSpec`` in, argv out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inkctl.runtimes.protocol import InTask
    from inkctl.runtimes.spec import ContainerSpec, Mount


def _bind(m: Mount) -> str:
    return f"{m.source}:{m.target}" + (":ro" if m.read_only else "")


class Pyxis:
    """``srun`` flags start every task inside the image; the job directory is mounted at the
    same path, so the rank script and its files are there."""

    name = "pyxis"
    env_prefix = ""
    exports_env = True

    def srun_flags(self, spec: ContainerSpec, job_dir: str) -> list[str]:
        mounts = [f"{job_dir}:{job_dir}"] + [_bind(m) for m in spec.mounts]
        return [f"--container-image={self.image(spec.image)}", f"--container-mounts={','.join(mounts)}",
                "--no-container-mount-home", "--container-writable"]

    def foreground(self, spec: ContainerSpec, gpus: bool) -> list[str]:
        return [spec.entrypoint, *spec.command]  # the task already runs inside the image

    @staticmethod
    def image(ref: str) -> str:
        """enroot's image syntax: a registry's host is followed by '#' (``nvcr.io#nvidia/pytorch:24.01``)."""
        if ref.startswith(("/", "./")) or ref.endswith(".sqsh"):
            return ref
        first, sep, rest = ref.partition("/")
        if sep and ("." in first or ":" in first or first == "localhost"):
            return f"{first}#{rest}"
        return ref


class Apptainer:
    """``apptainer exec`` of the rank's entrypoint and command, with its binds and environment;
    secrets reach it as APPTAINERENV_NAME (apptainer sources no --env-file)."""

    name = "apptainer"
    env_prefix = "APPTAINERENV_"
    exports_env = False

    def srun_flags(self, spec: ContainerSpec, job_dir: str) -> list[str]:
        return []

    def foreground(self, spec: ContainerSpec, gpus: bool) -> list[str]:
        argv = ["apptainer", "exec", "--cleanenv"]
        if gpus:
            argv.append("--nv")
        for m in spec.mounts:
            argv += ["--bind", _bind(m)]
        for k, v in spec.env:
            argv += ["--env", f"{k}={v}"]
        image = spec.image if spec.image.startswith(("/", "./")) or spec.image.endswith(".sif") else f"docker://{spec.image}"
        return [*argv, image, spec.entrypoint, *spec.command]


IN_TASK: dict[str, InTask] = {c.name: c for c in (Pyxis(), Apptainer())}


def not_expressed(spec: ContainerSpec, mode: str) -> list[str]:
    """What the recipe asks of its container that ``mode`` (one of ``IN_TASK``) does not do."""
    opts = list(spec.options)
    flags = sorted({o for i, o in enumerate(opts) if o.startswith("--") and o != "--gpus"
                    and not (o == "--device" and i + 1 < len(opts) and opts[i + 1].startswith("nvidia.com/gpu"))})
    gaps = []
    if flags:
        gaps.append(f"container options {' '.join(flags)} have no {mode} form (not applied)")
    if spec.network != "host":
        gaps.append(f"network {spec.network}: {mode} runs on the node's network (ports are the engine's own)")
    if spec.extra:
        gaps.append(f"container.extra_args {' '.join(spec.extra)} are docker flags: not applied under {mode}")
    if any(not m.source.startswith("/") for m in spec.mounts):
        gaps.append(f"named volumes have no {mode} form: mount a directory instead")
    return gaps
