"""``doctor``, ``status`` and ``logs``: read what the hosts have; change nothing (a pull aside).

Thin commands: load -> plan -> connect -> probe -> print. Every host is asked in parallel; an
unreachable host is reported as such, next to the answers of the others.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

if TYPE_CHECKING:
    from inkctl.execute.hosts.transport import Transport

from inkctl.cli.app import app
from inkctl.cli.options import AcceptOpt, HostsOpt, OutputOpt, RecipeArg, SetOpt, load_target, output_format
from inkctl.cli.slurm import SlurmFlag
from inkctl.errors import InkctlError, UsageError

RESULT_STYLE = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "bold red"),
                "skipped": ("skipped", "dim"), "not-run": ("-", "dim")}
HOST_WIDTH = 22  # a table's host column: longer names wrap inside it
PREFIX_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta",
                  "bright_green", "bright_yellow", "bright_blue", "red")


def _connect(hosts, accept_new: bool) -> dict[str, Transport]:
    """Every host in parallel; a host that cannot be reached becomes an Unreachable stand-in."""
    from inkctl.execute.hosts.connect import connect_each
    from inkctl.execute.deploy.preflight import Unreachable

    def accepted(host, name, key_type, fp):
        print(f"trusted the new host key of {host}: {key_type} {fp} (added {name} to known_hosts)", file=sys.stderr)

    conn = connect_each(list(hosts), accept_new=accept_new, on_accept=accepted)
    transports = dict(conn.transports)
    transports.update({name: Unreachable(err) for name, err in conn.errors.items()})
    return transports


def _close(transports: dict) -> None:
    from inkctl.execute.hosts.connect import close_all

    close_all(transports)


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
    from inkctl.execute.deploy.preflight import PreflightFailed, check_names, run_preflight

    fmt = output_format(output)
    skip = check_names(skip_check)  # a typo fails before any connection
    loaded, plan, image = load_target(recipe, hosts, set_, "doctor")
    transports = _connect(loaded.hosts, accept_new_host_keys)
    net = None
    try:
        try:
            from inkctl.weights.preflight import weights_check

            results, ok = run_preflight(loaded.recipe, plan, transports, skip=skip, image=image,
                                        weights=weights_check(loaded)), True
        except PreflightFailed as e:
            results, ok = e.results, False
        if network:
            from inkctl.cli.netreport import measure

            net = measure(loaded, plan, transports, results, port)
    finally:
        _close(transports)
    if fmt == "json":
        print(json.dumps({"deployment": plan.deployment, "recipe_hash": plan.recipe_hash, "ok": ok,
                          "checks": [r.as_dict() for r in results],
                          **({"network": net.as_dict()} if net is not None else {})}, indent=2))
    else:
        from inkctl.cli.render import console

        out = console()
        out.print(preflight_table(results))
        warned = [r for r in results if r.status == "warn"]
        if ok:
            extra = f", {len(warned)} warning(s)" if warned else ""
            out.print(f"[green]ready[/]: every check passed on {len(plan.hosts)} host(s){extra}", highlight=False)
    if net is not None and fmt != "json":
        from inkctl.cli.netreport import render

        print(render(net))
    if net is not None and not net.ok:
        raise InkctlError(net.failure(), hint=net.hint())
    if not ok:
        # an InkctlError, not typer.Exit: the one place that maps failures to exit codes is app.main
        where = ", ".join(f"{r.host} ({r.check})" for r in results if r.status == "fail")
        raise InkctlError(f"preflight failed on {where}: up would launch nothing",
                          hint="fix what FAILed, or waive a check knowingly with --skip-check NAME")


# ------------------------------------------------------------------------------------ status

def _status_rows(plan, found: dict, errors: dict, health: dict) -> list[dict]:
    from inkctl.execute.state.probe import human_duration, uptime

    rows = []
    for c in plan.containers:
        base = {"host": c.host, "rank": c.rank, "role": c.role, "container": c.name}
        if c.host in errors:
            rows.append({**base, "state": "unreachable", "detail": errors[c.host].removeprefix("unreachable: ")})
            continue
        hc = found[c.host]
        match = [x for x in hc.containers if x.name == c.name or x.rank == c.rank]
        if not match:
            rows.append({**base, "state": "missing"})
            continue
        x = match[0]
        up_s = uptime(x, hc.clock)
        rows.append({**base, "container": x.name, "state": x.state, "exit_code": x.exit_code,
                     "health": health.get("state") if c.rank == 0 and x.running else None,
                     "uptime_s": None if up_s is None else int(up_s), "uptime": human_duration(up_s),
                     "image": x.image, "image_id": x.image_id_short, "recipe_hash": x.recipe_hash,
                     "hash_matches": x.recipe_hash == plan.recipe_hash})
    planned = {c.name for c in plan.containers}
    for host, hc in found.items():  # the deployment's containers the plan no longer has
        for x in hc.containers:
            if x.name not in planned:
                rows.append({"host": host, "rank": x.rank, "role": x.role, "container": x.name, "state": x.state,
                             "exit_code": x.exit_code, "image": x.image, "image_id": x.image_id_short,
                             "recipe_hash": x.recipe_hash, "hash_matches": x.recipe_hash == plan.recipe_hash,
                             "detail": "not in the current plan"})
    return rows


def _health(plan, head_running: bool) -> dict:
    from inkctl.execute.supervise.health import check_once

    url = plan.health_url
    if url is None or not head_running:
        return {"url": url, "state": None}
    ok, seen = check_once(url)
    return {"url": url, "state": "up" if ok else "down", "detail": seen}


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
    from inkctl.execute.state.probe import deployment_states

    fmt = output_format(output)
    if slurm:
        from inkctl.cli import slurm as slurm_cli

        return slurm_cli.status(recipe, set_, fmt)
    from inkctl.cli.options import overrides
    from inkctl.recipe.filekind import is_gateway_file
    from inkctl.recipe.source import load_recipe

    if is_gateway_file(recipe):
        from inkctl.api.fleet import load_gateway_fleet
        from inkctl.api.target import Target
        from inkctl.cli.fleet import fleet_status

        lg, gw = load_gateway_fleet(Target.of(recipe, hosts), "status")
        fleet_status(lg, gw, fmt=fmt, accept_new=accept_new_host_keys)
        return
    if load_recipe(recipe, overrides(set_), hosts).recipe.fleet is not None:
        from inkctl.api.fleet import load_fleet
        from inkctl.api.target import Target
        from inkctl.cli.fleet import fleet_status

        loaded, fleet = load_fleet(Target.of(recipe, hosts, set_), "status")
        fleet_status(loaded, fleet, fmt=fmt, accept_new=accept_new_host_keys)
        return
    loaded, plan, _ = load_target(recipe, hosts, set_, "status")
    transports = _connect(loaded.hosts, accept_new_host_keys)
    try:
        states = deployment_states(plan, transports)
    finally:
        _close(transports)
    found, errors = states.ok, {h: e.reason for h, e in states.failed.items()}
    head = plan.containers[0]
    head_running = any(x.running and (x.name == head.name or x.rank == 0) for x in
                       (found[head.host].containers if head.host in found else []))
    health = _health(plan, head_running)
    from inkctl.scrub import active

    scrub = active()
    rows, errors, health = scrub(_status_rows(plan, found, errors, health)), scrub(errors), scrub(health)
    planned_rows = [r for r in rows if r.get("detail") != "not in the current plan"]
    ok = not errors and all(r["state"] == "running" for r in planned_rows) and health.get("state") == "up"
    if fmt == "json":
        print(json.dumps({"deployment": plan.deployment, "recipe_hash": plan.recipe_hash, "ok": ok,
                          "health": health, "ranks": rows, "unreachable": errors}, indent=2))
    else:
        _print_status(plan, rows, health, loaded.recipe)
    if not ok:
        raise InkctlError(_not_up(rows, errors, health))


def _not_up(rows: list[dict], errors: dict, health: dict) -> str:
    bad = [f"{r['host']}/{r['rank']} {r['state']}" + (f" (exit {r['exit_code']})" if r.get("exit_code") is not None else "")
           for r in rows if r["state"] not in ("running", "unreachable") and r.get("detail") != "not in the current plan"]
    if not bad and not errors and health.get("state") != "up":
        bad = [f"health {health.get('state') or 'unknown'} at {health.get('url')}"]
    if errors:
        bad.append("unreachable: " + ", ".join(errors))
    text = "the deployment is not fully up: " + "; ".join(bad)
    return text


def _print_status(plan, rows: list[dict], health: dict, recipe=None) -> None:
    from rich.table import Table
    from rich.text import Text

    from inkctl.cli.render import console, identity

    state_style = {"running": "green", "exited": "red", "missing": "yellow", "unreachable": "bold red"}
    # fits 80 columns: long host names wrap in their column; container, image and recipe share the
    # one column that wraps by words; why a rank is unreachable or extra goes below, as text
    t = Table(show_header=True, header_style="bold")
    t.add_column("host", max_width=HOST_WIDTH - 6, overflow="fold")
    for col in ("rank", "state", "health", "uptime"):
        t.add_column(col, no_wrap=True)
    t.add_column("container, image, deployment", ratio=1, min_width=16, overflow="fold")
    notes = []
    for r in rows:
        state = r["state"] + (f" ({r['exit_code']})" if r.get("exit_code") is not None else "")
        rank = "-" if r.get("rank") is None else str(r["rank"])
        if r.get("detail"):
            notes.append(f"{r['host']}/{rank}: {r['state']}: {r['detail']}")
        health_text = {"up": Text("up", "green"), "down": Text("down", "red")}.get(r.get("health") or "", Text("-", "dim"))
        what = Text(r["container"])
        if r.get("image"):
            what.append(f" {r['image']} ({r['image_id']})")
        rh = r.get("recipe_hash")
        if rh:
            what.append(f" deployment {rh} current" if r["hash_matches"] else f" deployment {rh} (now {plan.recipe_hash})",
                        "green" if r["hash_matches"] else "yellow")
        t.add_row(r["host"], rank, Text(state, state_style.get(r["state"], "")), health_text, r.get("uptime") or "-", what)
    out = console()
    out.print(f"{plan.deployment}  {identity(plan, recipe)}", markup=False)
    out.print(t)
    for n in notes:
        out.print(Text(n), soft_wrap=False)
    if health.get("url"):
        out.print(f"health: {health['url']} -> {health.get('state') or 'not asked (head not running)'}"
                  + (f" ({health['detail']})" if health.get("detail") else ""), markup=False)


# -------------------------------------------------------------------------------------- logs

@app.command()
def logs(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    follow: bool = typer.Option(False, "--follow", "-f", help="Follow every rank at once until Ctrl-C."),
    tail: Optional[str] = typer.Option(None, "--tail", help="Lines from the end of each rank's log (a number or 'all')."),
    since: Optional[str] = typer.Option(None, "--since", help="Only lines since this time (e.g. 10m, 2026-11-29T16:00:00)."),
    rank: Optional[int] = typer.Option(None, "--rank", help="Only this rank."),
    host: Optional[str] = typer.Option(None, "--host", help="Only this host."),
    output: str = OutputOpt,
    slurm: bool = SlurmFlag,
) -> None:
    """Every rank's log merged, each line prefixed host/rank (JSON lines with --output json).

    With --slurm: the job's output, every rank's lines prefixed 'RANK: ' (srun --label)."""
    from inkctl.execute.supervise.logs import Follow, snapshot, sources

    fmt = output_format(output)
    if tail is not None and not (tail.isdigit() or tail == "all"):
        raise UsageError(f"--tail must be a number of lines or 'all', not {tail!r}")
    if slurm:
        from inkctl.cli import slurm as slurm_cli

        return slurm_cli.logs(recipe, set_, follow=follow, rank=rank, tail=tail)
    loaded, plan, _ = load_target(recipe, hosts, set_, "logs")
    srcs = sources(plan, rank=rank, host=host)
    if not srcs:
        have = ", ".join(f"{c.host}/{c.rank}" for c in plan.containers)
        raise UsageError(f"no rank matches{f' --rank {rank}' if rank is not None else ''}{f' --host {host}' if host else ''}",
                         hint=f"this deployment has {have}")
    wanted = {s.host for s in srcs}
    transports = _connect([h for h in loaded.hosts if h.name in wanted], accept_new_host_keys)
    printer = _LinePrinter(srcs, fmt)
    failed = False
    try:
        for name, t in transports.items():
            if hasattr(t, "error"):
                printer.note(f"{name}: {t.error.reason}")
                failed = True
        if not follow:
            lines, errors = snapshot(transports, srcs, tail=tail, since=since)
            for ln in lines:
                printer.line(ln)
            for e in errors:
                if not any(e.startswith(f"{n}/") for n, t in transports.items() if hasattr(t, "error")):
                    printer.note(e)
            failed = failed or bool(errors)
        else:
            f = Follow(transports, srcs, tail=tail, since=since).start()
            try:
                for item in f:
                    if hasattr(item, "line"):
                        printer.line(item)
                    elif item.error:
                        printer.note(f"{item.source.prefix}: log ended: {item.error}")
                    else:
                        printer.note(f"{item.source.prefix}: log ended (exit {item.exit_code})")
            except KeyboardInterrupt:
                f.stop()
    finally:
        _close(transports)
    if failed and not follow:
        raise InkctlError("some ranks' logs could not be read (see above)")


class _LinePrinter:
    """Prefix each line with host/rank: a colour per rank on a terminal, plain otherwise, or JSON."""

    def __init__(self, srcs, fmt: str):
        self.fmt = fmt
        self.tty = sys.stdout.isatty() and fmt == "text"
        width = max(len(s.prefix) for s in srcs)
        self.prefix = {(s.host, s.rank): s.prefix.ljust(width) for s in srcs}
        self.style = {(s.host, s.rank): PREFIX_COLOURS[i % len(PREFIX_COLOURS)] for i, s in enumerate(srcs)}

    def line(self, ln) -> None:
        from dataclasses import replace

        from inkctl.scrub import active

        ln = replace(ln, line=active().text(ln.line))  # engines echo their environment: mask it
        key = (ln.host, ln.rank)
        if self.fmt == "json":
            sys.stdout.write(json.dumps(ln.as_dict()) + "\n")
        elif self.tty:
            from rich.text import Text

            from inkctl.cli.render import console

            import textwrap

            out = console()
            prefix = self.prefix[key]
            # the terminal's width: a long line goes on under its prefix, never under the one before
            room = max(20, out.width - len(prefix) - 3)
            parts = textwrap.wrap(ln.line, room, break_on_hyphens=False, drop_whitespace=False) or [""]
            for i, part in enumerate(parts):
                text = Text((prefix if i == 0 else " " * len(prefix)) + " | ", style=self.style[key])
                text.append(part.rstrip())
                out.print(text, soft_wrap=True)
            return
        else:
            sys.stdout.write(f"{self.prefix[key]} | {ln.line}\n")
        sys.stdout.flush()

    def note(self, text: str) -> None:
        from inkctl.scrub import active

        print(f"inkctl: {active().text(text)}", file=sys.stderr, flush=True)
