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
    if "path" in kind:
        return "DIR" if "dir" in word else "FILE"
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


def polish(command: Any) -> None:
    """Walk the command tree once, before parsing."""
    for cmd in [command, *getattr(command, "commands", {}).values()]:
        if cmd is not command and hasattr(cmd, "commands"):
            polish(cmd)
        if cmd.help and not cmd.short_help:
            cmd.short_help = summary(cmd.help)
        for p in cmd.params:
            if getattr(p, "param_type_name", "") == "argument":
                p.get_usage_pieces = (lambda ctx, p=p: [_argument_usage(p)])
                p.get_help_record = (lambda ctx, p=p: (_argument_name(p).strip("[]"), (p.help or "") + ("" if p.required else "  [optional]")))
            elif not getattr(p, "is_flag", False) and not getattr(p, "count", False) and p.metavar is None and p.opts:
                p.metavar = placeholder(p)
