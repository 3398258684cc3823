"""``build`` below the command line: the recipe's patched image where it is missing (a cache hit
builds and sends nothing), its build context written for review (``--emit``), or the image pushed
to a registry and its digest pinned (``--push``). Load, trust, plan, the deploy lease, then
``execute.image.build``; the report comes back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inkctl.api.target import Target, load
from inkctl.errors import UsageError, counted

if TYPE_CHECKING:
    from inkctl.execute.events import Sink
    from inkctl.execute.image.build import ImageReport
    from inkctl.recipe.reading.loaded import Loaded


@dataclass(frozen=True)
class BuildOptions:
    emit: Path | None = None  # write the build context there; build nothing
    local: bool = False  # the local docker daemon builds, then delivers to the hosts lacking it
    accept_new: bool = False
    push: str | None = None  # REGISTRY: push the image there and pin its digest


def build(target: Target, options: BuildOptions, display: Callable[[], Sink | None]) -> ImageReport | dict[str, Any]:
    """The image's report; or, when nothing is built (patches.mode is not build, ``--emit``), what
    to say: a dict whose ``message`` is the sentence for people. ``display()`` is made only when
    something is built."""
    from inkctl.plan.image.build import build_context
    from inkctl.plan.inputs import require_trusted

    loaded = load(target, "build", need_hosts=False)
    require_trusted(loaded)
    if loaded.recipe.patches.mode != "build":
        if options.push:
            raise UsageError(f"--push: inkctl builds no image for this recipe (patches.mode is {loaded.recipe.patches.mode!r}); "
                             f"it runs {loaded.recipe.engine.image.ref} as is",
                             hint="push that image with your registry's tools and pin it in the recipe as engine.image.digest")
        return {"image": loaded.recipe.engine.image.ref, "built": False,
                "message": f"patches.mode is {loaded.recipe.patches.mode!r}: nothing to build; the lock agrees with the files"}
    if options.emit is not None:
        ctx = build_context(loaded)
        written = ctx.write(options.emit)
        return {"image": ctx.tag, "emitted": str(options.emit), "files": [str(p) for p in written], "context_bytes": ctx.size,
                "message": f"wrote the build context of {ctx.tag} to {options.emit} ({counted(len(written), 'file')}, {counted(ctx.size, 'byte')}); nothing built"}
    if loaded.hosts is None and not options.local:
        raise UsageError("build needs hosts: pass --hosts FILE (an inventory), list hosts: in the recipe, "
                         "or use --local to build on the local daemon only")
    return _ensure(loaded, options, display)


def _ensure(loaded: Loaded, options: BuildOptions, display: Callable[[], Sink | None]) -> ImageReport:
    from inkctl import runlog
    from inkctl.execute.image.build import ensure_image

    sink = runlog.recording(display())
    try:
        if loaded.hosts is None:  # --local with no hosts: build here, deliver nowhere
            return _pushed(loaded, _local_only(loaded, sink), options.push, None)
        from inkctl.execute.hosts.connect import close_all, connect_all
        from inkctl.plan.deploy import build_plan
        from inkctl.plan.inputs import plan_inputs

        plan = build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded))
        runlog.note_plan(plan, loaded.path)
        transports = connect_all(list(loaded.hosts), accept_new=options.accept_new)
        try:
            report = ensure_image(loaded, plan, transports, sink, local=options.local,
                                  guard=lambda: _deploy_lock_held(plan, transports))
            return _pushed(loaded, report, options.push,
                           None if options.local else (transports[plan.hosts[0].name], plan.hosts[0].runtime))
        finally:
            close_all(transports)
    finally:
        if sink is not None:
            sink.close()


def _pushed(loaded: Loaded, report: ImageReport, registry: str | None, host: Any) -> ImageReport:
    """``--push``: from the first host (``host`` = (transport, runtime)) or the local daemon."""
    if registry is None:
        return report
    from inkctl.execute.image import push

    if host is None:
        from inkctl.execute.image.local_daemon import LocalDaemon

        report.pushed = push.push_from_daemon(LocalDaemon(), report.image, registry)
    else:
        from inkctl.execute.state.images import HostImages

        report.pushed = push.push_from_host(HostImages(*host), report.image, registry)
    push.record(loaded, report.image, report.pushed)
    return report


def _deploy_lock_held(plan, transports):
    """One up/down/build per deployment at a time (the deploy lock), when it is installed; taken
    only when something must be built or delivered (a cache hit only reads)."""
    from inkctl.execute.state.deploylock import DeployLock

    return DeployLock(plan, transports, "build")


def _local_only(loaded: Loaded, sink: Sink | None) -> ImageReport:
    from inkctl.execute.image.build import ensure_image
    from inkctl.plan.step import Plan

    empty = Plan(deployment=loaded.recipe.name, recipe_hash="", hosts=(), stages=(), containers=())
    return ensure_image(loaded, empty, {}, sink, local=True)
