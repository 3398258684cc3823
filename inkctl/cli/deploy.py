"""``up`` and ``down``: flags -> (``api.up`` / ``execute.deploy.takedown``) -> print.

``up`` is all-or-nothing: every host is connected (and its key checked) before anything starts
anywhere, and any failure after that (a step, a crashed rank, a health timeout, Ctrl-C,
SIGTERM) runs the plan's teardown on every host this run touched. ``down`` asks each host
what the deployment has there (by label) and removes exactly that.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import (AcceptOpt, HookOpt, HostsOpt, OutputOpt, RecipeArg, RestartOpt, SetOpt, load_target, output_format,
                                overrides)
from inkctl.cli.slurm import AccountOpt, JobDirOpt, PartitionOpt, SlurmFlag, TimeOpt
from inkctl.errors import InkctlError, UsageError


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
    slurm: bool = SlurmFlag,
    partition: Optional[str] = PartitionOpt,
    account: Optional[str] = AccountOpt,
    time_limit: Optional[str] = TimeOpt,
    job_dir: Optional[str] = JobDirOpt,
) -> None:
    """Bring the deployment up on its hosts; on any failure remove what was started.

    A different version of the same deployment (another recipe hash) is replaced: up shows what
    changes, removes the old containers, then launches the new ones.

    With --slurm: checks the request against the partition, submits the job (`inkctl export
    slurm`), prints its id and nodes, waits for health and the first answer through the head; a
    failed job is cancelled and its failing rank named."""
    fmt = output_format(output)
    if slurm:
        if hosts or watch or detach:
            raise UsageError("--slurm takes its nodes from the allocation: leave out --hosts, --watch and --detach")
        from inkctl.cli import slurm as slurm_cli

        return slurm_cli.up(recipe, set_, partition=partition, account=account, time_limit=time_limit, job_dir=job_dir,
                            timeout=timeout, keep_on_failure=keep_on_failure, fmt=fmt)
    if partition or account or time_limit or job_dir:
        raise UsageError("--partition, --account, --time and --job-dir go with --slurm")
    if (restart or hook) and not watch:
        raise UsageError("--restart and --hook act on failures after boot: use them with --watch (or inkctl watch)")
    if watch and detach:
        raise UsageError("--watch supervises a healthy deployment; --detach leaves it booting: choose one")
    from inkctl.api.up import Target, UpOptions, up as bring_up
    from inkctl.api.watching import Watching

    def display():
        if fmt == "json":
            from inkctl.execute.events import JsonLines

            return JsonLines()
        return _live()

    def say_up(plan, outcome, seconds: float, follow: str) -> None:
        if fmt == "text":
            _summary(plan, outcome, seconds, follow=follow)

    how = Watching(accept_new=accept_new_host_keys, restart=restart, hook=hook,
                   allow_socket_fallback=allow_socket_fallback) if watch else None
    opts = UpOptions(accept_new=accept_new_host_keys, keep=keep_on_failure, timeout=timeout,
                     skip=tuple(skip_check or ()), detach=detach, allow_socket_fallback=allow_socket_fallback, watch=how)
    events = None
    if watch:
        from inkctl.cli.watch import Events

        events = Events(fmt)
    bring_up(Target(recipe, hosts, tuple(overrides(set_))), opts, display, say_up, events)


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
    from inkctl.api.up import readiness

    ready_s, first_ttft = readiness(plan, outcome)
    if first_ttft is not None:
        since = f"{ready_s:.1f} s after the head container started" if ready_s is not None else "after health"
        out.print(f"  ready: answered {since}; first request TTFT {first_ttft * 1000:.0f} ms", markup=False)
    for c in plan.containers:
        out.print(f"  rank {c.rank} ({c.role}) {c.host}: {c.name}", markup=False)
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

    With --slurm: scancel its job and wait until every rank has removed its container."""
    import json

    fmt = output_format(output)
    if slurm:
        from inkctl.cli import slurm as slurm_cli

        return slurm_cli.down(recipe, set_, fmt)
    loaded, plan, _ = load_target(recipe, hosts, set_, "down")
    from inkctl.execute.deploy.takedown import take_down

    report = take_down(plan, loaded.hosts, accept_new=accept_new_host_keys)
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
