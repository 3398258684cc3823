"""``up`` and ``down``: flags -> ``inkctl.api.backend`` (up, down) -> what they show.

Thin: the api picks the backend (``--slurm`` names Slurm's) and the kind (one group, a fleet,
a gateway file), loads, plans, resolves secrets and rolls back; these functions check that
the flags go together, hold the cancel token Ctrl-C sets, pick the display (a live one, or
JSON lines) and print the summary: a fleet's with ``cli/fleet.py``, a Slurm job's with
``cli/show/slurm.py`` (each thin too).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import (AcceptOpt, AccountOpt, ContainerOpt, GpusOpt, HookOpt, HostsOpt, JobDirOpt, OutputOpt,
                                PartitionOpt, RecipeArg, RestartOpt, SetOpt, StuckAfterOpt, TimeOpt, output_format)
from inkctl.cli.show.slurm import PendingOpt, SlurmFlag
from inkctl.errors import EXIT_INTERRUPTED, UsageError


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
    from inkctl.api.slurm import SlurmRequest
    from inkctl.api.target import Target
    from inkctl.api.up import UpOptions
    from inkctl.api.watching import Watching

    if not slurm:  # --slurm refuses --watch and --detach itself (api.backend)
        _flags_fit(watch=watch, detach=detach, after_boot=bool(restart or hook))
    opts = UpOptions(accept_new=accept_new_host_keys, keep=keep_on_failure, timeout=timeout,
                     skip=tuple(skip_check or ()), detach=detach, allow_socket_fallback=allow_socket_fallback,
                     distribute_image=distribute_image, results_dir=results_dir,
                     watch=Watching(accept_new=accept_new_host_keys, restart=restart, hook=hook, stuck_after=stuck_after,
                                    allow_socket_fallback=allow_socket_fallback) if watch else None,
                     slurm=SlurmRequest(partition=partition, account=account, time_limit=time_limit, job_dir=job_dir,
                                        gpus_per_node=gpus_per_node, container=container,
                                        pending_timeout=pending_timeout, output_tail=fmt == "text"))
    _UpView(fmt, Target.of(recipe, hosts, set_, slurm=slurm), opts).run()


def _flags_fit(*, watch: bool, detach: bool, after_boot: bool) -> None:
    """Flags that go only with another, and flags that do not go together."""
    if after_boot and not watch:
        raise UsageError("--restart and --hook act on failures after boot: use them with --watch (or inkctl watch)")
    if watch and detach:
        raise UsageError("--watch supervises a healthy deployment; --detach leaves it booting: choose one")


class _UpView:
    """What ``up`` shows: events as they come (a live display, or JSON lines), then the summary."""

    def __init__(self, fmt: str, target, opts):
        self.fmt, self.opts, self.target = fmt, opts, target

    def run(self) -> None:
        from inkctl.api import backend
        from inkctl.cli.common.signals import cancel_token
        from inkctl.cli.watch import Events

        with cancel_token() as cancel:
            result = backend.up(self.target, self.opts, self.display, on_up=self.said_up,
                                watch_events=Events(self.fmt), cancel=cancel)
        _said(result, self.fmt, self.target.recipe)

    def display(self):
        if self.target.backend == "slurm":
            from inkctl.cli.show.slurm import Lines

            return Lines(self.fmt)
        if self.fmt == "json":
            from inkctl.execute.events import JsonLines

            return JsonLines()
        from inkctl.cli.show.live import LiveDisplay

        return LiveDisplay()

    def said_up(self, result) -> None:
        if self.fmt == "text":
            _summary(result)


def _said(result, fmt: str, recipe: Path) -> None:
    """What up ended with, by its kind: one group (said as soon as it was up), a fleet, a job."""
    from inkctl.api.fleet import FleetUpResult
    from inkctl.api.slurm import SlurmUpResult

    if isinstance(result, FleetUpResult):
        from inkctl.cli.fleet import said_up

        said_up(result, fmt)
    elif isinstance(result, SlurmUpResult):
        from inkctl.cli.show.slurm import said_up as slurm_said_up

        slurm_said_up(result, recipe, fmt)
    elif result.watch_stopped:
        raise typer.Exit(EXIT_INTERRUPTED)


def _summary(r) -> None:
    from inkctl.cli.show.terminal import console

    out, plan, outcome = console(), r.plan, r.outcome
    if r.already:
        out.print(f"{plan.deployment} is already up at {outcome.url} (same recipe); nothing changed", markup=False)
        return
    if outcome.detached:
        out.print(f"detached: {plan.deployment} was left booting on {', '.join(h.name for h in plan.hosts)} "
                  f"(health: {outcome.url}); {r.follow}", markup=False)
        return
    healthy = f"healthy after {outcome.healthy_after_s:.1f} s, " if outcome.healthy_after_s is not None else ""
    out.print(f"{plan.deployment} is up: {outcome.url} ({healthy}{r.seconds:.1f} s in all)", markup=False)
    if r.first_ttft_s is not None:
        since = (f"{r.ready_after_s:.1f} s after the head container started" if r.ready_after_s is not None
                 else "after health")
        out.print(f"  ready: answered {since}; first request TTFT {r.first_ttft_s * 1000:.0f} ms", markup=False)
    for c in plan.containers:
        out.print(f"  rank {c.rank} ({c.role}) {c.host}: {c.name}", markup=False)
    _boot_and_smoke(out, outcome)


def _boot_and_smoke(out, outcome) -> None:
    if outcome.boot:
        from inkctl.cli.show.boottable import boot_table

        out.print(boot_table(outcome.boot, outcome.boot.get("slower") or ()), markup=False, highlight=False)
    if outcome.smoke:
        out.print(_smoke_line(outcome.smoke), markup=False)


def _smoke_line(smoke) -> str:
    ok = sum(1 for r in smoke if r.ok)
    ttfts = [r.ttft_s for r in smoke if r.ttft_s is not None]
    tps = [r.tokens_per_s for r in smoke if r.tokens_per_s]
    line = f"  smoke: {ok}/{len(smoke)} checks passed"
    if ttfts:
        line += f", TTFT {min(ttfts):.2f}-{max(ttfts):.2f} s"
    if tps:
        line += f", {sum(tps) / len(tps):.1f} tok/s"
    return line


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
    fmt = output_format(output)
    from inkctl.api import backend
    from inkctl.api.fleet import FleetDownResult
    from inkctl.api.slurm import SlurmDownResult
    from inkctl.api.target import Target
    from inkctl.cli.show.slurm import Lines

    result = backend.down(Target.of(recipe, hosts, set_, slurm=slurm), accept_new=accept_new_host_keys,
                          events=Lines(fmt) if slurm else None)
    if isinstance(result, FleetDownResult):
        from inkctl.cli.fleet import said_down

        said_down(result, fmt)
    elif isinstance(result, SlurmDownResult):
        from inkctl.cli.show.slurm import said_down as slurm_said_down

        slurm_said_down(result, fmt)
    else:
        _say_down(result, fmt)


def _say_down(result, fmt: str) -> None:
    """The report (JSON, or a line per host), then the failure, if any; then that it is down."""
    import json

    plan, report = result.plan, result.report
    if fmt == "json":
        print(json.dumps({"deployment": plan.deployment, "ok": report.ok, "removed": report.removed,
                          "failed": report.failed}, indent=2))
    else:
        _down_lines(result)
    failure = result.failure()
    if failure is not None:
        raise failure
    if fmt == "text":
        from inkctl.cli.show.terminal import console

        console().print(result.summary(), markup=False)


def _down_lines(result) -> None:
    from inkctl.cli.show.terminal import console

    out, plan, report = console(), result.plan, result.report
    for text in report.notices:
        out.print(f"warning: {text}", markup=False, style="yellow")
    for h in plan.hosts:
        if h.name in report.removed:
            names = report.removed[h.name]
            out.print(f"{h.name}: removed {', '.join(names)} and {h.state_dir}" if names
                      else f"{h.name}: nothing to remove (no container of {plan.deployment}; {h.state_dir} absent)", markup=False)
