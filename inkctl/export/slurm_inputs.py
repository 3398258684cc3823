"""What the Slurm job depends on besides the recipe: the image to run and the pins it asserts
(the lock's image digest, hotfix hashes, the model's files). Reading local files is loading input."""

from __future__ import annotations

from inkctl.export.slurm import SlurmJob, SlurmOptions, export_slurm
from inkctl.recipe.source import Loaded


def job_for(loaded: Loaded, options: SlurmOptions, *, inventory: bool = False) -> SlurmJob:
    from inkctl.plan.inputs import hotfix_inputs, require_trusted, weights_pinned
    from inkctl.recipe.lockfile import read_pins

    require_trusted(loaded, patches=False)  # it runs an image built and pushed earlier
    pins, files = hotfix_inputs(loaded)
    image = _image(loaded)
    ref = image or loaded.recipe.engine.image.ref
    lock = read_pins(loaded)
    pin = loaded.recipe.engine.image.digest or lock.get(f"image:{ref}") or lock.get(f"image:{loaded.recipe.engine.image.ref}")
    return export_slurm(loaded.recipe, options, hosts=loaded.hosts if inventory else None, image=image, image_pin=pin,
                        hotfix_pins=pins, hotfix_files=files, weights_pinned=weights_pinned(loaded),
                        weights=_weights(loaded))


def _image(loaded: Loaded) -> str | None:
    """A patched image comes from a registry, as for Kubernetes: the one `inkctl build --push` recorded."""
    if loaded.recipe.patches.mode != "build":
        return None
    from inkctl.cli.export_k8s import _image as pushed

    return pushed(loaded)


def _weights(loaded: Loaded):
    """(the host cache template, the pinned files) when the lock pins the model and inkctl manages it."""
    from inkctl.weights.manifest import host_cache_template, managed, read_manifest

    if not managed(loaded.recipe):
        return None
    m = read_manifest(loaded)
    if m is None:
        return None
    return host_cache_template(loaded.recipe), m
