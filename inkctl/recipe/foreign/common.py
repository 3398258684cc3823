"""What the importers share (recipe/foreign/convert.py, recipe/foreign/vllm_recipes.py): the options, the result,
the recipe skeleton and the release an image names. Pure: no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from inkctl import runtimes
from inkctl.recipe.foreign import flags as foreign_flags

UNKNOWN_VERSION = "unknown"  # engine.version of an import whose image names no release: validate warns
_RELEASE = re.compile(r"^v?\d+\.\d+\.\d+(?:\.?post\d+)?")


@dataclass
class Options:
    """What the command line adds to or overrides in the imported recipe."""

    name: str
    model: str | None = None
    accelerator: str | None = None
    gpus_per_host: int | None = None
    nodes: int | None = None
    image: str | None = None
    variant: str | None = None


@dataclass
class Imported:
    kind: str  # "sparkrun" | "vllm-recipe" | "vllm-config"
    doc: dict
    unmapped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what import changed or inferred, to read before up
    dropped: dict[str, str] = field(default_factory=dict)  # engine flags left to inkctl's plan, and why


def version_of(image: str | None) -> str:
    """The release an image tag names ('vllm/vllm-openai:v0.19.1' -> 'v0.19.1'), else UNKNOWN_VERSION
    with the image, which validate warns about: import never invents a release."""
    ref = (image or "").rsplit("/", 1)[-1]
    tag = ref.split(":", 1)[1] if ":" in ref else ""
    m = _RELEASE.match(tag)
    if m:
        return m.group(0)
    return f"{UNKNOWN_VERSION} (the image {image or '(none)'} names no release)"


def base(opts: Options, model: str | None, accelerator: str, gpus_per_host: int, nodes: int, kind: str,
         image: str | None) -> dict:
    from inkctl.recipe.accelerators import normalize

    return {
        "name": slug(opts.name),
        "model": {"repo": model},
        "hardware": {"accelerator": normalize(accelerator) if accelerator else accelerator, "nodes": nodes,
                     "gpus_per_host": gpus_per_host},
        "engine": {"kind": kind, "version": version_of(image), "image": {"ref": image}, "args": {}},
        "container": {"runtime": runtimes.DEFAULT, "gpus": "all", "ipc": "host", "network": "host",
                      "mounts": [{"source": "${HF_HOME}", "target": "/root/.cache/huggingface"}]},
    }


def take(imp: Imported, mapped: foreign_flags.Mapped) -> None:
    """The options' mapping into the import: notes, flags left to the plan, verbatim extra."""
    imp.notes += mapped.notes
    imp.dropped.update(mapped.dropped)
    if mapped.extra:
        imp.doc["engine"]["args"]["extra"] = mapped.extra


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return s[:63] or "imported"
