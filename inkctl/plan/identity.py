"""A deployment's identity: the recipe hash that labels its containers.

Only what changes the running deployment goes into the hash: not the description,
provenance, measured results or capabilities.
"""

from __future__ import annotations

import hashlib
import json

from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe
from inkctl.recipe.parallel import DataParallel

# fleet: a replica is planned from a copy without it; the router has a hash of its own
_NOT_DEPLOYED = {"description", "provenance", "results", "capabilities", "hosts", "fleet"}

# fields added after deployments were already running, with the value that means "not used": left
# out of the hash at that value, so a recipe that does not use them keeps the hash it had
_ADDED_LATER: dict[tuple[str, ...], object] = {
    ("engine", "args", "data_parallel"): DataParallel().model_dump(mode="json"),
    ("engine", "args", "expert"): None,
    ("speculative",): None,
    ("speculative", "config"): {},
    ("model", "served_aliases"): [],
    ("engine", "args", "head_extra"): [],
    ("engine", "args", "worker_extra"): [],
    ("hardware", "vendor"): "nvidia",
    ("hardware", "gfx_target"): None,
    ("api_key",): None,
}

_CHECKS_ONLY = ("rail_gbps", "bandwidth_floor")


def _drop_unused(data: dict) -> None:
    for path, unused in _ADDED_LATER.items():
        *parents, key = path
        node: object = data
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict) and key in node and node[key] == unused:
            del node[key]


def recipe_hash(recipe: Recipe, hosts: list[Host] | None = None, image: str | None = None) -> str:
    data = recipe.model_dump(mode="json", exclude=_NOT_DEPLOYED)
    if not recipe.compile_cache.enabled:  # off: the deployment is what it was before the field existed
        data.pop("compile_cache", None)
    _drop_unused(data)
    for key in _CHECKS_ONLY:  # what preflight and doctor hold the fabric to: nothing that runs changes
        data.get("network", {}).pop(key, None)
    # local (added later): left out when false, so an inventory that does not use it keeps its hash
    data["__hosts"] = [h.model_dump(mode="json", exclude=None if h.local else {"local"}) for h in hosts or []]
    data["__image"] = image
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
