"""What the Slurm job depends on besides the recipe: the image to run and the pins it asserts
(the lock's image digest, hotfix hashes, the model's files). Reading local files is loading input."""

from __future__ import annotations

from dataclasses import replace

from inkctl.export.slurm import SlurmJob, SlurmOptions, export_slurm
from inkctl.recipe.reading.source import Loaded


def job_for(loaded: Loaded, options: SlurmOptions, *, inventory: bool = False, image: str | None = None) -> SlurmJob:
    from inkctl.plan.inputs import hotfix_inputs, require_trusted, weights_pinned
    from inkctl.recipe.lockfile import read_pins

    require_trusted(loaded, patches=False)  # it runs an image built and pushed earlier
    pins, files = hotfix_inputs(loaded)
    notes = []
    if image is None:
        image, note = _image(loaded)
        notes += [note] if note else []
    ref = image or loaded.recipe.engine.image.ref
    lock = read_pins(loaded)
    pin = loaded.recipe.engine.image.digest or lock.get(f"image:{ref}") or lock.get(f"image:{loaded.recipe.engine.image.ref}")
    job = export_slurm(loaded.recipe, options, hosts=loaded.hosts if inventory else None, image=image, image_pin=pin,
                       hotfix_pins=pins, hotfix_files=files, weights_pinned=weights_pinned(loaded),
                       weights=_weights(loaded))
    return replace(job, notes=(*job.notes, *notes))


def _image(loaded: Loaded) -> tuple[str | None, str | None]:
    """A patched image: the one `inkctl build --push` recorded, else the content-addressed tag that
    `inkctl build` gives it, which must then be on every node."""
    if loaded.recipe.patches.mode != "build":
        return None, None
    from inkctl.plan.inputs import built_image
    from inkctl.recipe.lockfile import read_pins

    tag = built_image(loaded)
    pushed = read_pins(loaded).get(f"push:{tag}")
    if pushed:
        return pushed, None
    return tag, (f"the patched image {tag} must be on every node: `inkctl build {loaded.path} --hosts NODES` "
                 "builds it there, `--local --push REGISTRY` puts it where nodes pull from")


def _weights(loaded: Loaded):
    """(the host cache template, the pinned files) when the lock pins the model and inkctl manages it."""
    from inkctl.recipe.manifest import host_cache_template, managed, read_manifest

    if not managed(loaded.recipe):
        return None
    m = read_manifest(loaded)
    if m is None:
        return None
    return host_cache_template(loaded.recipe), m
