"""``lease status|release`` below the command line: the deploy lease each up/down/build holds on
every host (``execute.state.deploylock``): who holds it, and breaking a stale one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inkctl.api.target import Target, load
from inkctl.errors import UsageError

if TYPE_CHECKING:
    from inkctl.execute.state.deploylock import Holder


@dataclass
class Lease:
    """What ``lease status`` read (``held``: host -> its holder, None: free) or what ``lease
    release`` did (``released``: host -> whether it was held)."""

    deployment: str
    held: dict[str, Holder | None] | None = None
    released: dict[str, bool] | None = None

    def as_dict(self) -> dict[str, Any]:
        if self.held is not None:
            return {"deployment": self.deployment, "status": {
                h: (None if v is None else {"who": v.who, "pid": v.pid, "command": v.command, "since": v.since})
                for h, v in self.held.items()}}
        return {"deployment": self.deployment, "release": dict(self.released or {})}

    def lines(self) -> list[str]:
        if self.held is not None:
            return [f"{h}: {'free' if v is None else 'held by ' + v.describe()}" for h, v in self.held.items()]
        return [f"{h}: {'released' if v else 'was not held'}" for h, v in (self.released or {}).items()]


def lease(target: Target, verb: str, *, accept_new: bool = False) -> Lease:
    """``verb`` is ``status`` (read who holds the lease on every host) or ``release`` (break it)."""
    from inkctl.execute.hosts.connect import close_all, connect_all
    from inkctl.execute.state import deploylock
    from inkctl.plan.deploy import build_plan

    loaded = load(target, f"lease {verb}", need_hosts=False)
    if loaded.hosts is None:
        raise UsageError(f"lease {verb} needs hosts: pass --hosts FILE or list hosts: in the recipe")
    plan = build_plan(loaded.recipe, loaded.hosts)  # the deployment's name and hosts: no image or pins needed
    transports = connect_all(list(loaded.hosts), accept_new=accept_new)
    try:
        if verb == "status":
            return Lease(plan.deployment, held=deploylock.status(plan, transports))
        return Lease(plan.deployment, released={h: bool(v) for h, v in deploylock.release(plan, transports).items()})
    finally:
        close_all(transports)
