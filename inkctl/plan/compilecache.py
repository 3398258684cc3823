"""The engines' compile and kernel caches on a host path, kept between boots (``compile_cache``).

A cold boot compiles: vLLM's torch.compile (``VLLM_CACHE_ROOT``), Inductor and Triton kernels,
FlashInfer's and DeepGEMM's JIT. Those artefacts are only valid for the same engine build, GPU
architecture, model and parallel layout, so each combination gets its own directory, named by
a key of exactly those (``<kind>-sm<cc>-<hash>``), mounted into every rank at ``CONTAINER_DIR``
with the engines' cache variables pointing inside it. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json

from inkctl.runtimes.spec import Mount
from inkctl.recipe.model import Recipe

CONTAINER_DIR = "/root/.cache/inkctl-compile"



def key_fields(r: Recipe, image: str | None = None) -> dict:
    """What invalidates the artefacts: engine and its build, GPU architecture, model, layout."""
    e, a = r.engine, r.engine.args
    return {"engine": e.kind, "image": image or e.image.ref, "image_digest": e.image.digest,
            "compute_capability": r.hardware.compute_capability, "model": r.model.repo,
            "revision": r.model.revision, "tensor_parallel": a.tensor_parallel,
            "pipeline_parallel": a.pipeline_parallel, "data_parallel": a.data_parallel.size,
            "nodes": r.hardware.nodes}


def key(r: Recipe, image: str | None = None) -> str:
    blob = json.dumps(key_fields(r, image), sort_keys=True).encode()
    arch = r.hardware.gfx_target if r.hardware.vendor == "amd" else f"sm{(r.hardware.compute_capability or '').replace('.', '')}"
    return f"{r.engine.kind}-{arch}-{hashlib.sha256(blob).hexdigest()[:16]}"


def host_dir(r: Recipe, root: str, image: str | None = None) -> str:
    """This recipe's cache directory under the host's cache root (``compile_cache.path``)."""
    return f"{root.rstrip('/')}/{key(r, image)}"


def mount(r: Recipe, root: str, image: str | None = None) -> Mount:
    return Mount(host_dir(r, root, image), CONTAINER_DIR, False)


def env(r: Recipe) -> list[tuple[str, str]]:
    if not r.compile_cache.enabled:
        return []
    from inkctl.recipe.engine_registry import spec_of

    # each engine's (and its libraries') cache location variables, relative to CONTAINER_DIR
    return [(name, f"{CONTAINER_DIR}/{sub}") for name, sub in spec_of(r.engine.kind).compile_cache_env]
