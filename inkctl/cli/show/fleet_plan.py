"""What ``plan`` shows of a fleet (a recipe with ``fleet:``, or a gateway file): every replica's
plan and the router's, as text or JSON. Without typer, so that ``plan`` runs without it
(cli/plan.py); cli/fleet.py holds the fleet's commands.
"""

from __future__ import annotations


def fleet_json(fleet, results_dir=None) -> dict:
    """A fleet's plans as JSON; with ``results_dir`` each replica of a rolling update that has a
    launch record there gets ``changes`` (the record, and what changes per rank)."""
    from inkctl.cli.show.plan_json import plan_json

    from inkctl.api.fleet import rollout_changes

    changes = rollout_changes(fleet, results_dir) if results_dir is not None else {}
    r = fleet.router_spec
    return {"fleet": fleet.name, "url": fleet.url,
            "router": {"kind": r.kind, "policy": r.policy_name, "image": r.image_ref, **plan_json(fleet.router)},
            "gateway": fleet.gateway,
            "replicas": [{"index": rep.index, "deployment": rep.name, "url": rep.url, "gpus": rep.gpus,
                          **({"model": rep.model} if rep.model else {}), **({"role": rep.role} if rep.role else {}),
                          **plan_json(rep.plan), **({"changes": changes[rep.name]} if rep.name in changes else {})}
                         for rep in fleet.replicas]}


def print_fleet_plan(loaded, fleet, *, full: bool, only_host: str | None, next_command: str, results_dir=None) -> None:
    from inkctl.cli.show.plan_text import print_plan
    from inkctl.cli.show.terminal import plain

    out = plain()
    _fleet_head(out, loaded, fleet)
    _group_plans(out, loaded, fleet, full=full, only_host=only_host)
    if not only_host or only_host == fleet.router.hosts[0].name:
        out.print("")
        out.print("[bold]gateway[/]" if fleet.gateway else "[bold]router[/]")
        print_plan(out, fleet.router, None, full=full)
    if fleet.gateway and fleet.hosts:
        _print_dropped(out, fleet, only_host)
    elif fleet.hosts:
        _print_retire(out, fleet, only_host)
    _print_rollout(out, fleet, results_dir)
    out.print("")
    out.print(f"next: {next_command}")


def _print_rollout(out, fleet, results_dir=None) -> None:
    """What up does when the replicas run another version of the recipe (a rolling update), or
    what a changed gateway file does first."""
    from inkctl.api.fleet import rollout_lines

    lines = rollout_lines(fleet, results_dir)
    if lines:
        out.print("")
        out.print("[bold]a changed gateway file[/]" if fleet.gateway else "[bold]rolling update[/]")
        for line in lines:
            out.print(f"  {line}", markup=False)


def _fleet_head(out, loaded, fleet) -> None:
    """What the fleet is: its groups, the router, every group's deployment, GPUs and URL."""
    from rich.markup import escape

    r = fleet.router_spec
    if fleet.gateway:
        out.print(f"gateway {escape(fleet.name)}: {len(fleet.replicas)} models behind one endpoint, "
                  "routed by the request's model")
        out.print(f"  router: {r.kind} (multi-model, {r.policy_name}) at {fleet.url}")
    elif fleet.disagg:
        roles = [rep.role for rep in fleet.replicas]
        out.print(f"fleet {escape(fleet.name)}: prefill/decode disaggregated, {roles.count('prefill')} prefill and "
                  f"{roles.count('decode')} decode replica(s); the KV cache moves from prefill to decode")
        out.print(f"  router: {r.kind} (P/D, {r.policy_name}) at {fleet.url}")
    else:
        out.print(f"fleet {escape(fleet.name)}: {len(fleet.replicas)} replica(s) of "
                  f"{loaded.recipe.hardware.nodes} host(s) x {loaded.recipe.hardware.gpus_per_host} GPU(s)")
        out.print(f"  router: {r.kind} ({r.policy_name}) at {fleet.url}")
    for rep in fleet.replicas:
        out.print(f"  {escape(rep.label)}: {rep.name}  {rep.gpus}  {rep.url}")


def _group_plans(out, loaded, fleet, *, full: bool, only_host: str | None) -> None:
    """Every group's plan (on ``only_host``: the groups with a host there)."""
    from rich.markup import escape

    from inkctl.api.fleet import replica_loaded
    from inkctl.cli.show.plan_text import print_plan

    for rep in fleet.replicas:
        if only_host and only_host not in {h.name for h in rep.plan.hosts}:
            continue
        out.print("")
        out.print(f"[bold]{escape(rep.label)}[/]")
        print_plan(out, rep.plan, replica_loaded(loaded, rep), only_host=only_host, full=full)


def _print_retire(out, fleet, only_host: str | None) -> None:
    """What up and down do with replicas of an earlier, larger fleet: found by label on every
    host of the inventory, removed by these steps."""
    from inkctl.api.fleet import retire_lines, retired_words, spare_hosts

    spare = spare_hosts(fleet)
    out.print("")
    out.print("[bold]replicas no longer in the recipe[/]")
    if spare:
        out.print(f"  spare hosts (no replica): {', '.join(spare)}", markup=False)
    out.print(f"  on every host: {retired_words(fleet)}, are removed:", markup=False)
    pattern = f"{fleet.name}-(p|d|r)<k>" if fleet.disagg else f"{fleet.name}-r<k>"
    for host, line in retire_lines(fleet, pattern, only_host):
        out.print(f"    {host}: {line}", markup=False)


def _print_dropped(out, fleet, only_host: str | None) -> None:
    """What up and down do with groups the gateway file no longer lists: found by their label
    on every host of the inventory, removed by these steps (the one removal)."""
    from inkctl.api.fleet import gateway_label, retire_lines

    out.print("")
    out.print("[bold]models no longer in the gateway file[/]")
    keep = ", ".join([*(g.name for g in fleet.replicas), fleet.router.deployment])
    out.print(f"  on every host: containers labelled {gateway_label(fleet)} of a deployment "
              f"other than {keep} are removed (under its lease):", markup=False)
    for host, line in retire_lines(fleet, "<deployment>", only_host):
        out.print(f"    {host}: {line}", markup=False)
