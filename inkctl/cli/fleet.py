"""A recipe with ``fleet:`` (or a gateway file): what plan, up, down and status show of every
replica and the router, and ``inkctl top``. Thin: loading, planning, the bring-up, the
take-down, the groups' states and the scrapes are ``inkctl.api.fleet``'s (and ``api.top``'s);
the api dispatches a fleet or a gateway file (``api.backend``) and the commands render what
comes back with the functions here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import HostsOpt, OutputOpt, RecipeArg, SetOpt, output_format
from inkctl.cli.show.fleet_plan import fleet_json as fleet_json
from inkctl.cli.show.fleet_plan import print_fleet_plan as print_fleet_plan
from inkctl.errors import EXIT_INTERRUPTED

# ----------------------------------------------------------------------------------- plan

# ------------------------------------------------------------------------------------- up

def said_up(result, fmt: str) -> None:
    """A fleet's or a gateway's up (``api.fleet.FleetUpResult``): in text, what came up (its
    events were the display's)."""
    if fmt == "text":
        _say_up(result)


def _say_up(result) -> None:
    from inkctl.cli.show.terminal import console

    out, fleet, first = console(), result.fleet, result.first_ttft_s
    if result.already:
        what = "gateway" if fleet.gateway else "fleet"
        out.print(f"{what} {fleet.name} is already up at {fleet.url} (same recipe); nothing changed", markup=False)
        return
    if fleet.gateway:
        out.print(f"gateway {fleet.name} is up: {fleet.url} ({result.seconds:.1f} s in all)", markup=False)
        out.print(f"  {len(fleet.replicas)} models behind it, {fleet.router_spec.kind} router by model name",
                  markup=False)
    else:
        out.print(f"fleet {fleet.name} is up: {fleet.url} ({len(fleet.replicas)} replicas, "
                  f"{fleet.router_spec.kind} router, {fleet.router_spec.policy_name}; {result.seconds:.1f} s in all)",
                  markup=False)
    if first is not None and fleet.gateway:
        out.print(f"  ready: one streamed completion per model came back, last TTFT "
                  f"{first * 1000:.0f} ms", markup=False)
    elif first is not None:
        out.print(f"  ready: a streamed completion came back through the router, TTFT {first * 1000:.0f} ms",
                  markup=False)
    _say_groups(out, result)


def _say_groups(out, result) -> None:
    fleet = result.fleet
    for rep in fleet.replicas:
        how = "already running" if result.was_running(rep) else "up"
        out.print(f"  {rep.label} {rep.name}: {how} at {rep.url} ({rep.gpus})", markup=False)
    for dep, on in sorted(result.outcome.retired.items()):
        gone = "the gateway file" if fleet.gateway else "the recipe"
        out.print(f"  {dep}: no longer in {gone}, removed from {', '.join(on)}", markup=False)


# ----------------------------------------------------------------------------------- down

def said_down(result, fmt: str) -> None:
    """A fleet's or a gateway's take-down (``api.fleet.FleetDownResult``), then its failure."""
    fleet = result.fleet
    if fmt == "json":
        print(json.dumps({"fleet": fleet.name, "ok": not result.failed, "deployments": [
            {"deployment": plan.deployment, "removed": rep.removed, "failed": rep.failed}
            for plan, rep in result.reports], "retired": result.retired}, indent=2))
    else:
        _down_lines(result)
    failure = result.failure()
    if failure is not None:
        raise failure
    if fmt == "text":
        from inkctl.cli.show.terminal import console

        what = f"{len(fleet.replicas)} models' groups and the gateway" if fleet.gateway else \
            f"{len(fleet.replicas)} replicas and the router"
        console().print(f"{'gateway' if fleet.gateway else 'fleet'} {fleet.name} is down: {what}", markup=False)


def _down_lines(result) -> None:
    from inkctl.cli.show.terminal import console

    out = console()
    for plan, rep in result.reports:
        for h, names in rep.removed.items():
            out.print(f"{plan.deployment} {h}: removed {', '.join(names)}" if names
                      else f"{plan.deployment} {h}: nothing to remove", markup=False)
    for dep, on in sorted(result.retired.items()):
        gone = "the gateway file" if result.fleet.gateway else "the recipe"
        out.print(f"{dep} (no longer in {gone}): removed from {', '.join(on)}", markup=False)


# --------------------------------------------------------------------------------- status

def said_status(st, fmt: str) -> None:
    """A fleet's or a gateway's rows (``api.fleet.FleetStatus``), then its failure."""
    fleet, rows, ok = st.fleet, st.rows, st.ok
    if fmt == "json":
        print(json.dumps({"fleet": fleet.name, "gateway": fleet.gateway, "url": fleet.url, "ok": ok, "groups": rows},
                         indent=2))
    else:
        from inkctl.cli.show.terminal import console

        out = console()
        what = "gateway" if fleet.gateway else "fleet"
        out.print(f"{what} {fleet.name}  {fleet.url}", markup=False)
        out.print(_status_table(rows))
    failure = st.failure()
    if failure is not None:
        raise failure


def _status_table(rows: list[dict]):
    from rich.table import Table
    from rich.text import Text

    t = Table(show_header=True, header_style="bold")
    t.add_column("group", no_wrap=True)
    t.add_column("state", no_wrap=True)
    t.add_column("GPUs", overflow="fold", ratio=1)
    t.add_column("containers", overflow="fold", ratio=1)
    for r in rows:
        cs = " ".join(f"{c['host']}/{c['rank']}:{c['state']}" for c in r["containers"])
        t.add_row(r["group"], Text(r["state"], "green" if r["ok"] else "red"), r["gpus"], cs)
    return t


# ------------------------------------------------------------------------------------ top

def _fmt(v, spec: str, scale: float = 1.0) -> str:
    return "-" if v is None else format(v * scale, spec)


def top_table(rows: list[dict]):
    """The table, then one line per target that did not answer (why)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(show_header=True, header_style="bold")
    for col in ("group", "run", "wait", "KV %", "gen tok/s", "TTFT p50", "requests"):
        t.add_column(col, no_wrap=True, justify="left" if col == "group" else "right")
    for r in rows:
        t.add_row(*_top_cells(r))
    notes = [Text(f"{r['group']}: {r['url']}: {r['error']}") for r in rows if r.get("error")]
    return Group(t, *notes)


def _top_cells(r: dict) -> tuple[str, ...]:
    """A row's cells: an engine's load, the router's requests, or that it did not answer."""
    if r.get("error"):
        return (r["group"], "-", "-", "-", "-", "-", "no answer")
    if r["kind"] == "router":
        rps = r.get("requests_per_s")
        ok = r.get("healthy_replicas")
        return (r["group"] + ("" if ok is None else f" ({ok:.0f} ok)"), "-", "-", "-", "-", "-",
                _fmt(r.get("requests"), ".0f") + ("" if rps is None else f" ({rps:.1f}/s)"))
    return (r["group"], _fmt(r["running"], ".0f"), _fmt(r["waiting"], ".0f"), _fmt(r["kv_usage"], ".1f", 100),
            _fmt(r["gen_tokens_per_s"], ".1f"), _fmt(r["ttft_p50_s"], ".0f", 1000) + (" ms" if r["ttft_p50_s"] is not None else ""),
            _fmt(r["requests"], ".0f"))


@app.command()
def top(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    interval: float = typer.Option(2.0, "--interval", min=0.2, help="Seconds between scrapes."),
    count: Optional[int] = typer.Option(None, "--count", min=1, help="Stop after this many tables (default: until Ctrl-C)."),
    output: str = OutputOpt,
) -> None:
    """A live table per replica from each engine's Prometheus /metrics (running, waiting, KV cache,
    generation tokens/s, TTFT p50 from the histogram, requests) and the router's."""
    from inkctl.api.fleet import load_any
    from inkctl.api.target import Target
    from inkctl.api.measure.top import sampler as sampler_for

    fmt = output_format(output)
    loaded, fleet = load_any(Target.of(recipe, hosts, set_), "top")
    sampler = sampler_for(loaded, fleet)
    view = _TopView(fmt, fleet)
    n = 0
    try:
        while True:
            view.show(sampler.rows())
            n += 1
            if count is not None and n >= count:
                break
            sampler.wait(interval)
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        view.stop()


class _TopView:
    """top's tables: redrawn in place on a terminal; piped, one after another; or JSON lines."""

    def __init__(self, fmt: str, fleet):
        from inkctl.cli.show.terminal import console

        self.fmt, self.fleet = fmt, fleet
        self.out = console()
        self.live = None
        if fmt == "text" and self.out.is_terminal:
            from rich.live import Live

            self.live = Live(console=self.out, auto_refresh=False)
            self.live.start()

    def show(self, rows: list[dict]) -> None:
        fleet = self.fleet
        if self.fmt == "json":
            print(json.dumps({"fleet": fleet.name, "t": round(time.time(), 3), "rows": rows}), flush=True)
            return
        from rich.console import Group
        from rich.text import Text

        view = Group(Text(f"fleet {fleet.name}  {fleet.url}  ({time.strftime('%H:%M:%S')})"), top_table(rows))
        if self.live is not None:
            self.live.update(view, refresh=True)
        else:
            self.out.print(view)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
