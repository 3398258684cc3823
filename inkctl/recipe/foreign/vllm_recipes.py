"""vLLM recipes-repository model files (vllm-project/recipes, ``models/<org>/<model>.yaml``).

A model file describes a model for the recipes site, which builds a ``vllm serve`` command from
it (``src/lib/command-synthesis.js``). Import builds the single-node tensor-parallel command the
same way: ``model.base_args``, the variant's ``extra_args`` (not the default variant's), the
tensor-parallel size, the ``hardware_overrides`` blocks for the GPU (its generation, else its
brand: the model file's, then the variant's), then the args of each feature the site turns on
by default (every feature not in ``opt_in_features``; a feature with ``modes`` gives its
``default_mode``'s; a feature's own hardware block replaces its args). The env is
``model.base_env``, the variant's ``extra_env`` and the hardware blocks' ``extra_env``. ``meta``, ``guide``, ``dependencies`` and the
other strategies are documentation for people: listed as not used, never turned into flags.
Pure: no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.errors import InkctlError
from inkctl.recipe.foreign import flags as foreign_flags

if TYPE_CHECKING:
    from inkctl.recipe.foreign.common import Imported, Options

_USED = {"model", "variants", "features", "opt_in_features", "strategy_overrides"}
_DOCS = {"meta", "guide", "dependencies", "compatible_strategies", "hardware_overrides", "kv_offload_support",
         "default_strategy", "strategy_hardware", "strategy_min_gpus", "hardware_opt_in_features", "hardware_notes",
         "omni"}


def convert_model_file(doc: dict, opts: "Options") -> "Imported":
    from inkctl.recipe.foreign.common import Imported, base, take

    model = doc["model"]
    if doc.get("omni"):
        from inkctl.recipe.foreign.sparkrun import Refused

        raise Refused("a vLLM-Omni model file (image, audio or video generation): inkctl serves text models with "
                      "vLLM and SGLang", key="omni", hint="serve it with vLLM-Omni as the model file says")
    variant_name, variant = _variant(doc, opts)
    gpus = _gpus(doc, opts)
    tp = _tp(doc, variant, gpus)
    repo = opts.model or variant.get("model_id") or model["model_id"]
    out = base(opts, str(repo), str(opts.accelerator), tp, opts.nodes or 1, "vllm", opts.image or _image(model, variant))
    imp = Imported("vllm-recipe", out)
    if tp < gpus:
        imp.notes.append(f"the model file serves on {tp} GPU(s) (tensor parallel {tp}): hardware.gpus_per_host {tp}")
    keys = hardware_keys(str(opts.accelerator))
    _, parsed = foreign_flags.options(_argv(doc, variant_name, variant, tp, keys))
    take(imp, foreign_flags.apply(out, parsed, "vllm", ray=False))
    env = _env(doc, variant_name, variant, keys)
    if env:
        out["container"]["env"] = env
    title = (doc.get("meta") or {}).get("title") or model["model_id"]
    out["provenance"] = {"source": f"imported from the vLLM recipes model file of {title} (variant {variant_name}, "
                                   f"single-node tensor parallel)", "status": "draft"}
    imp.unmapped += _unused(doc)
    return imp


def _gpus(doc: dict, opts: "Options") -> int:
    if not opts.accelerator or not opts.gpus_per_host:
        verified = ", ".join(k for k, v in ((doc.get("meta") or {}).get("hardware") or {}).items() if v == "verified")
        raise InkctlError("a vLLM recipes model file names GPU families, not the hardware to run on",
                          hint="pass --accelerator NAME and --gpus-per-host N" + (f" (verified there: {verified})" if verified else ""))
    return opts.gpus_per_host


def hardware_keys(accelerator: str) -> list[str]:
    """The keys of a hardware_overrides map that apply, most specific first: the GPU's id, its
    generation (hopper, blackwell...), its brand (nvidia, amd)."""
    from inkctl.recipe.accelerators import lookup

    acc = lookup(accelerator)
    if acc is None:
        return [accelerator.replace("-", "_")]
    gen = {"8": "ampere", "9": "hopper", "10": "blackwell", "11": "blackwell", "12": "blackwell"}.get(
        acc.arch.split(".")[0]) if acc.vendor == "nvidia" else "amd"
    if acc.arch == "8.9":
        gen = "ada"
    return [acc.name.replace("-", "_")] + [k for k in (gen, acc.vendor) if k]


def _override(overrides, keys: list[str], *, exact: bool = False) -> dict:
    """The first block of OVERRIDES for KEYS (a generation, then the brand; with EXACT the GPU's id only)."""
    if not isinstance(overrides, dict):
        return {}
    for k in keys[:1] if exact else keys[1:]:
        if isinstance(overrides.get(k), dict):
            return overrides[k]
    return {}


def _argv(doc: dict, variant_name: str, variant: dict, tp: int, keys: list[str]) -> list[str]:
    """The site's order: base_args, the variant's extra_args (its exact-GPU block's too), the
    parallel size, the hardware blocks (the model file's, then the variant's, for the generation),
    the features."""
    argv = [str(a) for a in doc["model"].get("base_args") or []]
    if variant_name != "default":
        argv += [str(a) for a in variant.get("extra_args") or []]
    argv += [str(a) for a in _override(variant.get("hardware_overrides"), keys, exact=True).get("extra_args") or []]
    argv += ["--tensor-parallel-size", str(tp)]
    for block in (_override(doc.get("hardware_overrides"), keys), _override(variant.get("hardware_overrides"), keys)):
        argv += [str(a) for a in block.get("extra_args") or []]
    return argv + _feature_args(doc, keys)


def _env(doc: dict, variant_name: str, variant: dict, keys: list[str]) -> dict[str, str]:
    env = dict(doc["model"].get("base_env") or {})
    if variant_name != "default":
        env.update(variant.get("extra_env") or {})
    for block in (_override(doc.get("hardware_overrides"), keys), _override(variant.get("hardware_overrides"), keys),
                  _override(variant.get("hardware_overrides"), keys, exact=True)):
        env.update(block.get("extra_env") or {})
    return {str(k): str(v) for k, v in env.items()}


def _variant(doc: dict, opts: "Options") -> tuple[str, dict]:
    variants = doc.get("variants") or {"default": {}}
    name = opts.variant or ("default" if "default" in variants else next(iter(variants)))
    if name not in variants:
        raise InkctlError(f"no variant {name!r} in this model file", hint=f"one of: {', '.join(variants)}")
    return name, variants[name] or {}


def _tp(doc: dict, variant: dict, gpus: int) -> int:
    for raw in (variant.get("tp"), ((doc.get("strategy_overrides") or {}).get("single_node_tp") or {}).get("tp")):
        if isinstance(raw, dict):
            raw = raw.get("default")
        if isinstance(raw, int) and raw > 0:
            return min(raw, gpus)
    return gpus


def _feature_args(doc: dict, keys: list[str]) -> list[str]:
    out: list[str] = []
    opt_in = set(doc.get("opt_in_features") or [])
    for name, feat in (doc.get("features") or {}).items():
        if name in opt_in or not isinstance(feat, dict):
            continue
        if feat.get("strategies") and "single_node_tp" not in feat["strategies"]:
            continue
        if isinstance(feat.get("modes"), dict):
            feat = feat["modes"].get(feat.get("default_mode")) or {}
        block = _override(feat.get("hardware_overrides"), keys)  # replaces the feature's args
        out += [str(a) for a in (block.get("args") if "args" in block else feat.get("args")) or []]
    return out


def _image(model: dict, variant: dict) -> str:
    pinned = variant.get("docker_image") or model.get("docker_image")
    if isinstance(pinned, dict):
        pinned = pinned.get("nvidia")
    if isinstance(pinned, str):
        return pinned
    if model.get("nightly_required"):
        return "vllm/vllm-openai:nightly"
    least = variant.get("min_vllm_version") or model.get("min_vllm_version")
    return f"vllm/vllm-openai:v{str(least).lstrip('v')}" if least else "vllm/vllm-openai:latest"


def _unused(doc: dict) -> list[str]:
    out = []
    for key in doc:
        if key in _USED:
            continue
        why = "documentation for people, not used" if key in _DOCS else "no place in an inkctl recipe"
        out.append(f"{key} ({why})")
    if doc.get("opt_in_features"):
        out.append(f"opt-in features {', '.join(map(str, doc['opt_in_features']))} (off, as on the recipes site)")
    return out
