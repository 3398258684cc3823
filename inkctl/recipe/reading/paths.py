"""Field paths in a document: ``hosts[1].name`` <-> ``('hosts', 1, 'name')``, and values as a user wrote them."""

from __future__ import annotations

import re
from typing import Any

_PART = re.compile(r"([^.\[\]]+)((?:\[\d+\])*)")


def parse_path(text: str) -> tuple:
    """``hosts[0].address`` or ``hosts.0.address`` -> ('hosts', 0, 'address') / ('hosts', '0', 'address')."""
    out: list[str | int] = []
    for part in text.split("."):
        m = _PART.fullmatch(part)
        if not m:
            raise ValueError(f"invalid path '{text}'" + (": empty part" if not part else f" at '{part}'"))
        out.append(m[1])
        out += [int(i) for i in re.findall(r"\d+", m[2])]
    return tuple(out)


def normalize(data: Any, path: tuple) -> tuple:
    """Digit parts that index a list become ints, so both path spellings find the same node."""
    out, cur = [], data
    for seg in path:
        if isinstance(cur, list) and is_index(seg):
            seg = int(seg)
        out.append(seg)
        try:
            cur = cur[seg] if isinstance(cur, (dict, list)) else None
        except (KeyError, IndexError, TypeError):
            cur = None
    return tuple(out)


def is_index(seg: Any) -> bool:
    return isinstance(seg, int) or (seg.isascii() and seg.isdigit())


def dotted(path: tuple) -> str:
    return "".join(f"[{s}]" if isinstance(s, int) else ("." if i else "") + str(s) for i, s in enumerate(path))


def described(v: Any) -> str:
    """A value as the user wrote it, shortened: 'two', 1.5, null, true, a list, a mapping."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return "an empty string" if not v else repr(v if len(v) <= 40 else v[:37] + "...")
    return "a mapping" if isinstance(v, dict) else "a list" if isinstance(v, (list, tuple)) else type(v).__name__
