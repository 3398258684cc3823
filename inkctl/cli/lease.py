"""``inkctl lease status|release RECIPE``: the deploy lease each up/down/build holds on every host.

Distinct from ``inkctl lock RECIPE`` (which pins hashes in RECIPE.lock.json): this one says who
holds a deployment's lease (inkctl.execute.state.deploylock) and breaks a stale one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import AcceptOpt, HostsOpt, OutputOpt, RecipeArg, SetOpt, output_format, overrides
from inkctl.errors import UsageError

lease_app = typer.Typer(
    help="The deploy lease (one up/down/build per deployment at a time): who holds it; break a stale one.",
    no_args_is_help=True,
)
app.add_typer(lease_app, name="lease")

def _command(verb: str, doc: str) -> None:
    """``lease status`` and ``lease release``: the same options, one verb apart."""
    def command(
        recipe: Path = RecipeArg,
        hosts: Optional[Path] = HostsOpt,
        set_: Optional[List[str]] = SetOpt,
        accept_new_host_keys: bool = AcceptOpt,
        output: str = OutputOpt,
    ) -> None:
        _lease(verb, recipe, hosts=hosts, set_=set_, accept_new=accept_new_host_keys, fmt=output_format(output))

    command.__doc__ = doc
    lease_app.command(name=verb)(command)


_command("status", "Show, per host, who holds the deployment's lease (user, pid, command, since when).")
_command("release", "Break the deployment's lease on every host (after a command that held it died).")


def _lease(verb: str, recipe: Path, *, hosts, set_, accept_new: bool, fmt: str) -> None:
    from inkctl.execute.state import deploylock
    from inkctl.execute.hosts.connect import close_all, connect_all
    from inkctl.plan.deploy import build_plan
    from inkctl.recipe.source import load_recipe

    loaded = load_recipe(recipe, overrides(set_), hosts)
    if loaded.hosts is None:
        raise UsageError(f"lease {verb} needs hosts: pass --hosts FILE or list hosts: in the recipe")
    plan = build_plan(loaded.recipe, loaded.hosts)  # the deployment's name and hosts: no image or pins needed
    transports = connect_all(list(loaded.hosts), accept_new=accept_new)
    doc: dict[str, Any]
    try:
        if verb == "status":
            held = deploylock.status(plan, transports)
            doc = {h: (None if v is None else {"who": v.who, "pid": v.pid, "command": v.command, "since": v.since})
                   for h, v in held.items()}
            lines = [f"{h}: {'free' if v is None else 'held by ' + v.describe()}" for h, v in held.items()]
        else:
            released = deploylock.release(plan, transports)
            doc = {h: bool(v) for h, v in released.items()}
            lines = [f"{h}: {'released' if v else 'was not held'}" for h, v in released.items()]
    finally:
        close_all(transports)
    if fmt == "json":
        print(json.dumps({"deployment": plan.deployment, verb: doc}, indent=2))
        return
    from inkctl.cli.render import console

    for line in lines:
        console().print(f"{plan.deployment} {line}", markup=False)
