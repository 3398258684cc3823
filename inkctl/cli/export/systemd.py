"""``inkctl export systemd RECIPE``: a unit that keeps ``inkctl watch --restart`` running on a
management machine (not on the GPU hosts: it must outlive any one of them).

The unit runs the same recipe and inventory by absolute path, restarts the watcher itself if it
dies, and leaves the deployment alone when stopped (``watch`` detaches on SIGTERM/SIGINT).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.common.options import HostsOpt, RecipeArg, SetOpt

def systemd(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    output: Optional[Path] = typer.Option(None, "--out", help="Write the unit to FILE instead of stdout."),
    user: Optional[str] = typer.Option(None, "--user", help="Run the watcher as this user (its ~/.ssh holds the keys)."),
    max_restarts_per_hour: int = typer.Option(3, "--max-restarts-per-hour", min=1),
) -> None:
    """A systemd unit running `inkctl watch --restart` for this deployment on a management machine."""
    from inkctl.api.export import systemd as unit_for
    from inkctl.api.target import Target

    unit = unit_for(Target.of(recipe, hosts, set_), python=sys.executable, user=user,
                    max_restarts=max_restarts_per_hour)
    if output:
        output.write_text(unit.text)
        # one command per line: each fits a terminal and copies on its own
        print(f"wrote {output}\n\nnext: install and start it (as root):\n"
              f"  cp {output} /etc/systemd/system/{unit.name}.service\n"
              f"  systemctl daemon-reload\n"
              f"  systemctl enable --now {unit.name}", file=sys.stderr)
    else:
        sys.stdout.write(unit.text)
