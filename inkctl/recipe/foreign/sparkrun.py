r"""sparkrun recipes: the command rendered exactly as sparkrun renders it, the runtime it resolves.

Read from sparkrun itself (spark-arena/sparkrun, ``core/recipe.py``: ``Recipe.build_config_chain``,
``Recipe.render_command``, the ``_RECIPE_RESOLVERS`` and ``resolve_runtime``; the substitution is
``vpd.legacy.arguments.arg_substitute``, vpd 0.9.13 as sparkrun pins it):

- the values are the recipe's ``defaults`` with ``model`` added from the top-level ``model:``
  unless ``defaults`` gives one (``{model}`` needs no default);
- the command is stripped; each ``{...}`` (``\{(.*?)\}``: the shortest run to the next ``}``) whose
  text, braces stripped from both ends, names a value becomes ``str(value)``; any other stays as
  written, braces and all (``${CUDA_HOME:-/usr/local/cuda}`` is shell, not a placeholder); this
  repeats until nothing changes (a default may hold a placeholder);
- a ``\`` followed by spaces before a newline becomes a line continuation.

``{{``/``}}`` are not escapes to sparkrun; they are to ``str.format`` (spark-vllm-docker's
run-recipe, where many recipes come from): recipe/foreign/flags.py reads a value that is JSON only
once unescaped as the author meant it, and says so.

The runtime: ``runtime:`` when given, else the command's program; ``vllm`` (or none) is
``vllm-ray`` when ``defaults.distributed_executor_backend`` is ray or the command passes
``--distributed-executor-backend ray``, else ``vllm-distributed``. Nodes: ``min_nodes``
(``cluster_only``: at least 2; ``solo_only``/``mode: solo``: 1), else what the parallelism needs
on DGX Sparks, one GPU each (TP x PP x DP, sparkrun's ``core/parallelism.py``). Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inkctl.recipe.foreign.shell import Refused

__all__ = ["Refused", "render", "runtime", "engine_of", "min_nodes", "values", "substitute"]

_ARG = re.compile(r"\{(.*?)\}")
_TRAILING_SPACE_CONTINUATION = re.compile(r"\\ +\n")
_RAY_BACKEND = re.compile(r"--distributed-executor-backend\s+ray\b")
_CMD_SGLANG = re.compile(r"^(?:sglang\s+serve|python3?\s+-m\s+sglang\.launch_server)\b")
_CMD_LLAMA_CPP = re.compile(r"^llama-server\b")
_CMD_TRTLLM = re.compile(r"^(?:trtllm-serve|mpirun\b.*trtllm)")
_LEFT = re.compile(r"(?<![\\${])\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")
# sparkrun runtime -> (inkctl engine kind, vLLM multinode)
RUNTIMES = {"vllm-distributed": ("vllm", "native"), "vllm-ray": ("vllm", "ray"), "eugr-vllm": ("vllm", "ray"),
            "sglang": ("sglang", None)}
MAX_ROUNDS = 64


@dataclass
class Rendered:
    text: str  # the command as sparkrun runs it
    runtime: str  # sparkrun's resolved runtime name
    values: dict  # the substitution values


def values(doc: dict) -> dict:
    """sparkrun's config chain without CLI overrides or user config: defaults, then model."""
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise Refused(f"defaults must be a mapping, not {type(defaults).__name__}", key="defaults")
    base = dict(defaults)
    base.setdefault("model", doc.get("model", ""))
    return base


def substitute(text: str, data: dict) -> str:
    """One pass of vpd's arg_substitute."""
    def one(m: re.Match) -> str:
        r = data.get(m.group().strip("}{"))
        return str(r) if r is not None else m.group()

    return _ARG.sub(one, text)


def render(doc: dict) -> Rendered:
    command = doc.get("command")
    if not isinstance(command, str) or not command.strip():
        raise Refused("the recipe has no command", key="command", hint="a sparkrun recipe needs command: vllm serve {model} ...")
    data = values(doc)
    text, last, rounds = command.strip(), None, 0
    while last != text:
        last, text, rounds = text, substitute(text, data), rounds + 1
        if rounds > MAX_ROUNDS:
            raise Refused("the command's placeholders expand without end (a default refers to itself)", key="defaults")
    text = _TRAILING_SPACE_CONTINUATION.sub("\\\n", text)
    left = sorted({x for x in _LEFT.findall(text) if data.get(x) is None})  # a known one inside {{...}}: foreign_flags
    if left:
        names = ", ".join("{" + x + "}" for x in left)
        raise Refused(f"the command uses {names}, which neither defaults nor model gives (sparkrun would pass "
                      f"{names} to the engine as written)", key="command", text="{" + left[0] + "}",
                      hint=f"add {left[0]} under defaults")
    return Rendered(text=text, runtime=runtime(doc), values=data)


def runtime(doc: dict) -> str:
    """sparkrun's resolve_runtime, without CLI overrides."""
    name = str(doc.get("runtime") or "")
    cmd = str(doc.get("command") or "").strip()
    if not name and cmd:
        if _CMD_SGLANG.match(cmd):
            return "sglang"
        if _CMD_LLAMA_CPP.match(cmd):
            return "llama-cpp"
        if _CMD_TRTLLM.match(cmd):
            return "trtllm"
    if name in ("vllm", ""):
        defaults = doc.get("defaults") or {}
        if str(defaults.get("distributed_executor_backend", "")).lower() == "ray" or _RAY_BACKEND.search(cmd):
            return "vllm-ray"
        return "vllm-distributed"
    return name


def engine_of(name: str) -> tuple[str, str | None]:
    if name not in RUNTIMES:
        raise Refused(f"runtime {name!r}: inkctl runs vLLM (sparkrun's vllm, vllm-distributed, vllm-ray) and SGLang",
                      key="runtime" , text=name, hint="this recipe stays with sparkrun; nothing was written")
    return RUNTIMES[name]


def min_nodes(doc: dict) -> int | None:
    """The hosts the recipe asks for, as sparkrun's Recipe reads min_nodes, mode and the flags."""
    n = doc.get("min_nodes")
    nodes = int(n) if isinstance(n, (int, str)) and str(n).isdigit() else None
    if doc.get("mode") == "solo" or doc.get("solo_only"):
        return 1
    if doc.get("cluster_only"):
        return max(nodes or 1, 2)
    return nodes
