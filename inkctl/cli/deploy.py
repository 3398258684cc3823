"""``up`` and ``down``: load -> plan -> (``execute.deploy.bringup`` / ``execute.deploy.takedown``) -> print.

``up`` is all-or-nothing: every host is connected (and its key checked) before anything starts
anywhere, and any failure after that (a step, a crashed rank, a health timeout, Ctrl-C,
SIGTERM) runs the plan's teardown on every host this run touched. ``down`` asks each host
what the deployment has there (by label) and removes exactly that.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import (AcceptOpt, AccountOpt, ContainerOpt, GpusOpt, HookOpt, HostsOpt, JobDirOpt, OutputOpt,
                                PartitionOpt, RecipeArg, RestartOpt, SetOpt, StuckAfterOpt, TimeOpt, load_target,
                                output_format, overrides)
from inkctl.api.signals import on_signals, restore
from inkctl.cli.slurm import PendingOpt, SlurmFlag
from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError, UsageError


@app.command()
def up(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    keep_on_failure: bool = typer.Option(False, "--keep-on-failure", help="On failure leave what was started (for inspection) instead of removing it."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds to wait for health (default: the recipe's health.timeout_s)."),
    output: str = OutputOpt,
    skip_check: Optional[List[str]] = typer.Option(None, "--skip-check", help="Skip a preflight check by name (repeatable)."),
    detach: bool = typer.Option(False, "--detach", help="Ctrl-C during the health wait leaves the deployment booting (follow it with inkctl status / logs -f) instead of removing it."),
    allow_socket_fallback: bool = typer.Option(False, "--allow-socket-fallback", help="With network.rdma: NCCL falling back to TCP sockets is a warning, not a failure."),
    watch: bool = typer.Option(False, "--watch", help="Once healthy, stay and supervise it as `inkctl watch` does (Ctrl-C detaches and leaves it running)."),
    restart: bool = RestartOpt,
    hook: Optional[str] = HookOpt,
    stuck_after: float = StuckAfterOpt,
    results_dir: Path = typer.Option(Path("bench-results"), "--results-dir", help="Where boot records are saved (boots/DEPLOYMENT/) and the previous boot is read."),
    slurm: bool = SlurmFlag,
    partition: Optional[str] = PartitionOpt,
    account: Optional[str] = AccountOpt,
    time_limit: Optional[str] = TimeOpt,
    job_dir: Optional[str] = JobDirOpt,
    gpus_per_node: Optional[int] = GpusOpt,
    container: Optional[str] = ContainerOpt,
    pending_timeout: Optional[float] = PendingOpt,
    distribute_image: bool = typer.Option(False, "--distribute-image", help="First stream the image from a host that has it to every host that lacks it, host to host (as `inkctl images push-to-hosts`)."),
) -> None:
    """Bring the deployment up on its hosts; on any failure remove what was started.

    RECIPE may be a gateway file: several recipes on the --hosts inventory behind one endpoint
    that routes by the request's model (README: "Several models behind one endpoint").

    A different version of the same deployment (another recipe hash) is replaced: up shows what
    changes, removes the old containers, then launches the new ones.

    With --slurm: checks the request against the partition, submits the job (`inkctl export
    slurm`), prints its id and nodes, waits for health and the first answer through the head; a
    failed job is cancelled and its failing rank named. --container and --gpus-per-node mean what
    they mean to `export slurm`; a job still pending after --pending-timeout is cancelled, with
    Slurm's reason (squeue) and what to do about it."""
    fmt = output_format(output)
    if slurm:
        if hosts or watch or detach:
            raise UsageError("--slurm takes its nodes from the allocation: leave out --hosts, --watch and --detach")
        from inkctl.cli import slurm as slurm_cli

        return slurm_cli.up(recipe, set_, partition=partition, account=account, time_limit=time_limit, job_dir=job_dir,
                            gpus_per_node=gpus_per_node, container=container, pending_timeout=pending_timeout,
                            timeout=timeout, keep_on_failure=keep_on_failure, fmt=fmt, results_dir=results_dir)
    if partition or account or time_limit or job_dir or gpus_per_node is not None or container \
            or pending_timeout is not None:
        raise UsageError("--partition, --account, --time, --job-dir, --gpus-per-node, --container and "
                         "--pending-timeout go with --slurm")
    if (restart or hook) and not watch:
        raise UsageError("--restart and --hook act on failures after boot: use them with --watch (or inkctl watch)")
    if watch and detach:
        raise UsageError("--watch supervises a healthy deployment; --detach leaves it booting: choose one")
    t0 = time.monotonic()
    from inkctl.execute.deploy.bringup import bring_up, warm_imports

    warm_imports("paramiko")  # the connections need it; the recipe loads meanwhile
    from inkctl.execute.events import Finished, Info, JsonLines, ScrubbingSink
    from inkctl.secret import resolve_secrets, secret_values
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs
    from inkctl.plan.step import EnvFile
    from inkctl.recipe.source import load_recipe

    from inkctl.recipe.gateway import is_gateway_file

    if is_gateway_file(recipe):  # several models behind one endpoint
        if watch or detach or set_:
            raise UsageError("a gateway file: run up without --watch, --detach and --set")
        from inkctl.cli.fleet import fleet_up, load_gateway_fleet

        lg, gw = load_gateway_fleet(recipe, hosts, "up")
        fleet_up(lg, gw, fmt=fmt, recipe=recipe, hosts=hosts, accept_new=accept_new_host_keys,
                 keep=keep_on_failure, timeout=timeout, skip=list(skip_check or []))
        return
    loaded = load_recipe(recipe, overrides(set_), hosts)
    if loaded.hosts is None:
        raise UsageError("up needs hosts: pass --hosts FILE (an inventory) or list hosts: in the recipe")
    if loaded.recipe.fleet is not None:
        if watch or detach:
            raise UsageError("a fleet: run up, then inkctl watch RECIPE (it supervises each replica on its own)")
        from inkctl.cli.fleet import fleet_of, fleet_up

        fleet_up(loaded, fleet_of(loaded), fmt=fmt, recipe=recipe, hosts=hosts, accept_new=accept_new_host_keys,
                 keep=keep_on_failure, timeout=timeout, skip=list(skip_check or []))
        return
    from inkctl.plan.inputs import require_trusted

    require_trusted(loaded)  # hotfix files and lock pins, checked before any host is touched
    plan = build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded))
    from inkctl import runlog

    runlog.note_plan(plan, recipe)
    needed = [n for s in plan.puts() if isinstance(s.content, EnvFile) for n in s.content.secret_names]
    secrets = resolve_secrets(loaded.recipe.secrets, needed)  # before any connection: fail early, start nothing
    from inkctl.scrub import arm

    scrub = arm(secret_values(secrets))
    sink = ScrubbingSink(runlog.recording(JsonLines() if fmt == "json" else _live()), scrub)
    for w in loaded.warnings:
        sink.emit(Info(text=f"{w.location}: {w.path + ': ' if w.path else ''}{w.message}", level="warning"))
    if distribute_image:
        _distribute_image(loaded, plan, accept_new_host_keys, fmt, sink)
    interrupt = threading.Event()
    # a second signal: KeyboardInterrupt, which bring_up turns into Cancelled(started=...)
    previous = on_signals(interrupt, KeyboardInterrupt)
    said = []

    def healthy(outcome) -> None:  # before up stays attached (watchdog.after_boot): say it is up now
        _boot(plan, outcome, results_dir, sink)
        if fmt == "text":
            _summary(plan, outcome, time.monotonic() - t0)
            said.append(True)

    from inkctl.execute.deploy.runner import LaunchFailed
    from inkctl.weights.preflight import weights_check

    try:
        outcome = bring_up(loaded, plan, sink, secrets, accept_new=accept_new_host_keys, keep=keep_on_failure,
                           timeout=timeout, skip=list(skip_check or []), interrupt=interrupt, detach=detach, on_healthy=healthy,
                           allow_socket_fallback=allow_socket_fallback, after_boot=not watch,
                           weights=weights_check)
    except (Cancelled, KeyboardInterrupt) as e:  # KeyboardInterrupt: a second Ctrl-C while connecting
        started = isinstance(e, Cancelled) and e.started
        left = "\n".join(f"  {c.host}: {c.name} and {plan.host(c.host).state_dir}" for c in plan.containers)
        text = ("interrupted again during the rollback: containers of this run may be left:\n" + left +
                f"\nremove them with: inkctl down {recipe}" + (f" --hosts {hosts}" if hosts else "")
                ) if started else "interrupted before anything was started; nothing to undo"
        err = InkctlError(text, exit_code=EXIT_INTERRUPTED)
        sink.emit(Finished(ok=False, deployment=plan.deployment, seconds=round(time.monotonic() - t0, 3), message=err.message))
        sink.close()
        raise err from None
    except InkctlError as e:
        if isinstance(e, LaunchFailed) and e.left:
            # a lost host keeps this run's deploy lock; its holder (this pid) is gone by then, so the
            # next command from this machine takes it over: down alone finishes the clean-up
            e.hint = ((e.hint + "; ") if e.hint else "") + ("once the host is back, run: inkctl down " + str(recipe)
                                                            + (f" --hosts {hosts}" if hosts else ""))
        e.message, e.hint = scrub.text(e.message), scrub.text(e.hint) if e.hint else e.hint
        e.args = (e.message,)
        sink.emit(Finished(ok=False, deployment=plan.deployment, seconds=round(time.monotonic() - t0, 3),
                           message=e.message, hint=e.hint or ""))
        sink.close()
        raise
    finally:
        restore(previous)
    total = time.monotonic() - t0
    _boot(plan, outcome, results_dir, sink)
    ready_s, first_ttft = _readiness(plan, outcome)
    sink.emit(Finished(ok=True, deployment=plan.deployment, seconds=round(total, 3), url=outcome.url,
                       healthy_after_s=None if outcome.healthy_after_s is None else round(outcome.healthy_after_s, 3),
                       ready_after_s=ready_s, first_ttft_s=first_ttft,
                       message=outcome.status.value, hint=_follow(recipe, hosts) if outcome.detached else ""))
    sink.close()
    if fmt == "text" and not said:
        _summary(plan, outcome, total, follow=_follow(recipe, hosts))
    if watch and not outcome.detached:
        from inkctl.cli.watch import Events, Watching, keep_watching

        keep_watching(loaded, plan, recipe, hosts, set_, Watching(
            accept_new=accept_new_host_keys, restart=restart, hook=hook, stuck_after=stuck_after,
            allow_socket_fallback=allow_socket_fallback), Events(fmt))


def _boot(plan, outcome, results_dir: Path, sink) -> None:
    """The boot's phases: compared with the recipe's previous boot, saved, sent as an event
    (once, also when up stays attached). The record is a by-product of a boot that went well:
    whatever is wrong with the records beside it (another up of the recipe writing its own at
    the same moment, a file cut short) is a warning, never a failed up."""
    if outcome.boot is None or outcome.boot.get("saved"):
        return
    from inkctl.cli.boottable import keep
    from inkctl.execute.events import BootPhases, Info

    record, slower, previous, problem = keep(results_dir, plan.deployment, outcome.boot, plan.recipe_hash)
    if problem:
        sink.emit(Info(text=problem, level="warning"))
    outcome.boot = {**record, "slower": list(slower), "previous": previous, "saved": True}
    sink.emit(BootPhases(deployment=plan.deployment, record=record, slower=slower, previous=previous))


def _readiness(plan, outcome) -> tuple[float | None, float | None]:
    """(seconds from the head container's start to the first answer, that answer's TTFT)."""
    first = outcome.first_answer
    if first is None:
        return None, None
    from inkctl.smoke.ready import ready_after_s

    ready = ready_after_s([s.name for s in plan.stages], outcome.stage_seconds)
    return (None if ready is None else round(ready, 3)), round(first.ttft_s, 4)


def _follow(recipe: Path, hosts: Optional[Path]) -> str:
    """How to follow a deployment left booting, and how to remove it."""
    where = f" --hosts {hosts}" if hosts else ""
    return (f"follow it with: inkctl status {recipe}{where} / inkctl logs -f {recipe}{where}; "
            f"remove it with: inkctl down {recipe}{where}")


def _live():
    from inkctl.cli.live import LiveDisplay

    return LiveDisplay()


def _summary(plan, outcome, total: float, follow: str = "") -> None:
    from inkctl.cli.render import console
    from inkctl.execute.deploy.runner import UpStatus

    out = console()
    if outcome.status is UpStatus.ALREADY:
        out.print(f"{plan.deployment} is already up at {outcome.url} (same recipe); nothing changed", markup=False)
        return
    if outcome.detached:
        out.print(f"detached: {plan.deployment} was left booting on {', '.join(h.name for h in plan.hosts)} "
                  f"(health: {outcome.url}); {follow}", markup=False)
        return
    healthy = f"healthy after {outcome.healthy_after_s:.1f} s, " if outcome.healthy_after_s is not None else ""
    out.print(f"{plan.deployment} is up: {outcome.url} ({healthy}{total:.1f} s in all)", markup=False)
    ready_s, first_ttft = _readiness(plan, outcome)
    if first_ttft is not None:
        since = f"{ready_s:.1f} s after the head container started" if ready_s is not None else "after health"
        out.print(f"  ready: answered {since}; first request TTFT {first_ttft * 1000:.0f} ms", markup=False)
    for c in plan.containers:
        out.print(f"  rank {c.rank} ({c.role}) {c.host}: {c.name}", markup=False)
    if outcome.boot:
        from inkctl.cli.boottable import boot_table

        out.print(boot_table(outcome.boot, outcome.boot.get("slower") or ()), markup=False, highlight=False)
    if outcome.smoke:
        ok = sum(1 for r in outcome.smoke if r.ok)
        ttfts = [r.ttft_s for r in outcome.smoke if r.ttft_s is not None]
        tps = [r.tokens_per_s for r in outcome.smoke if r.tokens_per_s]
        line = f"  smoke: {ok}/{len(outcome.smoke)} checks passed"
        if ttfts:
            line += f", TTFT {min(ttfts):.2f}-{max(ttfts):.2f} s"
        if tps:
            line += f", {sum(tps) / len(tps):.1f} tok/s"
        out.print(line, markup=False)


# ---------------------------------------------------------------------------------- down

@app.command()
def down(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
    slurm: bool = SlurmFlag,
) -> None:
    """Remove the deployment's containers (found by label) and its state directory on every host.
    A fleet: also replicas beyond fleet.replicas; a gateway file: every model's group and the gateway.

    With --slurm: scancel its job and wait until every rank has removed its container."""
    import json

    fmt = output_format(output)
    if slurm:
        from inkctl.cli import slurm as slurm_cli

        return slurm_cli.down(recipe, set_, fmt)
    from inkctl.recipe.gateway import is_gateway_file
    from inkctl.recipe.source import load_recipe

    if is_gateway_file(recipe):
        from inkctl.cli.fleet import fleet_down, load_gateway_fleet

        fleet_down(load_gateway_fleet(recipe, hosts, "down")[1], fmt=fmt, accept_new=accept_new_host_keys)
        return
    if load_recipe(recipe, overrides(set_), hosts).recipe.fleet is not None:
        from inkctl.cli.fleet import fleet_down, load_fleet

        fleet_down(load_fleet(recipe, hosts, set_, "down")[1], fmt=fmt, accept_new=accept_new_host_keys)
        return
    loaded, plan, _ = load_target(recipe, hosts, set_, "down")
    from inkctl.execute.deploy.takedown import take_down

    report = take_down(plan, loaded.hosts, accept_new=accept_new_host_keys)
    from inkctl import runlog

    runlog.event("down", deployment=plan.deployment, ok=report.ok, removed=report.removed, failed=report.failed,
                 notices=list(report.notices))
    if fmt == "json":
        print(json.dumps({"deployment": plan.deployment, "ok": report.ok, "removed": report.removed,
                          "failed": report.failed}, indent=2))
    else:
        from inkctl.cli.render import console

        out = console()
        for text in report.notices:
            out.print(f"warning: {text}", markup=False, style="yellow")
        for h in plan.hosts:
            if h.name in report.removed:
                names = report.removed[h.name]
                out.print(f"{h.name}: removed {', '.join(names)} and {h.state_dir}" if names
                          else f"{h.name}: nothing to remove (no container of {plan.deployment}; {h.state_dir} absent)", markup=False)
    if report.failed:
        lines = "\n".join(f"  {h}: {why}" for h, why in report.failed.items())
        raise InkctlError(f"{plan.deployment}: could not clean {len(report.failed)} host(s); what is there is unknown or left:\n{lines}",
                          hint="fix the host (or its network) and run inkctl down again; it only removes what is left")
    if fmt == "text":
        from inkctl.cli.render import console

        console().print(f"{plan.deployment} is down on {len(plan.hosts)} host{'s' if len(plan.hosts) != 1 else ''}", markup=False)


def _distribute_image(loaded, plan, accept_new: bool, fmt: str, sink) -> None:
    """``up --distribute-image``: the image to every host that lacks it, before the preflight. No
    host has it yet (a patched image not built yet): nothing to send, the build makes it."""
    from inkctl.cli.images_push import distribute_image
    from inkctl.execute.events import Info
    from inkctl.execute.image.relay import NoSource
    from inkctl.plan.inputs import plan_inputs

    try:
        out = distribute_image(loaded, plan, plan_inputs(loaded).get("image"), source=None, accept_new=accept_new,
                               fmt=fmt, sink=sink)
    except NoSource as e:
        sink.emit(Info(text=f"--distribute-image: {e.message}; nothing to send"))
        return
    if out.failed:
        raise InkctlError(f"--distribute-image: {out.image} did not reach {', '.join(out.failed)}:\n" +
                          "\n".join(f"  {h}: {why}" for h, why in out.failed.items()), exit_code=1)
    if out.sent:
        sink.emit(Info(text=f"image {out.image} sent to {', '.join(out.sent)} in {out.seconds:.1f} s"))
