"""What the plan gives a host, read from its steps: the image, the GPUs, the mounts, the ports and
the environment its ranks get."""

from __future__ import annotations

from inkctl.plan.deploy import api_port
from inkctl.plan.step import Plan, Run
from inkctl.recipe.model import Recipe


def host_image(recipe: Recipe, plan: Plan, image: str | None = None) -> str:
    """The image the plan's containers run: ``image`` (a built one), the plan's, or engine.image.ref."""
    return image or planned_image(plan) or recipe.engine.image.ref


def containers(plan: Plan, host: str | None = None):
    """The container specs of the plan's run steps (of one host, or all)."""
    for step in plan.steps():
        if isinstance(step, Run) and step.container is not None and host in (None, step.host):
            yield step.container


def planned_image(plan: Plan) -> str | None:
    """The image the plan's containers run."""
    return next((c.image for c in containers(plan)), None)


def planned_gpus(plan: Plan, host: str) -> list[int] | None:
    """The GPU indices the host's ranks are given (``--gpus "device=0,1"``, ``--device
    nvidia.com/gpu=0``), from the plan's container specs; None: every GPU."""
    out: list[int] = []
    for c in containers(plan, host):
        opts = list(c.options)
        if "/dev/kfd" in opts:  # ROCm: /dev/dri holds every card, ROCR_VISIBLE_DEVICES selects them
            rocr = dict(c.env).get("ROCR_VISIBLE_DEVICES")
            if rocr is None:
                return None
            out += [int(x) for x in rocr.split(",") if x.strip().isdigit()]
            continue
        for flag, value in zip(opts, opts[1:]):
            if flag == "--gpus":
                v = value.strip('"')
                if not v.startswith("device="):
                    return None
                out += [int(x) for x in v[len("device="):].split(",") if x.isdigit()]
            elif flag == "--device" and value.startswith("nvidia.com/gpu="):
                v = value.split("=", 1)[1]
                if not v.isdigit():
                    return None
                out.append(int(v))
    return sorted(set(out)) if out else None


def mount_sources(recipe: Recipe, plan: Plan, host: str) -> list[tuple[int, str]]:
    """(index in container.mounts, expanded source) of the required mounts of the host's containers
    (their specs list container.mounts first, in order)."""
    spec = next(containers(plan, host), None)
    if spec is None:
        return []
    return [(i, spec.mounts[i].source) for i, m in enumerate(recipe.container.mounts) if m.required]


def planned_ports(recipe: Recipe, rank: int) -> list[tuple[int, str]]:
    """Ports a rank binds on its host before anything else runs: the head's API and rendezvous."""
    if rank != 0:
        return []
    from inkctl.recipe.engine_registry import spec_of

    return [(api_port(recipe), "engine"), *spec_of(recipe.engine.kind).ports(recipe)]


def planned_env(plan: Plan, host: str) -> dict[str, str]:
    spec = next(containers(plan, host), None)
    return dict(spec.env) if spec is not None else {}
