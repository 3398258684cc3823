"""A deployment's identity: the recipe hash that labels its containers.

Only what changes the running deployment goes into the hash: not the description,
provenance, measured results or capabilities.
"""

from __future__ import annotations

import hashlib
import json

from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe

# fleet: a replica is planned from a copy without it; the router has a hash of its own
_NOT_DEPLOYED = {"description", "provenance", "results", "capabilities", "hosts", "fleet"}


def recipe_hash(recipe: Recipe, hosts: list[Host] | None = None, image: str | None = None) -> str:
    data = recipe.model_dump(mode="json", exclude=_NOT_DEPLOYED)
    if not recipe.compile_cache.enabled:  # off: the deployment is what it was before the field existed
        data.pop("compile_cache", None)
    data["__hosts"] = [h.model_dump(mode="json") for h in hosts or []]
    data["__image"] = image
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:12]
