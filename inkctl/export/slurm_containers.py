"""A rank's container under Slurm without docker/podman: pyxis (``srun --container-image``, on
enroot) or apptainer. Pure: the plan's ``ContainerSpec`` in, argv out, and what has no form there.

Both run the engine in the foreground of the rank's task, on the node's network (as the recipes'
``network: host``), so Slurm's own signals end it; neither has docker's run options (ipc, shm
size, capabilities, ulimits, ...): those are listed, never dropped silently.
"""

from __future__ import annotations

from inkctl.plan.runtime import ContainerSpec

PYXIS = "pyxis"
APPTAINER = "apptainer"


def pyxis_srun_flags(spec: ContainerSpec, job_dir_token: str) -> list[str]:
    """``srun`` flags that start every task inside the image (pyxis); the job directory is mounted
    at the same path, so the rank script and its files are there."""
    mounts = [f"{job_dir_token}:{job_dir_token}"] + [f"{m.source}:{m.target}" + (":ro" if m.read_only else "")
                                                     for m in spec.mounts]
    return [f"--container-image={_pyxis_image(spec.image)}", f"--container-mounts={','.join(mounts)}",
            "--no-container-mount-home", "--container-writable"]


def _pyxis_image(ref: str) -> str:
    """enroot's image syntax: a registry's host is followed by '#' (``nvcr.io#nvidia/pytorch:24.01``)."""
    if ref.startswith(("/", "./")) or ref.endswith(".sqsh"):
        return ref
    first, sep, rest = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return f"{first}#{rest}"
    return ref


def apptainer_argv(spec: ContainerSpec, gpus: bool) -> list[str]:
    """``apptainer exec`` of the rank's entrypoint and command, with its binds and environment."""
    argv = ["apptainer", "exec", "--cleanenv"]
    if gpus:
        argv.append("--nv")
    for m in spec.mounts:
        argv += ["--bind", f"{m.source}:{m.target}" + (":ro" if m.read_only else "")]
    for k, v in spec.env:
        argv += ["--env", f"{k}={v}"]
    # secrets: the rank script exports them as APPTAINERENV_NAME (apptainer sources an --env-file)
    image = spec.image if spec.image.startswith(("/", "./")) or spec.image.endswith(".sif") else f"docker://{spec.image}"
    return [*argv, image, spec.entrypoint, *spec.command]


def not_expressed(spec: ContainerSpec, mode: str) -> list[str]:
    """What the recipe asks of its container that ``mode`` does not do."""
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
