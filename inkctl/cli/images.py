"""``build`` and ``lock``: patched images you can trust. Thin: flags -> ``inkctl.api.build`` /
``inkctl.api.lock`` (load, trust, build or observe, pin) -> print."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import AcceptOpt, HostsOpt, OutputOpt, SetOpt, output_format
from inkctl.errors import counted

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
    fmt = output_format(output)
    from inkctl.api.build import BuildOptions
    from inkctl.api.build import build as api_build
    from inkctl.api.target import Target

    done = api_build(Target.of(recipe, hosts, set_),
                     BuildOptions(emit=emit, local=local, accept_new=accept_new_host_keys, push=push),
                     lambda: None if fmt == "json" else _live())
    if isinstance(done, dict):  # nothing built: what to say
        _say(fmt, done)
        return
    if fmt == "json":
        print(json.dumps(done.as_dict(), indent=2))
        return
    _summary(done)
    if done.pushed:
        from inkctl.cli.show.terminal import console

        console().print(f"pushed {done.pushed} (pinned in the lock file)", markup=False)


def _live():
    from inkctl.cli.show.live import LiveDisplay

    return LiveDisplay()


def _summary(report) -> None:
    from inkctl.cli.show.terminal import console

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
        from inkctl.cli.show.terminal import console

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
    from inkctl.api.lock import lock as api_lock
    from inkctl.api.target import Target

    done = api_lock(Target.of(recipe, hosts, set_), local=local, accept_new=accept_new)
    if fmt == "json":
        print(json.dumps({"lock": str(done.path), "pins": done.pins, "changed": done.changed}, indent=2, sort_keys=True))
        return
    from inkctl.cli.show.terminal import console

    out = console()
    out.print(f"wrote {done.path}: {counted(len(done.pins), 'pin')}"
              + (" (first lock)" if done.first else f", {len(done.changed)} changed"), markup=False)
    for line in [f"{k}: {v}" for k, v in sorted(done.pins.items())] if done.first else done.changed:
        out.print("  " + line, markup=False)
