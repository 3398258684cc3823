"""``build`` and ``lock``: patched images you can trust. Thin: load -> context/observe -> print."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import AcceptOpt, HostsOpt, OutputOpt, SetOpt, output_format, overrides
from inkctl.errors import UsageError, counted

LocalOpt = typer.Option(False, "--local", help="Use the local Docker daemon (docker SDK) instead of building/observing on each host.")


@app.command()
def build(
    recipe: Path = typer.Argument(..., metavar="RECIPE", help="A recipe file or a bundled recipe's name (patches.mode: build)."),
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    emit: Optional[Path] = typer.Option(None, "--emit", help="Write the build context to DIR for review; build nothing."),
    local: bool = LocalOpt,
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
    push: Optional[str] = typer.Option(None, "--push", metavar="REGISTRY", help="Then push the image to REGISTRY (HOST[:PORT][/PATH]) and pin its digest in the lock file (for `inkctl export k8s`)."),
) -> None:
    """Build the recipe's patched image where it is missing (cache hit: nothing built, nothing sent).

    By default each host builds for itself from the small context sent over SSH; with --local the
    image is built once here and streamed (docker save | load) to each host that lacks it.
    """
    from inkctl.plan.build import build_context
    from inkctl.plan.inputs import require_trusted
    from inkctl.recipe.source import load_recipe

    fmt = output_format(output)
    loaded = load_recipe(recipe, overrides(set_), hosts)
    require_trusted(loaded)
    if loaded.recipe.patches.mode != "build":
        if push:
            raise UsageError(f"--push: inkctl builds no image for this recipe (patches.mode is {loaded.recipe.patches.mode!r}); "
                             f"it runs {loaded.recipe.engine.image.ref} as is",
                             hint="push that image with your registry's tools and pin it in the recipe as engine.image.digest")
        _say(fmt, {"image": loaded.recipe.engine.image.ref, "built": False,
                   "message": f"patches.mode is {loaded.recipe.patches.mode!r}: nothing to build; the lock agrees with the files"})
        return
    if emit is not None:
        ctx = build_context(loaded)
        written = ctx.write(emit)
        _say(fmt, {"image": ctx.tag, "emitted": str(emit), "files": [str(p) for p in written], "context_bytes": ctx.size,
                   "message": f"wrote the build context of {ctx.tag} to {emit} ({counted(len(written), 'file')}, {counted(ctx.size, 'byte')}); nothing built"})
        return
    if loaded.hosts is None and not local:
        raise UsageError("build needs hosts: pass --hosts FILE (an inventory), list hosts: in the recipe, "
                         "or use --local to build on the local daemon only")
    report = _ensure(loaded, local=local, accept_new=accept_new_host_keys, fmt=fmt, push=push)
    if fmt == "json":
        print(json.dumps(report.as_dict(), indent=2))
        return
    _summary(report)
    if report.pushed:
        from inkctl.cli.render import console

        console().print(f"pushed {report.pushed} (pinned in the lock file)", markup=False)


def _ensure(loaded, *, local: bool, accept_new: bool, fmt: str, push: str | None = None):
    from inkctl.execute.image.build import ensure_image

    from inkctl import runlog

    sink = runlog.recording(None if fmt == "json" else _live())
    try:
        if loaded.hosts is None:  # --local with no hosts: build here, deliver nowhere
            return _pushed(loaded, _local_only(loaded, sink), push, None)
        from inkctl.execute.hosts.connect import close_all, connect_all
        from inkctl.plan.deploy import build_plan
        from inkctl.plan.inputs import plan_inputs

        plan = build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded))
        runlog.note_plan(plan, loaded.path)
        transports = connect_all(list(loaded.hosts), accept_new=accept_new)
        try:
            report = ensure_image(loaded, plan, transports, sink, local=local,
                                  guard=lambda: _deploy_lock_held(plan, transports))
            return _pushed(loaded, report, push, None if local else (transports[plan.hosts[0].name], plan.hosts[0].runtime))
        finally:
            close_all(transports)
    finally:
        if sink is not None:
            sink.close()


def _pushed(loaded, report, registry: str | None, host):
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


def _local_only(loaded, sink):
    from inkctl.execute.image.build import ensure_image
    from inkctl.plan.step import Plan

    empty = Plan(deployment=loaded.recipe.name, recipe_hash="", hosts=(), stages=(), containers=())
    return ensure_image(loaded, empty, {}, sink, local=True)


def _live():
    from inkctl.cli.live import LiveDisplay

    return LiveDisplay()


def _summary(report) -> None:
    from inkctl.cli.render import console

    out = console()
    out.print(f"image {report.image}: context {report.context_bytes} bytes "
              f"({report.context_sent_bytes} bytes gzipped tar), {report.seconds:.2f} s", markup=False)
    rows = ([report.local] if report.local else []) + report.hosts
    for h in rows:
        sent = f", sent {h.bytes_sent} bytes" if h.action != "cache-hit" else ", nothing sent"
        out.print(f"  {h.host}: {h.action} {h.image_id or ''}{sent}, {h.seconds:.2f} s", markup=False)


def _say(fmt: str, doc: dict) -> None:
    if fmt == "json":
        print(json.dumps(doc, indent=2))
    else:
        from inkctl.cli.render import console

        console().print(doc["message"], markup=False)


# ------------------------------------------------------------------------------------ lock


@app.command()
def lock(
    recipe: Path = typer.Argument(..., metavar="RECIPE", help="Recipe whose hashes to pin in RECIPE.lock.json."),
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    local: bool = LocalOpt,
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
) -> None:
    """Pin every sha256 the recipe trusts (hotfixes, patch files, images, in-image originals, the
    model's revision and files) in RECIPE.lock.json, trust on first use; later build/up/validate
    --strict refuse any drift. (The deploy lease that up/down/build hold is `inkctl lease`.)"""
    _pin(recipe, hosts=hosts, set_=set_, local=local, accept_new=accept_new_host_keys, fmt=output_format(output))


def _pin(recipe: Path, *, hosts, set_, local: bool, accept_new: bool, fmt: str) -> None:
    from inkctl.execute.image.pinning import changes, observe
    from inkctl.recipe.lockfile import read_pins, write_lock
    from inkctl.recipe.source import load_recipe

    from inkctl.bundled import installed_copy, lock_command

    loaded = load_recipe(recipe, overrides(set_), hosts)
    if installed_copy(loaded.path):
        raise UsageError(f"{loaded.path.stem} is a recipe installed with inkctl: its lock file would go inside the "
                         "installation", hint=f"run {lock_command(loaded.path)}")
    if not local and loaded.hosts is None:  # the arguments first, then the Hub, then the hosts
        raise UsageError("lock needs hosts: pass --hosts FILE, list hosts: in the recipe, or use --local")
    old = read_pins(loaded)
    from inkctl.weights.pin import pin_model

    model = pin_model(loaded)  # the Hub first: a refused token fails before any host is touched
    from inkctl.weights.pin import pin_draft

    draft = pin_draft(loaded)
    transports = {}
    if local:
        from inkctl.execute.image.local_daemon import LocalDaemon

        stores: dict[str, object] = {"local": LocalDaemon()}  # HostImages or LocalDaemon (pinning.observe)
    else:
        from inkctl.execute.hosts.connect import connect_all
        from inkctl.execute.state.images import HostImages
        from inkctl.plan.deploy import build_plan

        hosts_in_use = loaded.hosts or []  # checked above, before the Hub
        plan = build_plan(loaded.recipe, hosts_in_use)
        transports = connect_all(list(hosts_in_use), accept_new=accept_new)
        stores = {h.name: HostImages(transports[h.name], h.runtime) for h in plan.hosts}
    try:
        pins, per_host = observe(loaded, stores)
    finally:
        from inkctl.execute.hosts.connect import close_all

        close_all(transports)
    if model is not None:
        pins[f"model:{model.repo}"] = model.revision
    if draft is not None:
        pins[f"model:{draft.repo}"] = draft.revision
    from inkctl.recipe.lockfile import editing

    with editing(loaded):  # `build --push` and `cache --lock` pins are not observed here: kept as the file has them now
        pins.update({k: v for k, v in read_pins(loaded).items() if k.startswith(("push:", "compile-cache:"))})
        path = write_lock(loaded, pins, per_host, model=model.as_dict() if model else None,
                          models={"draft": draft.as_dict()} if draft else None)
    diff = changes(old, pins) if old else []
    if fmt == "json":
        print(json.dumps({"lock": str(path), "pins": pins, "changed": diff}, indent=2, sort_keys=True))
        return
    from inkctl.cli.render import console

    out = console()
    out.print(f"wrote {path}: {counted(len(pins), 'pin')}" + (f", {len(diff)} changed" if old else " (first lock)"), markup=False)
    for line in diff if old else [f"{k}: {v}" for k, v in sorted(pins.items())]:
        out.print("  " + line, markup=False)

