"""Recipes written for other tools, turned into inkctl recipes (``inkctl import``).

Two formats are read:
- sparkrun / spark-vllm-docker recipes: ``model``, ``runtime`` (vllm | sglang), ``container``
  (the image), ``min_nodes``/``max_nodes`` (or ``solo_only``), ``defaults`` (values that fill the
  command's ``{placeholders}``), ``env`` and ``command`` (the serve command line). They target
  DGX Sparks, so the hardware is one GB10 per host unless told otherwise.
- vLLM recipes-repository configs (``GPT-OSS_Hopper.yaml``...): a flat mapping of ``vllm serve``
  options without their dashes (``max-num-batched-tokens: 8192``, ``no-enable-prefix-caching:
  true``), the file ``vllm serve --config`` reads. The model, image and hardware are not in it.

The command line is read flag by flag: a flag inkctl types (parallelism, port, memory, parsers,
data/expert parallelism, a speculative draft) becomes its field, any other passes verbatim in
``engine.args.extra``; what has no place in a recipe is listed as not mapped. Pure: no I/O here.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from inkctl import runtimes
from inkctl.errors import InkctlError

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class Imported:
    kind: str  # "sparkrun" | "vllm-config"
    doc: dict
    unmapped: list[str] = field(default_factory=list)


# flag -> (engine.args field or a special key, takes a value)
_ARGS = {
    "--tensor-parallel-size": "tensor_parallel", "-tp": "tensor_parallel", "--tp-size": "tensor_parallel", "--tp": "tensor_parallel",
    "--pipeline-parallel-size": "pipeline_parallel", "-pp": "pipeline_parallel", "--pp-size": "pipeline_parallel",
    "--port": "port", "--host": "bind_host",
    "--max-model-len": "max_model_len", "--context-length": "max_model_len",
    "--gpu-memory-utilization": "memory_fraction", "--mem-fraction-static": "memory_fraction",
    "--kv-cache-dtype": "kv_cache_dtype", "--attention-backend": "attention_backend",
    "--reasoning-parser": "reasoning_parser", "--tool-call-parser": "tool_call_parser",
    "--max-num-seqs": "max_running_requests", "--max-running-requests": "max_running_requests",
    "--data-parallel-size": "dp", "-dp": "dp", "--dp-size": "dp", "--dp": "dp",
    "--ep-size": "ep_size", "--ep": "ep_size", "--all2all-backend": "a2a", "--moe-a2a-backend": "a2a",
    "--deepep-mode": "deepep_mode",
    "--served-model-name": "served_name", "--revision": "revision",
    "--speculative-config": "spec_config", "--speculative-algorithm": "spec_method",
    "--speculative-draft-model-path": "spec_draft", "--speculative-num-steps": "spec_steps",
    "--speculative-eagle-topk": "spec_topk", "--speculative-num-draft-tokens": "spec_tokens",
}
_SWITCHES = {"--enforce-eager": "enforce_eager", "--disable-cuda-graph": "enforce_eager",
             "--trust-remote-code": "trust_remote_code", "--enable-expert-parallel": "ep",
             "--enable-dp-attention": "dp_attention", "--enable-eplb": "eplb",
             "--enable-auto-tool-choice": "auto_tool_choice", "--headless": "headless"}
_INTS = {"tensor_parallel", "pipeline_parallel", "port", "max_model_len", "max_running_requests", "dp", "ep_size",
         "spec_steps", "spec_topk", "spec_tokens"}
_PLANNED = {"--nnodes", "--node-rank", "--master-addr", "--master-port", "--dist-init-addr", "--data-parallel-size-local",
            "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-start-rank"}


def detect(doc) -> str | None:
    if not isinstance(doc, dict):
        return None
    if "command" in doc and ("model" in doc or "container" in doc):
        return "sparkrun"
    if doc and all(isinstance(k, str) and re.fullmatch(r"[a-z0-9][a-z0-9-_.]*", k) for k in doc) and "name" not in doc \
            and "engine" not in doc:
        return "vllm-config"
    return None


def convert(doc, *, name: str, model: str | None = None, accelerator: str | None = None,
            gpus_per_host: int | None = None, nodes: int | None = None, image: str | None = None) -> Imported:
    kind = detect(doc)
    if kind == "sparkrun":
        return _sparkrun(doc, name, model, accelerator, gpus_per_host, nodes, image)
    if kind == "vllm-config":
        return _vllm_config(doc, name, model, accelerator, gpus_per_host, nodes, image)
    raise InkctlError("not a recipe inkctl can import: neither a sparkrun recipe (model, container, command) "
                      "nor a vLLM recipes config (a flat mapping of vllm serve options)",
                      hint="an inkctl recipe needs no import: run inkctl validate on it")


def _base(name, model, accelerator, gpus_per_host, nodes, kind, image, version) -> dict:
    from inkctl.recipe.accelerators import normalize

    accelerator = normalize(accelerator) if accelerator else accelerator
    return {
        "name": _slug(name),
        "model": {"repo": model},
        "hardware": {"accelerator": accelerator, "nodes": nodes, "gpus_per_host": gpus_per_host},
        "engine": {"kind": kind, "version": version, "image": {"ref": image}, "args": {}},
        "container": {"runtime": runtimes.DEFAULT, "gpus": "all", "ipc": "host", "network": "host",
                      "mounts": [{"source": "${HF_HOME}", "target": "/root/.cache/huggingface"}]},
    }


def _sparkrun(doc: dict, name, model, accelerator, gpus_per_host, nodes, image) -> Imported:
    unmapped: list[str] = []
    defaults = {str(k): v for k, v in (doc.get("defaults") or {}).items()}
    command = str(doc.get("command") or "")
    missing = sorted({m for m in PLACEHOLDER.findall(command) if m not in defaults})
    if missing:
        raise InkctlError(f"command uses {', '.join('{' + m + '}' for m in missing)} but defaults do not give "
                          f"{'it' if len(missing) == 1 else 'them'}", hint="add them under defaults")
    text = PLACEHOLDER.sub(lambda m: str(defaults[m.group(1)]), command.replace("\\\n", " "))
    argv = shlex.split(text)
    runtime = str(doc.get("runtime") or ("sglang" if "sglang" in text.split("\n", 1)[0] else "vllm"))
    if runtime not in ("vllm", "sglang"):
        raise InkctlError(f"runtime {runtime!r}: inkctl runs vllm and sglang", hint="convert it by hand")
    served, argv = _split_program(argv, runtime)
    container = doc.get("container")
    if isinstance(container, dict):
        container = container.get("image")
    min_nodes = doc.get("min_nodes") or (1 if doc.get("solo_only") else None)
    max_nodes = doc.get("max_nodes")
    n = nodes or min_nodes or 1
    if max_nodes and max_nodes != min_nodes:
        unmapped.append(f"max_nodes: {max_nodes} (inkctl deploys a fixed number of hosts: {n})")
    out = _base(name, model or doc.get("model") or served, accelerator or "dgx-spark-gb10", gpus_per_host or 1, n,
                runtime, image or container, f"sparkrun recipe ({doc.get('container') or 'image'})")
    if doc.get("description"):
        out["description"] = str(doc["description"])
    env = {str(k): str(v) for k, v in (doc.get("env") or {}).items()}
    if env:
        out["container"]["env"] = env
    unmapped += _apply_flags(out, argv, runtime)
    for key in sorted(set(doc) - {"model", "runtime", "container", "min_nodes", "max_nodes", "solo_only", "defaults",
                                 "env", "command", "name", "description"}):
        unmapped.append(f"{key}: {_short(doc[key])} (no place in an inkctl recipe)")
    out["provenance"] = {"source": f"imported from a sparkrun recipe ({doc.get('name') or name})", "status": "draft"}
    return Imported("sparkrun", out, unmapped)


def _vllm_config(doc: dict, name, model, accelerator, gpus_per_host, nodes, image) -> Imported:
    if not model:
        raise InkctlError("a vLLM recipes config names no model", hint="pass --model ORG/NAME")
    if not accelerator or not gpus_per_host:
        raise InkctlError("a vLLM recipes config names no hardware",
                          hint="pass --accelerator NAME and --gpus-per-host N (e.g. --accelerator h200 --gpus-per-host 8)")
    argv: list[str] = []
    for key, value in doc.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            argv.append("--no-" + key if not key.startswith("no-") else "--" + key[3:])
        else:
            argv += [flag, json.dumps(value) if isinstance(value, (dict, list)) else str(value)]
    out = _base(name, model, accelerator, gpus_per_host, nodes or 1, "vllm", image or "vllm/vllm-openai:latest",
                "as the vLLM recipes config targets (set engine.version)")
    unmapped = _apply_flags(out, argv, "vllm")
    out["provenance"] = {"source": f"imported from a vLLM recipes config ({name})", "status": "draft"}
    return Imported("vllm-config", out, unmapped)


def _split_program(argv: list[str], runtime: str) -> tuple[str | None, list[str]]:
    """The served model and the options, the program's own words removed."""
    if runtime == "vllm":
        if argv[:2] == ["vllm", "serve"]:
            rest = argv[2:]
            if rest and not rest[0].startswith("-"):
                return rest[0], rest[1:]
            return None, rest
        return None, argv
    i = next((k for k, a in enumerate(argv) if a.startswith("-") and a != "-m"), len(argv))
    rest, served = argv[i:], None
    for flag in ("--model-path", "--model"):
        if flag in rest:
            j = rest.index(flag)
            served = rest[j + 1] if j + 1 < len(rest) else None
            rest = rest[:j] + rest[j + 2:]
    return served, rest


def _apply_flags(out: dict, argv: list[str], runtime: str) -> list[str]:
    args, model, unmapped = out["engine"]["args"], out["model"], []
    extra: list[str] = []
    spec: dict = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        flag, eq, inline = a.partition("=")
        if flag in ("--model", "--model-path") and i + 1 < len(argv):
            if not model.get("repo"):
                model["repo"] = argv[i + 1]
            i += 2
            continue
        if flag in _SWITCHES:
            key = _SWITCHES[flag]
            if key == "trust_remote_code":
                model["trust_remote_code"] = True
            elif key == "ep":
                args.setdefault("expert", {})
            elif key == "dp_attention":
                args.setdefault("data_parallel", {})["attention"] = True
            elif key == "eplb":
                args.setdefault("expert", {})["eplb"] = True
            elif key == "enforce_eager":
                args["enforce_eager"] = True
            elif key == "headless":
                unmapped.append("--headless (inkctl plans it on the hosts after the first)")
            i += 1
            continue
        if flag in _ARGS:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
            i += 1 if eq else 2
            _set(_ARGS[flag], value, args, model, spec, runtime)
            continue
        if flag in _PLANNED:
            unmapped.append(f"{flag} (inkctl plans it per host)")
            i += 1 if eq or i + 1 >= len(argv) or argv[i + 1].startswith("-") else 2
            continue
        extra.append(a)
        if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            extra[-1] = f"{a}={argv[i + 1]}"
            i += 2
        else:
            i += 1
    if "auto_tool_choice" in spec and not args.get("tool_call_parser"):
        extra.append("--enable-auto-tool-choice")
    spec.pop("auto_tool_choice", None)
    if spec:
        out["speculative"] = spec
    if extra:
        args["extra"] = extra
    return unmapped


def _set(key: str, value: str, args: dict, model: dict, spec: dict, runtime: str) -> None:
    v: object = int(value) if key in _INTS and value.lstrip("-").isdigit() else value
    if key == "memory_fraction":
        v = float(value)
    if key in ("served_name", "revision"):
        model[key] = v
    elif key == "dp":
        args.setdefault("data_parallel", {})["size"] = v
    elif key == "ep_size":
        args.setdefault("expert", {})["size"] = v
    elif key == "a2a":
        args.setdefault("expert", {})["all2all_backend"] = v
    elif key == "deepep_mode":
        args.setdefault("expert", {})["deepep_mode"] = v
    elif key == "spec_config":
        cfg = json.loads(value)
        spec["method"] = cfg.pop("method", "draft_model")
        if "model" in cfg:
            spec["draft"] = {"repo": cfg.pop("model")}
        if "num_speculative_tokens" in cfg:
            spec["num_speculative_tokens"] = cfg.pop("num_speculative_tokens")
        if cfg:
            spec.setdefault("_rest", {}).update(cfg)
    elif key == "spec_method":
        spec["method"] = v
    elif key == "spec_draft":
        spec["draft"] = {"repo": v}
    elif key == "spec_steps":
        spec["num_steps"] = v
    elif key == "spec_topk":
        spec["eagle_topk"] = v
    elif key == "spec_tokens":
        spec["num_speculative_tokens"] = v
    else:
        args[key] = v


def finish(imp: Imported) -> Imported:
    """Keys of a speculative config inkctl does not type are reported, not dropped silently."""
    spec = imp.doc.get("speculative")
    if spec and "_rest" in spec:
        rest = spec.pop("_rest")
        imp.unmapped.append(f"--speculative-config keys {', '.join(sorted(rest))} ({_short(rest)}): "
                            "not typed by inkctl; add them by hand if needed")
    return imp


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return s[:63] or "imported"


def _short(value) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."
