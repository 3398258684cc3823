"""A recipe with ``fleet:``: plan, up, down and status of every replica and the router, and
``inkctl top``. The single-deployment commands hand a fleet recipe to the functions here.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import HostsOpt, OutputOpt, RecipeArg, SetOpt, output_format, overrides
from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError, UsageError


def is_fleet(loaded) -> bool:
    return loaded.recipe.fleet is not None


def fleet_of(loaded):
    """The fleet's plans (every replica's and the router's) from a loaded recipe."""
    from inkctl.plan.fleet import build_fleet
    from inkctl.plan.inputs import plan_inputs

    return build_fleet(loaded.recipe, loaded.hosts, source=_where(loaded), **plan_inputs(loaded))


def _where(loaded) -> str:
    """file:line:col of the recipe's fleet section (errors about replicas point there)."""
    try:
        from inkctl.recipe.document import parse_document

        doc = parse_document(loaded.path)
        pos = doc.position(("fleet", "replicas")) or doc.position(("fleet",))
    except Exception:  # noqa: BLE001 - a bundled or vanished file: the path alone
        pos = None
    return f"{loaded.path}:{pos[0]}:{pos[1]}" if pos else str(loaded.path)


def load_fleet(recipe, hosts, set_, command: str, *, need_hosts: bool = True):
    from inkctl.recipe.source import load_recipe

    loaded = load_recipe(recipe, overrides(set_), hosts)
    if loaded.recipe.fleet is None:
        raise UsageError(f"{command} works on a fleet: the recipe has no fleet: section",
                         hint="add fleet: {replicas: N} to the recipe")
    if need_hosts and loaded.hosts is None:
        raise UsageError(f"{command} needs hosts: pass --hosts FILE (an inventory) or list hosts: in the recipe")
    from inkctl.scrub import arm_for

    arm_for(loaded.recipe)
    return loaded, fleet_of(loaded)


def is_gateway(recipe: Path) -> bool:
    from inkctl.recipe.filekind import is_gateway_file

    return is_gateway_file(recipe)


def load_gateway_fleet(path: Path, hosts: Optional[Path], command: str):
    """A gateway file, its inventory and recipes -> (LoadedGateway, its FleetPlan)."""
    from inkctl.plan.gateway import build_gateway
    from inkctl.plan.inputs import plan_inputs
    from inkctl.recipe.gateway import load_gateway
    from inkctl.scrub import arm_for

    if hosts is None:
        raise UsageError(f"{command} of a gateway file needs --hosts FILE (the inventory its models are placed on)")
    lg = load_gateway(path, hosts)
    for g in lg.groups:
        arm_for(g.recipe)
    return lg, build_gateway(lg, [plan_inputs(g) for g in lg.groups])


# ----------------------------------------------------------------------------------- plan

def fleet_json(fleet) -> dict:
    from inkctl.cli.render import plan_json

    r = fleet.router_spec
    return {"fleet": fleet.name, "url": fleet.url,
            "router": {"kind": r.kind, "policy": r.policy_name, "image": r.image_ref, **plan_json(fleet.router)},
            "gateway": fleet.gateway,
            "replicas": [{"index": rep.index, "deployment": rep.name, "url": rep.url, "gpus": rep.gpus,
                          **({"model": rep.model} if rep.model else {}), **plan_json(rep.plan)}
                         for rep in fleet.replicas]}


def print_fleet_plan(loaded, fleet, *, full: bool, only_host: str | None, next_command: str) -> None:
    from inkctl.cli.render import plain, print_plan

    from rich.markup import escape

    out = plain()
    r = fleet.router_spec
    if fleet.gateway:
        out.print(f"gateway {escape(fleet.name)}: {len(fleet.replicas)} models behind one endpoint, "
                  "routed by the request's model")
        out.print(f"  router: {r.kind} (multi-model, {r.policy_name}) at {fleet.url}")
    else:
        out.print(f"fleet {escape(fleet.name)}: {len(fleet.replicas)} replica(s) of "
                  f"{loaded.recipe.hardware.nodes} host(s) x {loaded.recipe.hardware.gpus_per_host} GPU(s)")
        out.print(f"  router: {r.kind} ({r.policy_name}) at {fleet.url}")
    for rep in fleet.replicas:
        out.print(f"  {escape(rep.label)}: {rep.name}  {rep.gpus}  {rep.url}")
    for rep in fleet.replicas:
        if only_host and only_host not in {h.name for h in rep.plan.hosts}:
            continue
        out.print("")
        out.print(f"[bold]{escape(rep.label)}[/]")
        print_plan(out, rep.plan, replace_loaded(loaded, rep), only_host=only_host, full=full)
    if not only_host or only_host == fleet.router.hosts[0].name:
        out.print("")
        out.print("[bold]gateway[/]" if fleet.gateway else "[bold]router[/]")
        print_plan(out, fleet.router, None, full=full)
    if fleet.gateway and fleet.hosts:
        _print_dropped(out, fleet, only_host)
    elif fleet.hosts:
        _print_retire(out, fleet, only_host)
    out.print("")
    out.print(f"next: {next_command}")


def _print_retire(out, fleet, only_host: str | None) -> None:
    """What up and down do with replicas of an earlier, larger fleet: found by label on every
    host of the inventory, removed by these steps."""
    from inkctl.plan.fleet import retire_steps, spare_hosts
    from inkctl.plan.quote import command_line

    n = len(fleet.replicas)
    spare = spare_hosts(fleet)
    out.print("")
    out.print("[bold]replicas no longer in the recipe[/]")
    if spare:
        out.print(f"  spare hosts (no replica): {', '.join(spare)}", markup=False)
    out.print(f"  on every host: containers labelled {fleet.name}-r<k>, k >= {n}, are removed:", markup=False)
    for h in fleet.hosts:
        if only_host and h.name != only_host:
            continue
        dep = f"{fleet.name}-r<k>"
        for st in retire_steps(h, fleet.router.hosts[0].runtime, dep, ["<its containers>"]):
            out.print(f"    {h.name}: {command_line(st.argv)}", markup=False)


def _print_dropped(out, fleet, only_host: str | None) -> None:
    """What up and down do with groups the gateway file no longer lists: found by their label
    on every host of the inventory, removed by these steps (the one removal)."""
    from inkctl.plan.fleet import retire_steps
    from inkctl.plan.gateway import GATEWAY_LABEL
    from inkctl.plan.quote import command_line
    from inkctl.plan.runtime import LABEL_PREFIX

    out.print("")
    out.print("[bold]models no longer in the gateway file[/]")
    keep = ", ".join([*(g.name for g in fleet.replicas), fleet.router.deployment])
    out.print(f"  on every host: containers labelled {LABEL_PREFIX}{GATEWAY_LABEL}={fleet.name} of a deployment "
              f"other than {keep} are removed (under its lease):", markup=False)
    for h in fleet.hosts:
        if only_host and h.name != only_host:
            continue
        for st in retire_steps(h, fleet.router.hosts[0].runtime, "<deployment>", ["<its containers>"]):
            out.print(f"    {h.name}: {command_line(st.argv)}", markup=False)


def replace_loaded(loaded, rep):
    from inkctl.execute.deploy.fleet import replica_loaded

    return replica_loaded(loaded, rep)


# ------------------------------------------------------------------------------------- up

def fleet_up(loaded, fleet, *, fmt: str, recipe: Path, hosts: Optional[Path], accept_new: bool, keep: bool,
             timeout: Optional[float], skip: list[str]) -> None:
    from inkctl.api.secured import secrets_for, secure
    from inkctl.execute.events import Finished, JsonLines
    from inkctl.execute.deploy.fleet import bring_up_fleet
    from inkctl.plan.inputs import require_trusted

    t0 = time.monotonic()
    sources = _sources(loaded, fleet)
    for src in sources:
        require_trusted(src)
    _room_for_fds(sum(len(rep.hosts) for rep in fleet.replicas))
    secrets = {}
    for src in sources:  # a gateway's models: each recipe's own secrets section
        secrets.update(secrets_for(src, [rep.plan for rep in fleet.replicas if (rep.source or loaded) is src]))

    def display():
        from inkctl.cli.live import LiveDisplay

        return JsonLines() if fmt == "json" else LiveDisplay()

    sec = secure(loaded, secrets, display)
    scrub, sink = sec.scrub, sec.sink
    from inkctl.api.signals import on_signals, restore

    interrupt = threading.Event()
    previous = on_signals(interrupt, KeyboardInterrupt)
    try:
        from inkctl.weights.preflight import weights_check

        outcome = bring_up_fleet(loaded, fleet, sink, secrets, accept_new=accept_new, keep=keep, timeout=timeout,
                                 skip=skip, interrupt=interrupt, weights=weights_check)
    except (Cancelled, KeyboardInterrupt):
        err = InkctlError("interrupted: what this run started was removed", exit_code=EXIT_INTERRUPTED,
                          hint=f"check with: inkctl status {recipe}" + (f" --hosts {hosts}" if hosts else ""))
        sink.emit(Finished(ok=False, deployment=fleet.name, seconds=round(time.monotonic() - t0, 3), message=err.message))
        sink.close()
        raise err from None
    except InkctlError as e:
        e.message, e.hint = scrub.text(e.message), scrub.text(e.hint) if e.hint else e.hint
        e.args = (e.message,)
        sink.emit(Finished(ok=False, deployment=fleet.name, seconds=round(time.monotonic() - t0, 3),
                           message=e.message, hint=e.hint or ""))
        sink.close()
        raise
    finally:
        restore(previous)
    total = time.monotonic() - t0
    first = outcome.router.first_answer if outcome.router else None
    sink.emit(Finished(ok=True, deployment=fleet.name, seconds=round(total, 3), url=fleet.url,
                       first_ttft_s=None if first is None else round(first.ttft_s, 4), message=outcome.status.value))
    sink.close()
    if fmt == "text":
        from inkctl.cli.render import console

        out = console()
        from inkctl.execute.deploy.runner import UpStatus

        if outcome.status is UpStatus.ALREADY and not outcome.retired:
            what = "gateway" if fleet.gateway else "fleet"
            out.print(f"{what} {fleet.name} is already up at {fleet.url} (same recipe); nothing changed", markup=False)
            return
        if fleet.gateway:
            out.print(f"gateway {fleet.name} is up: {fleet.url} ({total:.1f} s in all)", markup=False)
            out.print(f"  {len(fleet.replicas)} models behind it, {fleet.router_spec.kind} router by model name",
                      markup=False)
        else:
            out.print(f"fleet {fleet.name} is up: {fleet.url} ({len(fleet.replicas)} replicas, "
                      f"{fleet.router_spec.kind} router, {fleet.router_spec.policy_name}; {total:.1f} s in all)",
                      markup=False)
        if first is not None and fleet.gateway:
            out.print(f"  ready: one streamed completion per model came back, last TTFT "
                      f"{first.ttft_s * 1000:.0f} ms", markup=False)
        elif first is not None:
            out.print(f"  ready: a streamed completion came back through the router, TTFT {first.ttft_s * 1000:.0f} ms",
                      markup=False)
        for rep in fleet.replicas:
            o = outcome.replicas.get(rep.name)
            how = "already running" if o is not None and o.status is UpStatus.ALREADY else "up"
            out.print(f"  {rep.label} {rep.name}: {how} at {rep.url} ({rep.gpus})", markup=False)
        for dep, on in sorted(outcome.retired.items()):
            gone = "the gateway file" if fleet.gateway else "the recipe"
            out.print(f"  {dep}: no longer in {gone}, removed from {', '.join(on)}", markup=False)


def _sources(loaded, fleet) -> list:
    """Each recipe the fleet's groups come from, as loaded (one for replicas; one per model)."""
    out: list = []
    for rep in fleet.replicas:
        src = rep.source or loaded
        if all(src is not o for o in out):
            out.append(src)
    return out


def _room_for_fds(hosts: int) -> None:
    """A fleet holds ~4 file descriptors per host while it comes up (bench/fleet_scale.py): raise
    the soft limit towards the hard one when the usual 1024 would run out (about 250 hosts)."""
    import resource

    want = 8 * hosts + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        if new > soft:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


# ----------------------------------------------------------------------------------- down

def fleet_down(fleet, *, fmt: str, accept_new: bool) -> None:
    from inkctl.execute.deploy.fleet import take_down_fleet

    reports, retired = take_down_fleet(fleet, accept_new=accept_new)
    failed = {f"{plan.deployment} {h}": why for plan, rep in reports for h, why in rep.failed.items()}
    if fmt == "json":
        print(json.dumps({"fleet": fleet.name, "ok": not failed, "deployments": [
            {"deployment": plan.deployment, "removed": rep.removed, "failed": rep.failed} for plan, rep in reports],
            "retired": retired}, indent=2))
    else:
        from inkctl.cli.render import console

        out = console()
        for plan, rep in reports:
            for h, names in rep.removed.items():
                out.print(f"{plan.deployment} {h}: removed {', '.join(names)}" if names
                          else f"{plan.deployment} {h}: nothing to remove", markup=False)
        for dep, on in sorted(retired.items()):
            gone = "the gateway file" if fleet.gateway else "the recipe"
            out.print(f"{dep} (no longer in {gone}): removed from {', '.join(on)}", markup=False)
    if failed:
        lines = "\n".join(f"  {k}: {v}" for k, v in failed.items())
        raise InkctlError(f"fleet {fleet.name}: could not clean every host:\n{lines}",
                          hint="fix the host (or its network) and run inkctl down again; it only removes what is left")
    if fmt == "text":
        from inkctl.cli.render import console

        what = f"{len(fleet.replicas)} models' groups and the gateway" if fleet.gateway else \
            f"{len(fleet.replicas)} replicas and the router"
        console().print(f"{'gateway' if fleet.gateway else 'fleet'} {fleet.name} is down: {what}", markup=False)


# --------------------------------------------------------------------------------- status

def fleet_states(loaded, fleet, accept_new: bool) -> list[dict]:
    """One row per group (replica or router): its containers' states, its GPUs, its health."""
    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.hosts.fanout import each
    from inkctl.execute.supervise.health import check_once
    from inkctl.execute.state.probe import deployment_containers

    conn = connect_each(list(fleet.hosts or loaded.hosts), accept_new=accept_new)
    groups = [(rep.label, rep.plan, rep.gpus, rep.url) for rep in fleet.replicas]
    groups.append(("gateway" if fleet.gateway else "router", fleet.router, fleet.router.hosts[0].name, fleet.url))

    def one(g) -> dict:
        label, plan, gpus, url = g
        states, unreachable = [], []
        for c in plan.containers:
            tr = conn.transports.get(c.host)
            if tr is None:
                unreachable.append(c.host)
                states.append("unreachable")
                continue
            try:
                hc = deployment_containers(tr, plan.host(c.host).runtime, plan.deployment)
            except Exception as e:  # noqa: BLE001 - a host that fails the question is reported as such
                unreachable.append(f"{c.host} ({e})")
                states.append("unreachable")
                continue
            got = [x for x in hc.containers if x.name == c.name]
            states.append(got[0].state if got else "missing")
        health = check_once(plan.health_url)[0] if all(s == "running" for s in states) else False
        state = "up" if health else ("running, not answering" if all(s == "running" for s in states)
                                     else ", ".join(sorted(set(states))))
        return {"group": label, "deployment": plan.deployment, "gpus": gpus, "url": url,
                "containers": [{"host": c.host, "rank": c.rank, "name": c.name, "state": s}
                               for c, s in zip(plan.containers, states)],
                "state": state, "ok": health}

    try:
        return each(one, groups, name="status")
    finally:
        close_all(conn.transports)


def fleet_status(loaded, fleet, *, fmt: str, accept_new: bool) -> None:
    rows = fleet_states(loaded, fleet, accept_new)
    ok = all(r["ok"] for r in rows)
    if fmt == "json":
        print(json.dumps({"fleet": fleet.name, "gateway": fleet.gateway, "url": fleet.url, "ok": ok, "groups": rows},
                         indent=2))
    else:
        from rich.table import Table
        from rich.text import Text

        from inkctl.cli.render import console

        t = Table(show_header=True, header_style="bold")
        t.add_column("group", no_wrap=True)
        t.add_column("state", no_wrap=True)
        t.add_column("GPUs", overflow="fold", ratio=1)
        t.add_column("containers", overflow="fold", ratio=1)
        for r in rows:
            cs = " ".join(f"{c['host']}/{c['rank']}:{c['state']}" for c in r["containers"])
            t.add_row(r["group"], Text(r["state"], "green" if r["ok"] else "red"), r["gpus"], cs)
        out = console()
        what = "gateway" if fleet.gateway else "fleet"
        out.print(f"{what} {fleet.name}  {fleet.url}", markup=False)
        out.print(t)
    if not ok:
        bad = [f"{r['group']} {r['state']}" for r in rows if not r["ok"]]
        raise InkctlError(f"{'gateway' if fleet.gateway else 'fleet'} {fleet.name} is not fully up: " + "; ".join(bad))


# ------------------------------------------------------------------------------------ top

def scrape(url: str, timeout: float = 3.0):
    """GET url (a /metrics endpoint) -> (Scrape | None, error text)."""
    import urllib.error
    import urllib.request

    from inkctl.client.prometheus import MetricsError, parse

    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - the fleet's own hosts
            return parse(r.read().decode("utf-8", "replace")), ""
    except (OSError, urllib.error.URLError) as e:
        return None, str(getattr(e, "reason", e))[:60]
    except MetricsError as e:
        return None, str(e)[:60]


def metrics_targets(fleet) -> list[tuple[str, str, str]]:
    """(group, kind, metrics URL) for every replica's engine head and the router's exporter."""
    out = [(rep.label, rep.recipe.engine.kind, rep.url + "/metrics") for rep in fleet.replicas]
    host = fleet.router.hosts[0].address
    out.append(("gateway" if fleet.gateway else "router", "router",
                f"http://{host}:{fleet.router_spec.prometheus_port}/metrics"))
    return out


# the router's count of requests routed: sglang-router 0.3 (smg_*), earlier sglang-router
# releases (sgl_router_*), vllm-router (vllm_router_*)
ROUTER_REQUESTS = ("smg_router_requests_total", "sgl_router_requests_total", "vllm_router_requests_total")


def top_rows(targets, before: dict, now: dict, seconds: float) -> list[dict]:
    from inkctl.client.prometheus import engine_load

    rows = []
    for group, kind, url in targets:
        cur, err = now.get(url, (None, "no answer"))
        if cur is None:
            rows.append({"group": group, "kind": kind, "url": url, "error": err})
            continue
        if kind == "router":
            reqs = cur.total(ROUTER_REQUESTS)
            prev = before.get(url, (None, ""))[0]
            pre = prev.total(ROUTER_REQUESTS) if prev else None
            rows.append({"group": group, "kind": kind, "url": url, "requests": reqs,
                         "healthy_replicas": cur.total(("smg_worker_health",)),
                         "requests_per_s": (reqs - pre) / seconds if reqs is not None and pre is not None and seconds > 0 else None})
            continue
        load = engine_load(cur, before.get(url, (None, ""))[0], seconds)
        rows.append({"group": group, "kind": kind, "url": url, **load.__dict__})
    return rows


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
        if r.get("error"):
            t.add_row(r["group"], "-", "-", "-", "-", "-", "no answer")
        elif r["kind"] == "router":
            rps = r.get("requests_per_s")
            ok = r.get("healthy_replicas")
            t.add_row(r["group"] + ("" if ok is None else f" ({ok:.0f} ok)"), "-", "-", "-", "-", "-",
                      _fmt(r.get("requests"), ".0f") + ("" if rps is None else f" ({rps:.1f}/s)"))
        else:
            t.add_row(r["group"], _fmt(r["running"], ".0f"), _fmt(r["waiting"], ".0f"), _fmt(r["kv_usage"], ".1f", 100),
                      _fmt(r["gen_tokens_per_s"], ".1f"), _fmt(r["ttft_p50_s"], ".0f", 1000) + (" ms" if r["ttft_p50_s"] is not None else ""),
                      _fmt(r["requests"], ".0f"))
    notes = [Text(f"{r['group']}: {r['url']}: {r['error']}") for r in rows if r.get("error")]
    return Group(t, *notes)


@app.command()
def top(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    interval: float = typer.Option(2.0, "--interval", min=0.2, help="Seconds between scrapes."),
    count: Optional[int] = typer.Option(None, "--count", "-n", min=1, help="Stop after this many tables (default: until Ctrl-C)."),
    output: str = OutputOpt,
) -> None:
    """A live table per replica from each engine's Prometheus /metrics (running, waiting, KV cache,
    generation tokens/s, TTFT p50 from the histogram, requests) and the router's."""
    from inkctl.execute.hosts.fanout import each

    fmt = output_format(output)
    if is_gateway(recipe):
        loaded, fleet = load_gateway_fleet(recipe, hosts, "top")
    else:
        loaded, fleet = load_fleet(recipe, hosts, set_, "top")
    targets = metrics_targets(fleet)
    urls = [u for _, _, u in targets]
    from inkctl.cli.render import console

    out = console()
    live = None
    if fmt == "text" and out.is_terminal:  # redrawn in place; piped, one table after another
        from rich.live import Live

        live = Live(console=out, auto_refresh=False)
        live.start()
    before: dict = {}
    t_before = None
    n = 0
    try:
        while True:
            t_now = time.monotonic()
            now = dict(zip(urls, each(scrape, urls, name="top")))
            rows = top_rows(targets, before, now, (t_now - t_before) if t_before else 0.0)
            n += 1
            if fmt == "json":
                print(json.dumps({"fleet": fleet.name, "t": round(time.time(), 3), "rows": rows}), flush=True)
            else:
                from rich.console import Group
                from rich.text import Text

                view = Group(Text(f"fleet {fleet.name}  {fleet.url}  ({time.strftime('%H:%M:%S')})"), top_table(rows))
                if live is not None:
                    live.update(view, refresh=True)
                else:
                    out.print(view)
            if count is not None and n >= count:
                break
            before, t_before = now, t_now
            time.sleep(max(0.0, interval - (time.monotonic() - t_now)))
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    finally:
        if live is not None:
            live.stop()


# ---------------------------------------------------------------------------------- watch

def fleet_watch(loaded, fleet, how, emit, *, supervise, run_hook) -> None:
    """Each replica supervised on its own (a replica is independent, unlike the ranks of one
    group) and the router's health; with ``how.restart`` a failed replica alone is taken down
    and brought up again (the others and the router are not touched), a dead router is
    started again. Without it, the first failure ends the watch (exit 1). ``supervise`` and
    ``run_hook`` are watch's own (one deployment's supervision, the --hook runner)."""
    from inkctl.execute.deploy.fleet import replica_loaded
    from inkctl.execute.supervise.watch import RestartBudget

    stop = threading.Event()
    fatal: list[InkctlError] = []
    lock = threading.Lock()

    def restart(what: str, budget: RestartBudget, only: set[str]) -> bool:
        while not stop.is_set():
            delay = budget.next_delay(time.monotonic())
            if delay is None:
                emit("restart_refused", f"{what}: {how.max_restarts_per_hour} restarts within the last hour: giving up")
                return False
            emit("restart", f"restarting {what} in {delay:g} s: down, then up (the rest of the fleet untouched)")
            time.sleep(delay)
            budget.spend(time.monotonic())
            try:
                _restart_group(loaded, fleet, only, how.accept_new)
            except InkctlError as e:
                emit("restart_failed", f"{what}: up failed: {e.message.splitlines()[0]}")
                continue
            emit("restarted", f"{what} is up again")
            return True
        return False

    def replica_loop(rep) -> None:
        budget = RestartBudget(per_hour=how.max_restarts_per_hour, first_s=how.backoff)
        rl = replica_loaded(loaded, rep)
        while not stop.is_set():
            failure = supervise(rl, rep.plan, how.accept_new, how.interval,
                                lambda event, text, **kw: emit(event, f"{rep.name}: {text}", replica=rep.index, **kw))
            if stop.is_set():
                return
            emit("failure", f"{rep.name}: {failure.message}", cause=failure.cause, host=failure.host, rank=failure.rank,
                 replica=rep.index)
            if how.hook:
                run_hook(how.hook, failure, emit)
            if not how.restart or not restart(rep.name, budget, {rep.name}):
                with lock:
                    fatal.append(InkctlError(f"{rep.name}: {failure.message}",
                                             hint="the router keeps serving from the other replicas; "
                                                  "watch --restart brings this one back by itself"))
                stop.set()
                return

    def router_loop() -> None:
        from inkctl.execute.supervise.health import check_once

        budget = RestartBudget(per_hour=how.max_restarts_per_hour, first_s=how.backoff)
        bad = 0
        while not stop.wait(how.interval):
            ok, seen = check_once(fleet.router.health_url, timeout=max(1.0, how.interval))
            if ok and fleet.gateway:  # a gateway that answers but forgot its engines (restarted)
                ok, seen = _registered_all(fleet)
            bad = 0 if ok else bad + 1
            if bad < 3:
                continue
            what = f"the gateway {seen}" if fleet.gateway and seen.startswith("lists") else \
                f"{fleet.router.health_url} did not answer 3 times ({seen})"
            emit("failure", f"router: {what}", cause="router", host=fleet.router.hosts[0].name, rank=None)
            bad = 0
            if not how.restart or not restart("the router", budget, set()):
                with lock:
                    fatal.append(InkctlError(f"fleet {fleet.name}: the router does not answer ({seen})",
                                             hint="inkctl up RECIPE starts it again (the replicas are left as they are)"))
                stop.set()
                return

    from inkctl.execute.hosts.fanout import background

    # one long-lived loop per replica and one for the router, on the one fan-out's followers
    background(lambda rep: router_loop() if rep is None else replica_loop(rep), [*fleet.replicas, None],
               name="watch", label=lambda rep: "router" if rep is None else str(rep.index))
    if fleet.gateway:
        emit("ok", f"watching gateway {fleet.name}: {len(fleet.replicas)} models and the gateway at {fleet.url}")
    else:
        emit("ok", f"watching fleet {fleet.name}: {len(fleet.replicas)} replicas and the router at {fleet.url}")
    try:
        while not stop.wait(0.25):
            pass
    except KeyboardInterrupt:
        stop.set()
        emit("stopped", f"stopped watching; fleet {fleet.name} is left as it is")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if fatal:
        raise fatal[0]


def _registered_all(fleet) -> tuple[bool, str]:
    """Does the gateway list every group with its model? (ok, what is missing)."""
    from inkctl.client.workers import registered
    from inkctl.plan.step import Register

    reg = next(s for s in fleet.router.steps() if isinstance(s, Register))
    try:
        have = registered(reg.url, timeout_s=5.0)
    except InkctlError as e:
        return False, e.message
    missing = [m for u, m in reg.workers if have.get(u.rstrip("/")) != m]
    return (not missing, "lists no engine for " + ", ".join(missing) if missing else "")


def _restart_group(loaded, fleet, only: set[str], accept_new: bool) -> None:
    """Down then up of the named replicas (none: the router alone), in this process."""
    from inkctl.api.secured import secrets_for
    from inkctl.execute.events import Collect
    from inkctl.execute.hosts.fanout import each
    from inkctl.execute.deploy.fleet import bring_up_fleet
    from inkctl.execute.deploy.takedown import take_down

    reps = [r for r in fleet.replicas if r.name in only]
    each(lambda r: take_down(r.plan, list(r.hosts), accept_new=accept_new), reps, name="down")
    secrets = {}
    for r in reps:  # a gateway's model: its own recipe's secrets
        secrets.update(secrets_for(r.source or loaded, [r.plan]))
    from inkctl.weights.preflight import weights_check

    bring_up_fleet(loaded, fleet, Collect(), secrets, accept_new=accept_new, keep=False, timeout=None, skip=[],
                   interrupt=threading.Event(), only=only, weights=weights_check)
