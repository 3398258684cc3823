"""Help that reads like a manual: placeholders (RECIPE, FILE, KEY=VALUE, SECONDS) for every value,
and each command's whole one-line summary in the command list.

Typer's defaults vary by version (``{recipe}``, ``<list[str]>``, ``<float range>``, summaries cut
with ``...``); this fixes them once, on the click command tree, from click's public attributes.
"""

from __future__ import annotations

import re
from typing import Any

# options whose placeholder a type cannot tell
NAMED = {"--set": "KEY=VALUE", "--hosts": "FILE", "--output": "text|json", "--emit": "DIR", "--format": "FORMAT",
         "--skip-check": "CHECK", "--tail": "N|all", "--since": "TIME", "--host": "HOST", "--rank": "N"}


def summary(help_text: str) -> str:
    """The first paragraph of a command's help, on one line."""
    return " ".join(help_text.strip().split("\n\n")[0].split())


def placeholder(param: Any) -> str:
    """A metavar from the option's name or type: --timeout -> SECONDS, a path -> FILE, an int -> N."""
    long = max(param.opts, key=len)
    if long in NAMED:
        return NAMED[long]
    kind = _kind(param)
    word = long.lstrip("-")
    if "path" in kind:  # --out DIR (export k8s: out_dir) or --out FILE (export slurm: out)
        return "DIR" if "dir" in word or "dir" in (getattr(param, "name", "") or "") else "FILE"
    if "float" in kind:
        return "SECONDS" if re.search(r"timeout|seconds|interval|wait", word) else "NUMBER"
    if "int" in kind:
        return "N"
    return word.upper().replace("-", "_")


def _kind(param: Any) -> str:
    """The value's type, lower-case: click's ParamType name, or the annotation newer typers keep."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None and getattr(desc, "annotation", None) is not None:
        return repr(desc.annotation).lower()
    return type(getattr(param, "type", None)).__name__.lower()


def _argument_name(param: Any) -> str:
    return param.metavar or param.name.upper()


def _argument_usage(param: Any) -> str:
    name = _argument_name(param)
    if name.startswith("["):
        return name
    name += "..." if param.nargs != 1 else ""
    return name if param.required else f"[{name}]"


# `inkctl` alone: the commands in the order a deployment meets them, one line each (an 80-column
# screen); `inkctl COMMAND --help` keeps the whole text
LISTING = {
    "init": "Start a project here: a bundled recipe and an inventory for it",
    "recipes": "The bundled recipes, by the names every command takes",
    "validate": "Check recipes: every problem located, with its code and fix",
    "plan": "What `up` will run: per rank the host, image and exact argv",
    "import": "Turn a sparkrun or vLLM recipes file into an inkctl recipe",
    "doctor": "The preflight alone: ssh, runtime, GPUs, image, ports, weights",
    "build": "Build the recipe's patched image where it is missing",
    "lock": "Pin digests, hashes and the model's files in RECIPE.lock.json",
    "weights": "The pinned model on every host: the Hub once, then host to host",
    "images": "The recipe's image on every host, streamed host to host",
    "cache": "Compile caches from one host to the others; pin or check them",
    "up": "Bring the deployment up; on any failure remove what it started",
    "status": "Each rank's container: state, health, uptime, image",
    "logs": "Every rank's log, merged, each line prefixed host/rank",
    "watch": "Supervise a running deployment (events, --hook, --restart)",
    "top": "A live table per replica from each engine's /metrics",
    "down": "Remove the deployment from every host",
    "smoke": "Check a running server's answers (the recipe's checks, or --url)",
    "bench": "Measure a running server: a concurrency or request-rate sweep",
    "results": "Saved bench runs: list them, show one, compare two",
    "runs": "The runs recorded here (argv, events, debug log, exit status)",
    "lease": "The deploy lease: who holds it; release a stale one",
    "export": "The deployment for Kubernetes, Slurm, systemd or Prometheus",
    "schema": "The recipe's JSON Schema, or its reference in Markdown",
}


def polish(command: Any, root: bool = True) -> None:
    """Walk the command tree once, before parsing. LISTING is the top level's only: a group's own
    commands (``lease status``) keep their own summaries."""
    subs = getattr(command, "commands", None)
    if root and subs is not None and set(subs) & set(LISTING):
        order = [n for n in LISTING if n in subs] + sorted(n for n in subs if n not in LISTING)
        command.list_commands = lambda ctx: order
        for name, line in LISTING.items():
            if name in subs:
                subs[name].short_help = line
    for cmd in [command, *getattr(command, "commands", {}).values()]:
        if cmd is not command and hasattr(cmd, "commands"):
            polish(cmd, root=False)
        if cmd.help and not cmd.short_help:
            cmd.short_help = summary(cmd.help)
        for p in cmd.params:
            if getattr(p, "param_type_name", "") == "argument":
                p.get_usage_pieces = (lambda ctx, p=p: [_argument_usage(p)])
                p.get_help_record = (lambda ctx, p=p: (_argument_name(p).strip("[]"), (p.help or "") + ("" if p.required else "  [optional]")))
            elif not getattr(p, "is_flag", False) and not getattr(p, "count", False) and p.metavar is None and p.opts:
                p.metavar = placeholder(p)
