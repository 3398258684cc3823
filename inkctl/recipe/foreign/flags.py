"""An engine command line, option by option, into the fields of an inkctl recipe.

A flag inkctl types (parallelism, port, memory, parsers, data/expert parallelism, a speculative
config) becomes its field when its value fits the field; any other option, or a typed one whose
value the field cannot hold (``--max-model-len auto``), passes verbatim in ``engine.args.extra``
with its values as written. Flags inkctl plans per host (``--nnodes``, ``--headless``...) are
dropped and said so. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from inkctl.recipe.engine_registry import spec_of
from inkctl.recipe.foreign.shell import Refused

# flag -> the field it sets
ARGS = {
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
    "--deepep-mode": "deepep_mode", "--served-model-name": "served_name", "--revision": "revision",
    "--speculative-config": "spec_config", "--speculative-algorithm": "spec_method", "--speculative-algo": "spec_method",
    "--speculative-draft-model-path": "spec_draft", "--speculative-num-steps": "spec_steps",
    "--speculative-eagle-topk": "spec_topk", "--speculative-num-draft-tokens": "spec_tokens",
}
SWITCHES = {"--enforce-eager": "enforce_eager", "--disable-cuda-graph": "enforce_eager",
            "--trust-remote-code": "trust_remote_code", "--enable-expert-parallel": "ep",
            "--enable-dp-attention": "dp_attention", "--enable-eplb": "eplb",
            "--enable-auto-tool-choice": "auto_tool_choice"}
INTS = {"tensor_parallel", "pipeline_parallel", "port", "max_model_len", "max_running_requests", "dp", "ep_size",
        "spec_steps", "spec_topk", "spec_tokens"}
PLANNED = {"--nnodes", "--node-rank", "--master-addr", "--master-port", "--dist-init-addr", "--data-parallel-size-local",
           "--data-parallel-address", "--data-parallel-rpc-port", "--data-parallel-start-rank", "--headless"}
_FLAG = re.compile(r"^--?[A-Za-z]")


@dataclass
class Option:
    flag: str
    values: list[str]
    written: list[str]  # the tokens as they stood


@dataclass
class Mapped:
    """What the options became: recipe fields, verbatim extra, and what was dropped or changed."""

    extra: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)  # flag -> why (inkctl plans it)


def options(argv: list[str]) -> tuple[list[str], list[Option]]:
    """Leading positional words, then each option with the values that follow it."""
    i = next((k for k, a in enumerate(argv) if _FLAG.match(a)), len(argv))
    lead, out = argv[:i], []
    for a in argv[i:]:
        if _FLAG.match(a):
            flag, eq, inline = a.partition("=")
            out.append(Option(flag, [inline] if eq else [], [a]))
        else:
            out[-1].values.append(a)
            out[-1].written.append(a)
    return lead, out


_FORMAT = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def unbrace(value: str, values: dict | None = None) -> str | None:
    """``{{"method":"mtp","num_speculative_tokens":{n}}}`` as the JSON its author meant: str.format's
    reading (``{{``/``}}`` are braces, ``{n}`` a value), which spark-vllm-docker's run-recipe
    applies. sparkrun does not: it passes the doubled braces on, and a placeholder inside them
    stays unfilled (its pattern runs from the first ``{`` to the first ``}``), so the engine's
    JSON reader refuses the value. Only a value that is JSON this way and not as written."""
    if not (value.startswith("{{") and value.endswith("}}")):
        return None
    data = values or {}

    def one(m: re.Match) -> str:
        if m.group(1) is None:
            return m.group()[0]
        return str(data[m.group(1)]) if data.get(m.group(1)) is not None else m.group()

    plain = _FORMAT.sub(one, value)
    return plain if not _is_json(value) and _is_json(plain) else None


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def apply(out: dict, opts: list[Option], kind: str, *, ray: bool, values: dict | None = None) -> Mapped:
    """Place OPTS in OUT; VALUES: the recipe's template values (sparkrun's defaults and model)."""
    m = Mapped()
    spec: dict = {}
    for o in opts:
        _unbrace(o, m, values)
        if spec_of(kind).underscore_flags and o.flag.startswith("--") and "_" in o.flag:
            _dashed(o, m)
        if not _place(o, out, spec, kind, ray, m):
            m.extra += o.written
    if spec.pop("auto_tool_choice", None) and not out["engine"]["args"].get("tool_call_parser"):
        m.extra.append("--enable-auto-tool-choice")
    if spec:
        out["speculative"] = spec
    return m


def _place(o: Option, out: dict, spec: dict, kind: str, ray: bool, m: Mapped) -> bool:
    """Put one option in its field, or drop it as planned; False: it passes verbatim."""
    if o.flag in PLANNED or (ray and o.flag == "--distributed-executor-backend" and o.values == ["ray"]):
        m.dropped[o.flag] = "inkctl plans it per host" if o.flag in PLANNED else "planned by engine.multinode: ray"
        return True
    if o.flag in SWITCHES and not o.values:
        _switch(SWITCHES[o.flag], out, spec)
        return True
    if o.flag in ("--model", "--model-path") and len(o.values) == 1:
        out["model"]["repo"] = o.values[0]
        return True
    return o.flag in ARGS and _typed(ARGS[o.flag], o, out, spec, kind)


def _unbrace(o: Option, m: Mapped, values: dict | None) -> None:
    for k, v in enumerate(o.values):
        plain = unbrace(v, values)
        unfilled = [x for x in _FORMAT.findall(plain or v) if x and (values or {}).get(x) is not None]
        if unfilled:
            raise Refused(f"{o.flag} {v}: sparkrun leaves {{{unfilled[0]}}} unfilled there (its pattern stops at the "
                          "first '}'), and the value is not JSON read the str.format way either", key="command",
                          text=o.flag, hint="write the value out, or the JSON with doubled braces ({{...}})")
        if plain is not None:
            o.values[k] = plain
            o.written = [plain if w == v else (f"{o.flag}={plain}" if w == f"{o.flag}={v}" else w) for w in o.written]
            m.notes.append(f"{o.flag}: {v} read as str.format reads it, {plain} (the JSON its author meant; "
                           "sparkrun would pass the doubled braces on and the engine refuse them)")


def _dashed(o: Option, m: Mapped) -> None:
    """vLLM's parser reads --max_model_len as --max-model-len (the name up to its first '.': the keys
    of a --json-arg.key option keep theirs); inkctl's checks read the dashed name."""
    name, dot, keys = o.flag[2:].partition(".")
    if "_" not in name:
        return
    dashed = "--" + name.replace("_", "-") + dot + keys
    o.written = [dashed + w[len(o.flag):] if w.startswith(o.flag) else w for w in o.written]
    m.notes.append(f"{o.flag} written {dashed}, the name vLLM reads it as")
    o.flag = dashed


def _switch(key: str, out: dict, spec: dict) -> None:
    args = out["engine"]["args"]
    if key == "trust_remote_code":
        out["model"]["trust_remote_code"] = True
    elif key == "ep":
        args.setdefault("expert", {})
    elif key == "dp_attention":
        args.setdefault("data_parallel", {})["attention"] = True
    elif key == "eplb":
        args.setdefault("expert", {})["eplb"] = True
    elif key == "enforce_eager":
        args["enforce_eager"] = True
    elif key == "auto_tool_choice":
        spec["auto_tool_choice"] = True


def _typed(key: str, o: Option, out: dict, spec: dict, kind: str) -> bool:
    """Set the field; False when the value does not fit it (the option then passes verbatim)."""
    if key == "served_name" and o.values:
        return _served(o, out, kind)
    if len(o.values) != 1:
        return False
    value = o.values[0]
    v: object = value
    if key in INTS:
        if not value.lstrip("-").isdigit():
            return False
        v = int(value)
    elif key == "memory_fraction":
        try:
            v = float(value)
        except ValueError:
            return False
    return _set(key, v, value, out, spec)


def _served(o: Option, out: dict, kind: str) -> bool:
    if len(o.values) > 1 and not spec_of(kind).served_aliases:
        return False
    out["model"]["served_name"] = o.values[0]
    if len(o.values) > 1:
        out["model"]["served_aliases"] = o.values[1:]
    return True


def _set(key: str, v: object, value: str, out: dict, spec: dict) -> bool:
    args, model = out["engine"]["args"], out["model"]
    if key == "revision":
        model[key] = v
    elif key == "dp":
        args.setdefault("data_parallel", {})["size"] = v
    elif key in ("ep_size", "a2a", "deepep_mode"):
        name = {"ep_size": "size", "a2a": "all2all_backend", "deepep_mode": "deepep_mode"}[key]
        args.setdefault("expert", {})[name] = v
    elif key == "spec_config":
        return _spec_config(value, spec)
    elif key.startswith("spec_"):
        typed = {"spec_method": "method", "spec_steps": "num_steps", "spec_topk": "eagle_topk",
                 "spec_tokens": "num_speculative_tokens"}.get(key)
        if typed is not None:
            spec[typed] = v
        else:
            spec["draft"] = {"repo": v}
    else:
        args[key] = v
    return True


def _spec_config(value: str, spec: dict) -> bool:
    try:
        cfg = json.loads(value)
    except ValueError as e:
        raise Refused(f"--speculative-config {value!r} is not JSON: {e}", key="command", text="--speculative-config",
                      hint="vLLM reads it as one JSON object, e.g. '{\"method\":\"mtp\",\"num_speculative_tokens\":2}'") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("method", ""), str):
        return False
    cfg = dict(cfg)
    spec["method"] = cfg.pop("method", "draft_model")
    if isinstance(cfg.get("model"), str):
        spec["draft"] = {"repo": cfg.pop("model")}
    n = cfg.get("num_speculative_tokens")
    if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 64:
        spec["num_speculative_tokens"] = cfg.pop("num_speculative_tokens")
    if cfg:
        spec["config"] = cfg
    return True
