"""``weights``: the pinned model on every host. Thin: load -> scan -> relay along a chain
(``inkctl.weights.relay``) -> print."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import AcceptOpt, HostsOpt, OutputOpt, SetOpt, load_target, output_format
from inkctl.api.signals import on_signals, restore
from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError, UsageError


@app.command()
def weights(
    recipe: Path = typer.Argument(..., metavar="RECIPE", help="A recipe file or a bundled recipe's name (its model pinned by `inkctl lock`)."),
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    from_: Optional[str] = typer.Option(None, "--from", help="Host that downloads from the Hub and sends to the others (default: the head, rank 0)."),
    verify: bool = typer.Option(False, "--verify", help="Re-hash every pinned file on every host and report what is missing, truncated or altered; change nothing."),
    repair: bool = typer.Option(False, "--repair", help="With --verify: then fix exactly the files found wrong."),
    bwlimit: Optional[float] = typer.Option(None, "--bwlimit", min=0.01, help="Cap each host-to-host copy stream at this many MB/s (leave room for other traffic)."),
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
    partition: Optional[str] = typer.Option(None, "--partition", help="Every node of this Slurm partition (sinfo), in Slurm's order; --hosts FILE then gives per-node settings by node name."),
    slurm_job: Optional[str] = typer.Option(None, "--slurm-job", metavar="JOBID", help="Every node of this running Slurm job's allocation (scontrol show job), in Slurm's order; --hosts FILE as with --partition. Inside an allocation ($SLURM_JOB_NODELIST) without this or --partition: the allocation's nodes."),
) -> None:
    """Put the pinned model on every host: what a host lacks comes ONCE (to the head, or --from
    HOST: from a host that has it, the Hub last) and is relayed host to host along a chain over
    the cluster network, each host writing and forwarding at once. Only missing or wrong files
    move; partial files resume; every byte is hashed as it arrives; a relay host that dies is
    named and the next one resumes from the host before it."""
    fmt = output_format(output)
    if repair and not verify:
        raise UsageError("--repair goes with --verify (without --verify, weights already fixes what a quick scan finds)")
    import os

    nodelist = os.environ.get("SLURM_JOB_NODELIST") if not (partition or slurm_job) else None
    if partition and slurm_job:
        raise UsageError("--partition and --slurm-job both name the nodes: choose one")
    if partition or slurm_job or nodelist:
        from inkctl.api.slurm import slurm_target
        from inkctl.api.target import Target

        loaded, plan, image = slurm_target(Target.of(recipe, hosts, set_), "weights", partition=partition,
                                           job=slurm_job, nodelist=nodelist)
    else:
        loaded, plan, image = load_target(recipe, hosts, set_, "weights")
    from inkctl.recipe.manifest import host_cache_template, read_manifest

    if loaded.recipe.model.local:
        raise UsageError(f"model.repo is a local directory ({loaded.recipe.model.repo}): `inkctl weights` puts Hub models in the hosts' Hub cache",
                         hint="put the directory on every host yourself (same path); `inkctl lock` pins its files")
    manifest = read_manifest(loaded)
    if host_cache_template(loaded.recipe) is None:
        raise UsageError("the recipe does not put the Hub cache on the hosts, so there is nowhere to put the weights",
                         hint="mount the host's Hub cache into the container (container.mounts) or set model.weights.cache")
    if not loaded.recipe.model.weights.manage:
        raise UsageError("model.weights.manage is false: inkctl does not manage this recipe's weights")
    if manifest is None:
        from inkctl.bundled import lock_command

        raise InkctlError(f"the model is not pinned yet: {loaded.recipe.model.repo} has no manifest in the lock file",
                          hint=f"run {lock_command(loaded.path, f' --hosts {hosts}' if hosts else '')} first", exit_code=2)
    names = [h.name for h in plan.hosts]
    source = from_ or names[0]
    if source not in names:
        raise UsageError(f"--from {source}: not a host of the inventory ({', '.join(names)})")

    from inkctl.weights.hub import endpoint, token_secret

    token_name, token = token_secret(loaded.recipe)
    from inkctl.scrub import arm

    scrub = arm([token.reveal()] if token is not None else [])  # the one scrubber: the run's record too
    from dataclasses import replace

    from inkctl.recipe.draft import draft_view
    from inkctl.recipe.manifest import read_draft_manifest

    models = [(loaded, manifest)]
    draft = read_draft_manifest(loaded)
    if draft is not None:  # the speculative draft: the same cache, the same copies, after the model
        view = draft_view(loaded.recipe)
        assert view is not None  # a draft pinned in the lock file is the recipe's draft
        models.append((replace(loaded, recipe=view), draft))
    elif loaded.recipe.speculative is not None and loaded.recipe.speculative.draft is not None:
        raise InkctlError(f"the draft model is not pinned yet: {loaded.recipe.speculative.draft.repo} has no manifest "
                          "in the lock file", hint=f"run `inkctl lock {recipe}" + (f" --hosts {hosts}" if hosts else "")
                          + "` first", exit_code=2)
    for one, pinned in models:
        _one_model(one, plan, image, pinned, fmt, scrub, source, verify, repair, accept_new_host_keys,
                   endpoint(loaded.recipe), {token_name: token.reveal()} if token is not None else {}, bwlimit,
                   recipe, hosts)


def _one_model(loaded, plan, image, manifest, fmt, scrub, source, verify, repair, accept_new, hub_url, hub_env,
               bwlimit, recipe, hosts) -> None:
    from inkctl import runlog
    from inkctl.execute.events import JsonLines, ScrubbingSink
    from inkctl.weights.run import run_weights

    view = None if fmt == "json" else _view(manifest)
    sink = ScrubbingSink(runlog.recording(JsonLines() if view is None else view), scrub)
    interrupt = threading.Event()
    previous = on_signals(interrupt, lambda: Cancelled(started=True))
    try:
        report = run_weights(loaded, plan, image, manifest, sink, source=source, verify=verify, repair=repair,
                             accept_new=accept_new, hub_url=hub_url, hub_env=hub_env, interrupt=interrupt,
                             bwlimit=bwlimit * 1e6 if bwlimit else None)
    except Cancelled:  # a second Ctrl-C: the copies stop where they are
        raise _interrupted() from None
    except InkctlError as e:
        if interrupt.is_set():
            raise _interrupted() from None
        e.message, e.hint = scrub.text(e.message), scrub.text(e.hint) if e.hint else e.hint
        e.args = (e.message,)
        raise
    finally:
        sink.close()
        restore(previous)
    if interrupt.is_set():
        raise _interrupted()
    if fmt == "json":
        print(json.dumps({"event": "weights", **report.as_dict()}))
    else:
        _summary(report)
    if report.failed or report.bad:
        from inkctl.weights.hub import token_how

        raise InkctlError(report.failure_text(), hint=report.hint(recipe, hosts, token_how(loaded.recipe)), exit_code=1)


def _interrupted() -> InkctlError:
    return InkctlError("interrupted: the copies stopped; partial files are kept and the next run resumes them",
                       exit_code=EXIT_INTERRUPTED)


def _view(manifest):
    from inkctl.cli.weights_view import WeightsView

    return WeightsView(manifest)


def _summary(report) -> None:
    from inkctl.cli.render import console

    out = console()
    for line in report.lines():
        out.print(line, markup=False)
