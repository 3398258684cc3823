"""Recipes written for other tools, turned into inkctl recipes (``inkctl import``).

Three formats are read:
- sparkrun recipes (spark-arena/sparkrun and its registries; the v1 spark-vllm-docker format too):
  ``model``, ``runtime``, ``container`` (the image), ``min_nodes``/``max_nodes``, ``defaults``
  (values that fill the command's ``{placeholders}``), ``env`` and ``command`` (a shell command
  line). The command is rendered exactly as sparkrun renders it (recipe/foreign/sparkrun.py) and read as
  the shell reads it (recipe/foreign/shell.py). They target DGX Sparks: one GB10 per host unless
  told otherwise.
- vLLM recipes-repository model files (``models/<org>/<model>.yaml``: ``meta``, ``model``,
  ``features``, ``variants``...): recipe/foreign/vllm_recipes.py.
- vLLM ``--config`` files (``GPT-OSS_Hopper.yaml``...): a flat mapping of ``vllm serve`` options
  without their dashes. The model, image and hardware are not in it.

The command line is read option by option (recipe/foreign/flags.py): a flag inkctl types becomes
its field, any other passes verbatim in ``engine.args.extra``; what has no place in a recipe is
listed as not mapped, what cannot run as written is refused. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import re

from inkctl.errors import InkctlError
from inkctl.recipe.engine_registry import kinds, spec_of
from inkctl.recipe.foreign import flags as foreign_flags, shell as foreign_shell, sparkrun
from inkctl.recipe.foreign.common import Imported, Options, base, take
from inkctl.recipe.foreign.sparkrun import Refused

__all__ = ["Imported", "Options", "convert", "detect", "finish"]

_SPARKRUN_KEYS = {"model", "runtime", "container", "min_nodes", "max_nodes", "solo_only", "cluster_only", "mode",
                  "defaults", "env", "command", "name", "description", "recipe_version", "sparkrun_version",
                  "metadata", "volumes"}


def detect(doc) -> str | None:
    if not isinstance(doc, dict):
        return None
    if "command" in doc and ("model" in doc or "container" in doc):
        return "sparkrun"
    if isinstance(doc.get("meta"), dict) and isinstance(doc.get("model"), dict) and "model_id" in doc["model"]:
        return "vllm-recipe"
    if doc and all(isinstance(k, str) and re.fullmatch(r"[a-z0-9][a-z0-9-_.]*", k) for k in doc) and "name" not in doc \
            and "engine" not in doc:
        return "vllm-config"
    return None


def convert(doc, opts: Options) -> Imported:
    kind = detect(doc)
    if kind == "sparkrun":
        return _sparkrun(doc, opts)
    if kind == "vllm-recipe":
        from inkctl.recipe.foreign.vllm_recipes import convert_model_file

        return convert_model_file(doc, opts)
    if kind == "vllm-config":
        return _vllm_config(doc, opts)
    raise InkctlError("not a recipe inkctl can import: neither a sparkrun recipe (model, container, command), "
                      "a vLLM recipes model file (meta, model.model_id), nor a vLLM config (flat vllm serve options)",
                      hint="an inkctl recipe needs no import: run inkctl validate on it")


def _sparkrun(doc: dict, opts: Options) -> Imported:
    rendered = sparkrun.render(doc)
    kind, multinode = sparkrun.engine_of(rendered.runtime)
    try:
        cmd = foreign_shell.read(rendered.text)
    except Refused:
        raise
    except InkctlError as e:
        raise Refused(str(e), key="command", text=getattr(e, "text", None), hint=e.hint) from None
    if cmd.others:
        _refuse_others(cmd)
    served, launcher, opts_ = _program(cmd.argv, kind)
    image = opts.image or _container(doc)
    if not image:
        raise Refused("the recipe names no container image (sparkrun builds or picks one)", key="container",
                      hint="pass --image REF, the image the recipe runs in")
    out = base(opts, None, opts.accelerator or "dgx-spark-gb10", opts.gpus_per_host or 1, 1, kind, image)
    imp = Imported("sparkrun", out, notes=list(cmd.notes))
    mapped = foreign_flags.apply(out, opts_, kind, ray=multinode == "ray", values=rendered.values)
    take(imp, mapped)
    _model(out, imp, opts, served, doc)
    _engine_shape(out, imp, kind, multinode, launcher, rendered.runtime)
    _nodes(out, imp, opts, doc)
    _env(out, imp, doc, cmd)
    _mounts(out, doc)
    if doc.get("description") or (doc.get("metadata") or {}).get("description"):
        out["description"] = str(doc.get("description") or doc["metadata"]["description"])
    imp.unmapped += _sparkrun_unmapped(doc, cmd)
    out["provenance"] = {"source": f"imported from a sparkrun recipe ({doc.get('name') or opts.name})", "status": "draft"}
    return imp


def _container(doc: dict) -> str | None:
    c = doc.get("container")
    if isinstance(c, dict):
        c = c.get("image")
    return str(c) if c else None


def _refuse_others(cmd: foreign_shell.ShellCommand) -> None:
    """``export A=B`` before the server is its environment; anything else is refused."""
    rest = [c for c in cmd.others if not re.fullmatch(r"export [A-Za-z_][A-Za-z0-9_]*=.*", c)]
    for c in cmd.others:
        if c not in rest:
            k, _, v = c[len("export "):].partition("=")
            cmd.env[k] = v
    if rest:
        raise Refused(f"the command runs more than the server: {rest[0]!r} (inkctl starts only the engine)",
                      key="command", text=rest[0].split()[0],
                      hint="put what it does in the image (patches) or the environment, and import again")


def _said(argv: list[str]) -> tuple[str, int]:
    """The engine a command runs and how many words start it: the words an engine's spec names
    (``programs``: ``vllm serve``, ``python3 -m sglang.launch_server``); else a ``python -m``
    module or a program whose name holds an engine kind's."""
    for kind in kinds():
        for start in spec_of(kind).programs:
            if tuple(argv[:len(start)]) == start:
                return kind, len(start)
    words = 3 if argv[0].startswith("python") else 1
    text = " ".join(argv[:words])
    return next((k for k in kinds() if k in text), argv[0]), words


def _program(argv: list[str], kind: str) -> tuple[str | None, list[str] | None, list[foreign_flags.Option]]:
    """The served model named before the options, the launcher words (an engine whose recipe
    names its launcher, or a ``python -m`` module), the options."""
    said, words = _said(argv)
    program, rest = argv[:words], argv[words:]
    if said != kind:
        raise Refused(f"the runtime is {kind} but the command runs {' '.join(program)}", key="command",
                      text=program[0], hint="make runtime and command agree")
    lead, opts = foreign_flags.options(rest)
    if len(lead) > 1:
        raise Refused(f"the command gives {len(lead)} words before its options ({' '.join(lead)}): one model at most",
                      key="command", text=lead[1])
    return (lead[0] if lead else None), (program if _launcher_field(kind) or words == 3 else None), opts


def _launcher_field(kind: str):
    """The recipe field that holds the words starting the engine's server, where its section has one."""
    fields: dict = getattr(spec_of(kind).config, "model_fields", {})
    return fields.get("launcher")


def _model(out: dict, imp: Imported, opts: Options, served: str | None, doc: dict) -> None:
    m = out["model"]
    from_flag = m.get("repo")
    repo = opts.model or served or from_flag or doc.get("model")
    if not repo:
        raise Refused("the recipe names no model (model:, or the command's)", key="model", hint="pass --model ORG/NAME")
    m["repo"] = str(repo)
    if doc.get("model") and doc.get("model") != repo and not opts.model:
        what = "the local path" if str(repo).startswith("/") else "the model"
        imp.notes.append(f"the command serves {what} {repo}, not {doc['model']} (model:): kept as the command says")
    if doc.get("model_revision") and "revision" not in m:
        m["revision"] = str(doc["model_revision"])


def _engine_shape(out: dict, imp: Imported, kind: str, multinode: str | None, launcher, runtime: str) -> None:
    e = out["engine"]
    if multinode == "ray":  # sparkrun's vllm-ray (engine_of: only vLLM forms its ranks by Ray)
        e["multinode"] = "ray"
    field = _launcher_field(kind)
    if field is not None and launcher and launcher != field.default:
        e["launcher"] = launcher
    elif field is None and launcher:
        imp.notes.append(f"{' '.join(launcher)} runs as vllm serve (the same server)")
    imp.notes.append(f"sparkrun runtime {runtime}: engine {kind}" + (f", multinode: {multinode}" if multinode else ""))


def _parallel_gpus(args: dict) -> int:
    dp_spec = args.get("data_parallel") or {}
    dp = 1 if dp_spec.get("attention") else dp_spec.get("size", 1)  # DP attention runs inside TP
    return int(args.get("tensor_parallel", 1)) * int(args.get("pipeline_parallel", 1)) * int(dp)


def _nodes(out: dict, imp: Imported, opts: Options, doc: dict) -> None:
    gpus = out["hardware"]["gpus_per_host"]
    need = math.ceil(_parallel_gpus(out["engine"]["args"]) / gpus)
    asked = sparkrun.min_nodes(doc)
    n = opts.nodes or max(asked or 1, need)
    out["hardware"]["nodes"] = n
    if not opts.nodes and n != (asked or 1):
        imp.notes.append(f"hosts: {n} (TP x PP x DP needs {n * gpus} GPUs at {gpus} per host; "
                         f"{'min_nodes says ' + str(asked) if asked else 'the recipe gives no min_nodes'})")
    top = doc.get("max_nodes")
    if top and top != n:
        imp.unmapped.append(f"max_nodes: {top} (inkctl deploys a fixed number of hosts: {n})")


def _env(out: dict, imp: Imported, doc: dict, cmd: foreign_shell.ShellCommand) -> None:
    from inkctl.recipe.checks.rules import SECRET_LOOKING

    raw = doc.get("env") or {}
    if not isinstance(raw, dict):
        raise Refused(f"env must be a mapping, not {type(raw).__name__}", key="env")
    env = {str(k): _env_text(v) for k, v in raw.items()}
    if cmd.env:
        imp.notes.append(f"{', '.join(cmd.env)} set before the program in the command: moved to container.env")
        env.update(cmd.env)
    secrets = {k: {"env": k} for k, v in env.items() if SECRET_LOOKING.search(k) and v and not v.startswith("$")}
    for k in secrets:
        env.pop(k)
        imp.notes.append(f"{k} looked like a secret with its value in the recipe: now secrets.{k} (read from ${k} "
                         "where inkctl runs; the value was not copied)")
    if env:
        out["container"]["env"] = env
    if secrets:
        out["secrets"] = secrets


def _env_text(v) -> str:
    return str(v)  # as sparkrun passes it (True stays 'True')


def _mounts(out: dict, doc: dict) -> None:
    vols = doc.get("volumes")
    if isinstance(vols, dict):
        vols = [f"{k}:{v}" for k, v in vols.items()]
    for v in vols or []:
        parts = str(v).split(":")
        if len(parts) >= 2 and parts[0].startswith(("/", "~", "$")):
            mount: dict[str, object] = {"source": parts[0], "target": parts[1]}
            if len(parts) > 2 and "ro" in parts[2].split(","):
                mount["read_only"] = True
            out["container"]["mounts"].append(mount)


def _sparkrun_unmapped(doc: dict, cmd: foreign_shell.ShellCommand) -> list[str]:
    out = []
    if cmd.wrappers:
        out.append(f"{' '.join(cmd.wrappers)} (the command runs the engine under it; inkctl starts the engine "
                   "itself: not applied)")
    for key in sorted(set(doc) - _SPARKRUN_KEYS - {"model_revision"}):
        out.append(f"{key}: {_short(doc[key])} (no place in an inkctl recipe)")
    meta = sorted(set(doc.get("metadata") or {}) - {"description"})
    if meta:
        out.append(f"metadata: {', '.join(meta)} (sparkrun's notes: not used)")
    return out


def _vllm_config(doc: dict, opts: Options) -> Imported:
    if not opts.model:
        raise InkctlError("a vLLM recipes config names no model", hint="pass --model ORG/NAME")
    if not opts.accelerator or not opts.gpus_per_host:
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
            argv += [flag, json.dumps(value, default=str) if isinstance(value, (dict, list)) else str(value)]
    out = base(opts, opts.model, opts.accelerator, opts.gpus_per_host, opts.nodes or 1, "vllm",
               opts.image or "vllm/vllm-openai:latest")
    imp = Imported("vllm-config", out)
    _, parsed = foreign_flags.options(argv)
    mapped = foreign_flags.apply(out, parsed, "vllm", ray=False)
    take(imp, mapped)
    out["provenance"] = {"source": f"imported from a vLLM config ({opts.name})", "status": "draft"}
    return imp


def finish(imp: Imported) -> Imported:
    """Keys of a speculative config are passed on; an empty extra is not written."""
    for flag, why in imp.dropped.items():
        imp.unmapped.append(f"{flag} ({why})")
    return imp


def _short(value) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."
