"""``doctor`` and ``status``: read what the hosts have; change nothing (a pull aside).

Thin: ``inkctl.api.observe.doctor`` and ``api.status`` load, plan, connect (every host in parallel;
an unreachable host is reported as such, next to the answers of the others) and ask; these
functions print what comes back. The api picks the backend (``--slurm``) and the kind; a
fleet's or a gateway's rows are rendered by ``cli/fleet.py``, a Slurm job's by ``cli/show/slurm.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import AcceptOpt, HostsOpt, OutputOpt, RecipeArg, SetOpt, accepted, output_format
from inkctl.cli.show.slurm import SlurmFlag

RESULT_STYLE = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "bold red"),
                "skipped": ("skipped", "dim"), "not-run": ("-", "dim")}
HOST_WIDTH = 22  # a table's host column: longer names wrap inside it
STATE_STYLE = {"running": "green", "exited": "red", "missing": "yellow", "unreachable": "bold red"}


# ------------------------------------------------------------------------------------ doctor

def preflight_table(results):
    """host x check, one row per check: ok / warn / FAIL / skipped with a short detail."""
    from rich.table import Table
    from rich.text import Text

    # fits 80 columns: long host names wrap within their column, the detail wraps by words
    t = Table(show_header=True, header_style="bold", show_lines=False)
    t.add_column("host", max_width=HOST_WIDTH, overflow="fold")
    t.add_column("check", no_wrap=True, min_width=7)
    t.add_column("result", no_wrap=True, min_width=7)
    t.add_column("detail", ratio=1, min_width=24, overflow="fold")
    for i, r in enumerate(results):
        word, style = RESULT_STYLE[r.status]
        last = i + 1 == len(results) or results[i + 1].host != r.host
        detail = Text(r.detail)
        if r.hint and r.status in ("fail", "warn"):
            detail.append(f"\nhint: {r.hint}", style="dim")
        first = i == 0 or results[i - 1].host != r.host
        host = f"{r.host} (rank {r.rank})" if first and r.rank is not None else (r.host if first else "")
        t.add_row(host, r.check, Text(word, style=style), detail, end_section=last)
    return t


@app.command()
def doctor(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    skip_check: Optional[List[str]] = typer.Option(None, "--skip-check", help="Waive a check by name (repeatable): runtime, gpus, gpu-free, image, paths, ports, memory, network, name, weights."),
    network: bool = typer.Option(False, "--network", help="Then measure the network: a real NCCL all-reduce across every pair of hosts inside the engine image (its torch and NCCL, the ranks' NCCL env), and nccl-tests' all_reduce_perf on each host when the image has it."),
    port: int = typer.Option(29580, "--port", min=1, max=65535, help="With --network: the rendezvous port on the first host of each pair."),
    output: str = OutputOpt,
) -> None:
    """Run the preflight alone: ssh, runtime, GPUs, image, paths, ports, memory, names, weights. Exit 0 if all pass.
    With --network, also measure bus bandwidth per host pair and name the transport NCCL chose."""
    from inkctl.api.observe.doctor import doctor as api_doctor
    from inkctl.api.target import Target

    fmt = output_format(output)
    d = api_doctor(Target.of(recipe, hosts, set_), skip=skip_check or (), network=network, port=port,
                   accept_new=accept_new_host_keys, on_accept=accepted)
    if fmt == "json":
        print(json.dumps({"deployment": d.plan.deployment, "recipe_hash": d.plan.recipe_hash, "ok": d.ok,
                          "checks": [r.as_dict() for r in d.results],
                          **({"network": d.net.as_dict()} if d.net is not None else {})}, indent=2))
    else:
        _print_doctor(d)
    failure = d.failure()
    if failure is not None:
        # an InkctlError, not typer.Exit: the one place that maps failures to exit codes is app.main
        raise failure


def _print_doctor(d) -> None:
    from inkctl.cli.show.terminal import console

    out = console()
    out.print(preflight_table(d.results))
    warned = [r for r in d.results if r.status == "warn"]
    if d.ok:
        extra = f", {len(warned)} warning(s)" if warned else ""
        out.print(f"[green]ready[/]: every check passed on {len(d.plan.hosts)} host(s){extra}", highlight=False)
    if d.net is not None:
        from inkctl.cli.show.netreport import render

        print(render(d.net))


# ------------------------------------------------------------------------------------ status

@app.command()
def status(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
    slurm: bool = SlurmFlag,
) -> None:
    """Each rank's container: state, exit code, health, uptime, image, recipe hash. Exit 0 only when all run.

    A fleet or a gateway file: one row per group (replica or model, and the router): its GPUs,
    containers and state.

    With --slurm: the Slurm job's state, nodes, each rank's state and the head's health."""
    fmt = output_format(output)
    from inkctl.api import backend
    from inkctl.api.fleet import FleetStatus
    from inkctl.api.slurm import SlurmStatus
    from inkctl.api.target import Target

    st = backend.status(Target.of(recipe, hosts, set_, slurm=slurm), accept_new=accept_new_host_keys, on_accept=accepted)
    if isinstance(st, FleetStatus):
        from inkctl.cli.fleet import said_status

        said_status(st, fmt)
    elif isinstance(st, SlurmStatus):
        from inkctl.cli.show.slurm import said_status as slurm_said_status

        slurm_said_status(st, fmt)
    else:
        _say_status(st, fmt)


def _say_status(st, fmt: str) -> None:
    plan = st.plan
    if fmt == "json":
        print(json.dumps({"deployment": plan.deployment, "recipe_hash": plan.recipe_hash, "ok": st.ok,
                          "health": st.health, "ranks": st.rows, "unreachable": st.unreachable}, indent=2))
    else:
        _print_status(plan, st.rows, st.health, st.loaded.recipe)
    failure = st.failure()
    if failure is not None:
        raise failure


def _print_status(plan, rows: list[dict], health: dict, recipe=None) -> None:
    from rich.text import Text

    from inkctl.cli.show.plan_text import identity
    from inkctl.cli.show.terminal import console

    t, notes = _status_table(plan, rows)
    out = console()
    out.print(f"{plan.deployment}  {identity(plan, recipe)}", markup=False)
    out.print(t)
    for n in notes:
        out.print(Text(n), soft_wrap=False)
    if health.get("url"):
        out.print(f"health: {health['url']} -> {health.get('state') or 'not asked (head not running)'}"
                  + (f" ({health['detail']})" if health.get("detail") else ""), markup=False)


def _status_table(plan, rows: list[dict]):
    """The table, and below it why a rank is unreachable or extra."""
    from rich.table import Table

    # fits 80 columns: long host names wrap in their column; container, image and recipe share the
    # one column that wraps by words; why a rank is unreachable or extra goes below, as text
    t = Table(show_header=True, header_style="bold")
    t.add_column("host", max_width=HOST_WIDTH - 6, overflow="fold")
    for col in ("rank", "state", "health", "uptime"):
        t.add_column(col, no_wrap=True)
    t.add_column("container, image, deployment", ratio=1, min_width=16, overflow="fold")
    notes = []
    for r in rows:
        rank = "-" if r.get("rank") is None else str(r["rank"])
        if r.get("detail"):
            notes.append(f"{r['host']}/{rank}: {r['state']}: {r['detail']}")
        t.add_row(r["host"], rank, *_status_cells(plan, r))
    return t, notes


def _status_cells(plan, r: dict) -> tuple:
    """state, health, uptime and what runs, of one row."""
    from rich.text import Text

    state = r["state"] + (f" ({r['exit_code']})" if r.get("exit_code") is not None else "")
    health_text = {"up": Text("up", "green"), "down": Text("down", "red")}.get(r.get("health") or "", Text("-", "dim"))
    what = Text(r["container"])
    if r.get("image"):
        what.append(f" {r['image']} ({r['image_id']})")
    rh = r.get("recipe_hash")
    if rh:
        what.append(f" deployment {rh} current" if r["hash_matches"] else f" deployment {rh} (now {plan.recipe_hash})",
                    "green" if r["hash_matches"] else "yellow")
    return Text(state, STATE_STYLE.get(r["state"], "")), health_text, r.get("uptime") or "-", what
