"""``--set dotted.path=value``: read one override, and apply it to a document's data in place."""

from __future__ import annotations

import re
from typing import Any

from inkctl.codes import code
from inkctl.errors import Problem, RecipeInvalid, counted
from inkctl.recipe.reading.document import parse
from inkctl.recipe.reading.paths import described, dotted, is_index, parse_path

__all__ = ["OVERRIDE", "parse_override", "typed_for", "apply_override"]

OVERRIDE = "--set"  # Problem.file for problems caused by an override
_ABSENT = object()  # a key that was not there before an override created it


def parse_override(text: str) -> tuple[tuple, Any]:
    """``dotted.path=value`` -> (path tuple, value); the value is read as one YAML scalar or flow value.

    Anything that is not clearly YAML (a comment, a block mapping like ``a: b``, a parse error)
    stays the literal string, so ``x=a;b $(c)`` gives exactly that text.
    """
    def fail(message: str, hint: str | None = None) -> RecipeInvalid:
        return RecipeInvalid([Problem(message, "", OVERRIDE, hint=hint, code=code("bad-override"))])

    example = "e.g. --set engine.args.tensor_parallel=4"
    key, eq, value = text.partition("=")
    if not eq:
        raise fail(f"invalid override '{text}': expected PATH=VALUE", example)
    if not key.strip():
        raise fail(f"invalid override '{text}': the path before '=' is empty", example)
    try:
        path = parse_path(key.strip())
    except ValueError as e:
        raise fail(f"invalid override '{text}': {e}") from None
    s = value.strip()
    if not s or "\n" in s or re.search(r"\s#", s):
        return path, s if s else ""
    try:
        doc = parse(s, OVERRIDE, mapping=False)
    except RecipeInvalid as e:
        if s[0] in "[{":  # meant as a flow list/mapping: say why it is not one
            raise fail(f"invalid value in '{text}': {e.problems[0].message}") from None
        return path, s
    if doc.problems or (isinstance(doc.data, (dict, list)) and s[0] not in "[{"):
        return path, s
    root = doc.located(())
    if root is None:  # no node at all, e.g. '...'
        return path, s
    # a plain scalar must be all of the text ('&x y' is not just 'y')
    return path, doc.data if root.raw is None or root.raw == s else s


def typed_for(model: type, path: tuple, value: Any, text: str) -> Any:
    """The ``--set`` typing rule: where the field holds a string, the value is the text as written
    (``--set container.env.FLAGS=[a,b]`` sets the string ``[a,b]``, ``=1`` the string ``1``); elsewhere
    it is read as YAML (numbers, true/false, null, ``[lists]``, ``{maps}``). ``null`` is null everywhere."""
    from inkctl.recipe.reading.pydantic_errors import holds_text

    if value is None or isinstance(value, str) or not holds_text(model, path):
        return value
    return text.strip()


def apply_override(data: dict, path: tuple, value: Any) -> tuple:
    """Set ``value`` at ``path`` in place, creating missing mappings (and appending at index len);
    returns the normalized path. A path that cannot be applied leaves the data as it was."""
    cur: Any = data
    out: list = []
    undo: list[tuple[Any, Any, Any]] = []  # (container, key, old value) to restore on failure
    try:
        for seg in path:
            here = dotted(tuple(out)) or "the document"
            if isinstance(cur, list):
                if not is_index(seg):
                    raise ValueError(f"'{here}' is a list, so '{seg}' must be an index")
                seg = int(seg)
                if seg > len(cur):
                    raise ValueError(f"index {seg} is out of range ('{here}' has {counted(len(cur), 'item')})")
                if seg == len(cur):
                    cur.append(None)
                    undo.append((cur, None, None))
            elif isinstance(seg, int):
                raise ValueError(f"'{here}' is not a list, so it has no item [{seg}]")
            out.append(seg)
            if len(out) < len(path):
                nxt = cur.get(seg) if isinstance(cur, dict) else cur[seg]
                if nxt is None:
                    undo.append((cur, seg, cur.get(seg, _ABSENT) if isinstance(cur, dict) else None))
                    nxt = cur[seg] = {}
                elif not isinstance(nxt, (dict, list)):
                    raise ValueError(f"'{dotted(tuple(out))}' is {described(nxt)}, not a mapping or list")
                cur = nxt
    except ValueError:
        for container, key, old in reversed(undo):
            if key is None and isinstance(container, list):
                container.pop()
            elif old is _ABSENT:
                del container[key]
            else:
                container[key] = old
        raise
    cur[out[-1]] = value
    return tuple(out)

