"""``up`` and ``down``: flags -> ``inkctl.api.up`` / ``inkctl.api.down`` -> what they show.

Thin: the api loads, plans, resolves secrets, handles signals and rolls back; these functions
check that the flags go together, pick the display (a live one, or JSON lines) and print the
summary. ``--slurm`` goes to ``cli/slurm.py``, a fleet recipe to ``cli/fleet.py`` (each thin too).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import (AcceptOpt, AccountOpt, ContainerOpt, GpusOpt, HookOpt, HostsOpt, JobDirOpt, OutputOpt,
                                PartitionOpt, RecipeArg, RestartOpt, SetOpt, StuckAfterOpt, TimeOpt, output_format)
from inkctl.cli.slurm import PendingOpt, SlurmFlag
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
    slurm_only = dict(partition=partition, account=account, time_limit=time_limit, job_dir=job_dir,
                      gpus_per_node=gpus_per_node, container=container, pending_timeout=pending_timeout)
    if slurm:
        return _up_slurm(recipe, set_, fmt, bool(hosts or watch or detach), timeout, keep_on_failure, slurm_only,
                         results_dir)
    _flags_fit(slurm_only, watch=watch, detach=detach, after_boot=bool(restart or hook))
    from inkctl.api.up import UpOptions
    from inkctl.api.watching import Watching

    opts = UpOptions(accept_new=accept_new_host_keys, keep=keep_on_failure, timeout=timeout,
                     skip=tuple(skip_check or ()), detach=detach, allow_socket_fallback=allow_socket_fallback,
                     distribute_image=distribute_image, results_dir=results_dir,
                     watch=Watching(accept_new=accept_new_host_keys, restart=restart, hook=hook, stuck_after=stuck_after,
                                    allow_socket_fallback=allow_socket_fallback) if watch else None)
    _UpView(fmt, recipe, hosts, set_, opts).run()


def _up_slurm(recipe: Path, set_, fmt: str, not_for_slurm: bool, timeout, keep: bool, slurm_only: dict,
              results_dir: Path) -> None:
    if not_for_slurm:
        raise UsageError("--slurm takes its nodes from the allocation: leave out --hosts, --watch and --detach")
    from inkctl.cli import slurm as slurm_cli

    slurm_cli.up(recipe, set_, **slurm_only, timeout=timeout, keep_on_failure=keep, fmt=fmt, results_dir=results_dir)


def _flags_fit(slurm_only: dict, *, watch: bool, detach: bool, after_boot: bool) -> None:
    """Flags that go together, and flags that go only with another."""
    if any(v is not None and v != "" for v in slurm_only.values()):
        raise UsageError("--partition, --account, --time, --job-dir, --gpus-per-node, --container and "
                         "--pending-timeout go with --slurm")
    if after_boot and not watch:
        raise UsageError("--restart and --hook act on failures after boot: use them with --watch (or inkctl watch)")
    if watch and detach:
        raise UsageError("--watch supervises a healthy deployment; --detach leaves it booting: choose one")


class _UpView:
    """What ``up`` shows: events as they come (a live display, or JSON lines), then the summary."""

    def __init__(self, fmt: str, recipe: Path, hosts: Optional[Path], set_, opts):
        from inkctl.api.target import Target

        self.fmt, self.opts = fmt, opts
        self.target = Target.of(recipe, hosts, set_)

    def run(self) -> None:
        from inkctl.api.up import up as api_up
        from inkctl.cli.watch import Events

        result = api_up(self.target, self.opts, self.display, on_up=self.said_up, fleet=self.fleet,
                        gateway=self.gateway, watch_events=Events(self.fmt))
        if result is not None and result.watch_stopped:
            raise typer.Exit(EXIT_INTERRUPTED)

    def display(self):
        if self.fmt == "json":
            from inkctl.execute.events import JsonLines

            return JsonLines()
        from inkctl.cli.live import LiveDisplay

        return LiveDisplay()

    def said_up(self, result) -> None:
        if self.fmt == "text":
            _summary(result)

    def fleet(self, loaded) -> None:
        from inkctl.api.fleet import fleet_of
        from inkctl.cli.fleet import fleet_up

        fleet_up(loaded, fleet_of(loaded), self.display, fmt=self.fmt, target=self.target, opts=self.opts)

    def gateway(self, target) -> None:
        from inkctl.api.fleet import load_gateway_fleet
        from inkctl.cli.fleet import fleet_up

        lg, gw = load_gateway_fleet(target, "up")
        fleet_up(lg, gw, self.display, fmt=self.fmt, target=target, opts=self.opts)


def _summary(r) -> None:
    from inkctl.cli.terminal import console

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
        from inkctl.cli.boottable import boot_table

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
    if slurm:
        from inkctl.cli import slurm as slurm_cli

        return slurm_cli.down(recipe, set_, fmt)
    from inkctl.api.down import down as api_down
    from inkctl.api.target import Target

    def fleet(loaded) -> None:
        from inkctl.api.fleet import fleet_of
        from inkctl.cli.fleet import fleet_down

        fleet_down(fleet_of(loaded), fmt=fmt, accept_new=accept_new_host_keys)

    def gateway(target) -> None:
        from inkctl.api.fleet import load_gateway_fleet
        from inkctl.cli.fleet import fleet_down

        fleet_down(load_gateway_fleet(target, "down")[1], fmt=fmt, accept_new=accept_new_host_keys)

    result = api_down(Target.of(recipe, hosts, set_), accept_new=accept_new_host_keys, fleet=fleet, gateway=gateway)
    if result is not None:
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
        from inkctl.cli.terminal import console

        console().print(result.summary(), markup=False)


def _down_lines(result) -> None:
    from inkctl.cli.terminal import console

    out, plan, report = console(), result.plan, result.report
    for text in report.notices:
        out.print(f"warning: {text}", markup=False, style="yellow")
    for h in plan.hosts:
        if h.name in report.removed:
            names = report.removed[h.name]
            out.print(f"{h.name}: removed {', '.join(names)} and {h.state_dir}" if names
                      else f"{h.name}: nothing to remove (no container of {plan.deployment}; {h.state_dir} absent)", markup=False)
