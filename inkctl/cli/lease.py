"""``inkctl lease status|release RECIPE``: the deploy lease each up/down/build holds on every host.

Distinct from ``inkctl lock RECIPE`` (which pins hashes in RECIPE.lock.json): this one says who
holds a deployment's lease (inkctl.execute.state.deploylock) and breaks a stale one. Thin:
flags -> ``inkctl.api.observe.lease`` -> print.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import AcceptOpt, HostsOpt, OutputOpt, RecipeArg, SetOpt, output_format

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
    from inkctl.api.observe.lease import lease
    from inkctl.api.target import Target

    got = lease(Target.of(recipe, hosts, set_), verb, accept_new=accept_new)
    if fmt == "json":
        print(json.dumps(got.as_dict(), indent=2))
        return
    from inkctl.cli.show.terminal import console

    for line in got.lines():
        console().print(f"{got.deployment} {line}", markup=False)
