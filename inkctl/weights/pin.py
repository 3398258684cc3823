"""``inkctl lock``'s part for the model: its commit and the manifest of the files it needs."""

from __future__ import annotations

from inkctl.recipe.manifest import Manifest, managed


def pin_model(loaded) -> Manifest | None:
    """The model's pin: a local model directory hashed where it lives, else asked of the Hub;
    None when inkctl does not manage the recipe's weights (model.weights.manage is false, or,
    for a Hub model, the Hub cache is not on a host path)."""
    if loaded.recipe.model.local and loaded.recipe.model.weights.manage:
        from inkctl.weights.localdir import pin_local

        return pin_local(loaded.recipe)
    if not managed(loaded.recipe):
        return None
    from inkctl.weights.hub import pin

    return pin(loaded.recipe)


def pin_draft(loaded) -> Manifest | None:
    """The speculative draft model's pin (asked of the Hub), when the recipe has one and inkctl
    manages its weights; None otherwise."""
    from inkctl.recipe.draft import draft_view

    view = draft_view(loaded.recipe)
    if view is None or not managed(view):
        return None
    from inkctl.weights.hub import pin

    return pin(view)
