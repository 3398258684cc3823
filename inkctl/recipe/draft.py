"""The recipe seen from its draft model: the pinning, copying and checking of weights run on it."""

from __future__ import annotations

from typing import Optional

from inkctl.recipe.model import ModelSpec, ModelWeights, Recipe


def draft_view(r: Recipe) -> Optional[Recipe]:
    """The recipe with the draft in the model's place (same Hub cache, same container), or None."""
    spec = r.speculative
    if spec is None or spec.draft is None:
        return None
    d = spec.draft
    weights = ModelWeights(manage=r.model.weights.manage, cache=r.model.weights.cache, include=d.include, exclude=d.exclude)
    return r.model_copy(update={"model": ModelSpec(repo=d.repo, revision=d.revision, weights=weights)})
