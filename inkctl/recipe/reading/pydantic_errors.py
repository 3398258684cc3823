"""Pydantic's validation errors, told in the document's words: the path as written, what was
expected and what was found, and what to do.

Pydantic's error ``loc`` tuples name union members (``engine.vllm.args``) and say things
like "Input should be a valid integer"; this walks the model class along the loc to drop
the union tags, to know the type expected there, and to suggest the right field name.
"""

from __future__ import annotations

import dataclasses
import re
import types
from typing import Annotated, Any, Callable, Literal, Mapping, Union, get_args, get_origin

from inkctl.codes import code
from inkctl.errors import Problem, counted
from inkctl.recipe.reading.paths import described, dotted
from inkctl.recipe.reading.suggest import did_you_mean

__all__ = ["Explained", "explain", "holds_text", "prune_unions"]


def _unwrap(t: Any, disc: Any = None) -> tuple[Any, Any]:
    """Strip Annotated, Optional and RootModel; keep any discriminator found on the way."""
    while True:
        origin = get_origin(t)
        if origin is Annotated:
            lazy = next((m for m in t.__metadata__ if callable(getattr(m, "union", None))), None)
            if lazy is not None:  # a union resolved when a value arrives (recipe/engine.py: Engine)
                t = lazy.union()
                continue
            for meta in t.__metadata__:
                disc = getattr(meta, "discriminator", None) or disc
            t = get_args(t)[0]
        elif origin in (Union, types.UnionType):
            members = [m for m in get_args(t) if m is not type(None)]
            if len(members) > 1:
                return t, disc
            t = members[0]
        elif getattr(t, "__pydantic_root_model__", False) is True:
            t = t.model_fields["root"].annotation
        else:
            return t, disc


def _fields(t: Any) -> dict[str, Any]:
    """Input names (field names and string aliases) -> FieldInfo, for a pydantic model or dataclass."""
    out = {}
    for name, f in (getattr(t, "__pydantic_fields__", None) or {}).items():
        out[name] = f
        for alias in (f.alias, f.validation_alias):
            for a in getattr(alias, "choices", [alias]):
                if isinstance(a, str):
                    out[a] = f
    return out


def _child(t: Any, seg: Any) -> tuple[Any, Any]:
    """Annotation (and discriminator) one step below ``t``; (None, None) when unknown."""
    fields = _fields(t)
    if fields:
        f = fields.get(seg)
        if f is None:
            return None, None
        lazy = [m for m in f.metadata if callable(getattr(m, "union", None))]  # recipe/engine.py: Engine
        return (Annotated[f.annotation, lazy[0]] if lazy else f.annotation), f.discriminator
    origin, args = get_origin(t), get_args(t)
    if origin in (list, set, frozenset) or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return (args[0] if args else None), None
    if origin is tuple and isinstance(seg, int) and seg < len(args):
        return args[seg], None
    if origin is dict and len(args) == 2:
        return args[1], None
    return None, None


def _tags(member: Any, disc: Any) -> list[str]:
    """Values that select ``member`` of a discriminated union."""
    tags = [str(m.tag) for m in getattr(member, "__metadata__", ()) if type(m).__name__ == "Tag"]
    field = _fields(_unwrap(member)[0]).get(disc) if isinstance(disc, str) else None
    if field is not None and get_origin(field.annotation) is Literal:
        tags += [str(getattr(a, "value", a)) for a in get_args(field.annotation)]
    return tags


def _pick(union: Any, seg: str, disc: Any) -> Any:
    """The union member named by pydantic's loc segment (a tag, a class name or a label like 'list[int]')."""
    for m in get_args(union):
        core = _unwrap(m)[0]
        label = getattr(core, "__name__", None) or getattr(get_origin(core), "__name__", None) or str(core)
        if (disc is not None and seg in _tags(m, disc)) or seg == label or seg.split("[")[0].lower() == label.lower():
            return m
    return None



def holds_text(model: type, path: tuple) -> bool:
    """True when the field at ``path`` holds a string (in any member of a union on the way)."""
    def walk(t: Any, rest: tuple) -> bool:
        core, _ = _unwrap(t)
        if get_origin(core) in (Union, types.UnionType):
            return any(walk(m, rest) for m in get_args(core) if m is not type(None))
        if not rest:
            return core is str
        child, _ = _child(core, rest[0])
        return child is not None and walk(child, rest[1:])
    return walk(model, tuple(path))


def _walk(model: type, loc: tuple) -> tuple[tuple, Any, list[tuple[tuple, Any]], tuple | None, Any]:
    """pydantic loc -> (document path, type there, models passed on the way as (path, model),
    innermost union path, branch)."""
    path: list = []
    t, disc = model, None
    chain: list[tuple[tuple, Any]] = []
    union_at = branch = None
    for seg in loc:
        core, disc = _unwrap(t, disc)
        if get_origin(core) in (Union, types.UnionType):  # the segment names a union member, not a key
            t, disc, union_at, branch = _pick(core, str(seg), disc), None, tuple(path), seg
            continue
        if seg == "[key]":  # error in a dict key; the path already ends at that key
            continue
        chain.append((tuple(path), core))
        path.append(seg)
        t, disc = _child(core, seg)
    return tuple(path), _unwrap(t, disc), chain, union_at, branch


_EXPECTED = {
    "a mapping": "model_type model_attributes_type dict_type mapping_type dataclass_type dataclass_exact_type",
    "a list": "list_type tuple_type set_type frozen_set_type iterable_type",
    "an integer": "int_type int_parsing int_from_float",
    "a number": "float_type float_parsing decimal_type decimal_parsing",
    "a finite number": "finite_number",
    "true or false": "bool_type bool_parsing",
    "a string": "string_type string_unicode bytes_type",
    "null": "none_required",
    "a date (YYYY-MM-DD)": "date_type date_parsing date_from_datetime_parsing date_from_datetime_inexact",
    "a date and time": "datetime_type datetime_parsing datetime_from_date_parsing",
    "a duration": "time_delta_type time_delta_parsing",
    "a URL": "url_type url_parsing url_syntax_violation",
    "a UUID": "uuid_type uuid_parsing",
}
_EXPECT = {typ: words for words, names in _EXPECTED.items() for typ in names.split()}
_BOUNDS = {
    "greater_than": "must be greater than {gt}", "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}", "less_than_equal": "must be at most {le}",
    "multiple_of": "must be a multiple of {multiple_of}",
    "string_too_short": "must be at least {min_length} character(s) long",
    "string_too_long": "must be at most {max_length} character(s) long",
    "string_pattern_mismatch": "must match the pattern '{pattern}'",
}


def _one_of(values: list[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    return quoted[0] if len(quoted) == 1 else "one of " + ", ".join(quoted)


@dataclasses.dataclass(frozen=True)
class Explained:
    """One pydantic error in the document's words."""

    loc_path: tuple  # the document path pydantic's loc names (union tags dropped)
    path: tuple  # the path the problem is about (may name the discriminator below loc_path)
    message: str
    hint: str | None
    where: str  # what to point at: the value, the key, or the mapping holding the path
    code: str
    union_at: tuple | None  # the innermost union on the way, and which member this error is about
    branch: Any


def explain(model: type, err: Mapping[str, Any], raw: Callable[[tuple], str | None]) -> Explained:
    """Explain one of ``model``'s validation errors; ``raw(path)``: the source text of a plain scalar."""
    loc_path, leaf, chain, union_at, branch = _walk(model, err["loc"])
    path, kind, message, hint, where = _message(err, loc_path, leaf, chain, raw(loc_path))
    return Explained(loc_path, path, message, hint, where, code(kind), union_at, branch)


def _message(err: Mapping[str, Any], path: tuple, leaf: tuple, chain: list, raw: str | None) -> tuple[tuple, str, str, str | None, str]:
    """(path, kind, message, hint, where) for one pydantic error; ``where`` is value | key | mapping."""
    typ, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    got = described(value)
    if typ == "missing":
        return path, "missing-field", f"missing required field '{path[-1]}'", None, "mapping"
    if typ == "extra_forbidden":
        return _unknown_field(path, chain)
    if typ in ("union_tag_invalid", "union_tag_not_found"):
        return _union_tag(typ, ctx, path, leaf)
    if typ in ("literal_error", "enum"):
        return _choice(ctx, value, got, path, leaf)
    if typ in _EXPECT:
        found = _wrong_type(typ, ctx, got, path, raw)
        if _EXPECT[typ] == "a mapping" and found[3] is None:
            found = found[:3] + (_mapping_example(leaf, path, value),) + found[4:]
        return found
    if typ in _BOUNDS:
        return path, "out-of-range", _BOUNDS[typ].format(**ctx) + f", got {got}", None, "value"
    if typ in ("too_short", "too_long"):
        n = ctx.get("min_length" if typ == "too_short" else "max_length")
        word = "at least" if typ == "too_short" else "at most"
        return path, "out-of-range", f"must have {word} {counted(int(n or 0), 'item')}, got {ctx.get('actual_length')}", None, "value"
    if typ in ("value_error", "assertion_error") and ctx.get("error") is not None:
        return path, "invalid-value", str(ctx["error"]), None, "value"
    message = err["msg"]  # a type this table does not know, or a custom error: keep pydantic's words
    if message.startswith("Input should be "):
        message = f"expected {message[16:]}, got {got}"
    return path, "invalid-value", message, None, "value"


def _mapping_example(leaf: tuple, path: tuple, value: Any) -> str | None:
    """``expert: true`` where a mapping belongs: the mapping it most likely means, from the model's
    first field of the value's type (``expert: {enabled: true}``, ``data_parallel: {size: 2}``)."""
    core, _ = _unwrap(leaf[0]) if leaf else (None, None)
    fields = getattr(core, "__pydantic_fields__", None)
    if not fields or not path:
        return None
    want = bool if isinstance(value, bool) else int if isinstance(value, int) else str if isinstance(value, str) else None
    same = [n for n, f in fields.items() if want is not None and _unwrap(f.annotation)[0] is want]
    names = ", ".join(list(fields)[:6])
    if same:
        shown = str(value).lower() if isinstance(value, bool) else value
        return f"write it as a mapping, e.g. {path[-1]}: {{{same[0]}: {shown}}} (its fields: {names})"
    return f"write it as a mapping of its fields: {names}"


def _engine_flag_field(key: str) -> str | None:
    """An engine's own flag written as a field (max_num_seqs): the typed field that passes it, or
    where an untyped flag goes."""
    from inkctl.recipe.engine_registry import kinds, spec_of

    flag = "--" + key.replace("_", "-")
    for kind in kinds():  # a mistyped field: the error path may ask every engine
        spec = spec_of(kind)
        if flag not in spec.only_flags:
            continue
        field = spec.only_flags[flag]
        if field is not None and field != key:
            return f"'{key}' is {spec.name}'s {flag}: the field for it is '{field}' (engine.args.{field})"
        if field is None:
            return f"{flag} is {spec.name}'s flag with no typed field: pass it in engine.args.extra: [{flag}, VALUE]"
    return None


def _unknown_field(path: tuple, chain: list) -> tuple[tuple, str, str, str | None, str]:
    """A key the model does not have: where it belongs if it is a field nearby, else the names."""
    key = str(path[-1])
    names = [n for n in _fields(chain[-1][1]) if not n.startswith("_")] if chain else []
    home = _home(key, chain)
    if home is not None:
        return path, "unknown-field", f"unknown field '{key}' here: it belongs under {home}", \
            "check the indentation" if home != "the top level" else "move it to the top level", "key"
    hint = (_engine_flag_field(key) if path[:2] == ("engine", "args") else None) or did_you_mean(key, names) \
        or (f"valid fields here: {', '.join(names)}" if names else None)
    return path, "unknown-field", f"unknown field '{key}'", hint, "key"


def _union_tag(typ: str, ctx: Mapping[str, Any], path: tuple, leaf: tuple) -> tuple[tuple, str, str, str | None, str]:
    """A tagged union's selector (e.g. engine.kind) missing or not one of its variants."""
    disc = str(ctx.get("discriminator", "")).strip("'")
    tags = [t for m in get_args(leaf[0]) for t in _tags(m, leaf[1])]
    tags = tags or re.findall(r"'([^']*)'", str(ctx.get("expected_tags", "")))
    named = path + (disc,) if disc.isidentifier() else path
    if typ == "union_tag_not_found":
        hint = f"'{disc}' selects the variant: {_one_of(tags)}"
        return named, "missing-field", f"missing required field '{disc}'", hint, "mapping"
    tag = str(ctx.get("tag"))
    return named, "invalid-choice", f"expected {_one_of(tags)}, got '{tag}'", did_you_mean(tag, tags), "value"


def _choice(ctx: Mapping[str, Any], value: Any, got: str, path: tuple, leaf: tuple) -> tuple[tuple, str, str, str | None, str]:
    """A value outside a Literal or an Enum: the choices, and the nearest one."""
    core = leaf[0]
    values = [str(getattr(a, "value", a)) for a in get_args(core)] if get_origin(core) is Literal else \
        [str(m.value) for m in core.__members__.values()] if isinstance(core, type) and hasattr(core, "__members__") else []
    expected = _one_of(values) if values else str(ctx.get("expected"))
    hint = did_you_mean(value, values) if isinstance(value, str) and values else None
    return path, "invalid-choice", f"expected {expected}, got {got}", hint, "value"


def _wrong_type(typ: str, ctx: Mapping[str, Any], got: str, path: tuple, raw: str | None) -> tuple[tuple, str, str, str | None, str]:
    message = f"expected {_EXPECT[typ]}, got {got}"
    if typ.endswith("_parsing") and ctx.get("error"):
        message += f" ({ctx['error']})"
    hint = f'put it in quotes: "{raw}"' if typ == "string_type" and raw is not None else None
    return path, "wrong-type", message, hint, "value"


def _models(t: Any) -> list[Any]:
    """The models a field holds directly (through Optional, Annotated and unions, not lists or maps)."""
    core, _ = _unwrap(t)
    if get_origin(core) in (Union, types.UnionType):
        return [m for a in get_args(core) for m in _models(a)]
    return [core] if _fields(core) else []


def _home(key: str, chain: list[tuple[tuple, Any]]) -> str | None:
    """Where an unknown ``key`` belongs when it is a field of a model near the one it was written in:
    one or two levels below (indented too far out), else an enclosing model (indented too far in)."""
    if not chain:
        return None
    here, model = chain[-1]
    level = [(here + (name,), sub) for name, f in _fields(model).items() if not name.startswith("_")
             for sub in _models(f.annotation)]
    for _depth in range(2):
        found = list(dict.fromkeys(dotted(p) for p, m in level if key in _fields(m)))
        if found:
            return " or ".join(f"'{p}'" for p in found)
        level = [(p + (name,), sub) for p, m in level for name, f in _fields(m).items() for sub in _models(f.annotation)]
    for at, outer in reversed(chain[:-1]):
        if key in _fields(outer):
            return f"'{dotted(at)}'" if at else "the top level"
    return None


def prune_unions(items: list[tuple[Problem, Explained]]) -> list[Problem]:
    """Pydantic reports every member of a failed union; keep what the user most likely meant.

    A member whose errors lie *inside* the value accepted its shape, so members that only
    complain about the shape itself are dropped. If no member took the shape, their
    "expected X, got Y" messages become one "expected X or Z, got Y".
    """
    groups: dict[tuple, list] = {}
    for item in items:
        if item[1].union_at is not None:
            groups.setdefault(item[1].union_at, []).append(item)
    drop: set[int] = set()
    merged: dict[int, Problem] = {}
    for union_at, group in groups.items():
        by_branch: dict[Any, list] = {}
        for item in group:
            by_branch.setdefault(item[1].branch, []).append(item)
        if len(by_branch) < 2:
            continue
        inside = {b: g for b, g in by_branch.items() if any(len(item[1].loc_path) > len(union_at) for item in g)}
        if inside:
            best = min(inside, key=lambda b: len(inside[b]))
            drop.update(id(item) for b, g in by_branch.items() if b != best for item in g)
            continue
        parts = [item[0].message.rpartition(", got ") for item in group]
        if all(p[1] and p[0].startswith("expected ") and p[2] == parts[0][2] for p in parts):
            options = list(dict.fromkeys(p[0][len("expected "):] for p in parts))
            expected = ", ".join(options[:-1]) + " or " + options[-1]
            message = f"expected {expected}, got {parts[0][2]}"
            merged[id(group[0])] = dataclasses.replace(group[0][0], message=message, hint=None)
            drop.update(id(item) for item in group[1:])
    return [merged.get(id(item), item[0]) for item in items if id(item) not in drop]

