"""How ``up`` replaces the replicas of a fleet whose recipe changed (``fleet.rollout``).

Kept apart from ``fleet.py``: a rollout is about changing a running fleet, not its shape.
"""

from typing import Literal

from pydantic import Field

from inkctl.recipe.fields import Strict


class Rollout(Strict):
    """How `up` of a changed fleet recipe replaces its running replicas."""

    strategy: Literal["rolling", "all_at_once"] = Field("rolling", description="'rolling' (default): one replica at a time: out of the router, drained, replaced, health and smoke checks, back in the router, then the next; the others keep serving. 'all_at_once': every replica replaced together (the whole fleet is down while the new version boots).")
    drain_timeout_s: int = Field(120, ge=0, le=86400, description="Seconds to wait for a replica's requests in flight (the engine's /metrics: running + waiting) to finish once it is out of the router, before it is stopped anyway.")
    surge: bool = Field(False, description="With rolling: when the inventory has room for one more replica (a spare host, or spare GPUs on a shared host), start a replica of the new version there first and put it in the router, then replace the others one at a time (the fleet never serves with fewer than fleet.replicas replicas), then take the extra one out, drained, and remove it. Without room: a rolling update without it, said so.")
