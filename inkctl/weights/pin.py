"""``inkctl lock``'s part for the model: its commit and the manifest of the files it needs."""

from __future__ import annotations

from inkctl.weights.manifest import Manifest, managed


def pin_model(loaded) -> Manifest | None:
    """The model's pin, asked of the Hub; None when inkctl does not manage the recipe's weights
    (model.weights.manage is false, or the Hub cache is not on a host path)."""
    if not managed(loaded.recipe):
        return None
    from inkctl.weights.hub import pin

    return pin(loaded.recipe)
