"""Which engine a flag belongs to, and which typed field already passes it.

Every engine refuses an argument it does not know, at start, after the image is pulled and the
hosts are busy: a flag of another engine in ``engine.args.extra`` is found here instead. Each
engine's spec lists the flags only it has (``only_flags``: the names in its ``--help`` that the
others lack), the flags inkctl writes from typed fields (``set_by_inkctl``) and which typed
field passes which flags (``flag_of``); a flag in no list passes.

Lazy: another engine's lists are read (its module imported) only for a flag that the recipe's
own engine does not know (its lists and its release tables).
"""

from __future__ import annotations

import functools

from inkctl.recipe.engine_registry import spec_of, specs
from inkctl.recipe.checks.flag_tables import tables


@functools.lru_cache(maxsize=None)
def _own(kind: str) -> frozenset[str]:
    """Every flag the engine itself knows: its lists and its release tables."""
    s = spec_of(kind)
    passed = {f for flags in s.flag_of.values() for f in flags}
    return frozenset().union(s.only_flags, s.set_by_inkctl, passed, *(t.names for t in tables(kind)))


def other_engines_flag(kind: str, flag: str) -> tuple[str, str | None] | None:
    """(the other engine, the typed field meaning the same) when FLAG is only another engine's."""
    if flag in _own(kind):
        return None
    for other in specs():
        if other.kind != kind and flag in other.only_flags:
            return other.kind, other.only_flags[flag]
    return None


def set_by_inkctl(kind: str, flag: str) -> bool:
    """FLAG is one inkctl writes from typed fields (this engine's, or another's that this one does not know)."""
    if flag in spec_of(kind).set_by_inkctl:
        return True
    return flag not in _own(kind) and any(flag in s.set_by_inkctl for s in specs())


def typed_flags(kind: str, args) -> dict[str, str]:
    """flag -> the typed field (set in ARGS) that already passes it."""
    out = {}
    for field, flags in spec_of(kind).flag_of.items():
        value = getattr(args, field)
        if value is not None and value is not False:
            out.update({f: field for f in flags})
    return out
