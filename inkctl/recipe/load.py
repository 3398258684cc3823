"""Turn a YAML file into a validated pydantic model, or into a list of every problem, each located.

Why not ``yaml.safe_load`` + ``model_validate``: safe_load throws positions away, silently
keeps the last of two duplicate keys, expands alias bombs without limit, and the C composer
recurses once per nesting level (tens of thousands of ``[`` crash the interpreter). So we
read libyaml's *event* stream (fast, iterative), compose a small node tree ourselves under
limits (depth, expanded size, recursive or undefined aliases), then construct plain Python
data while recording the source position of every path. Pydantic's error ``loc`` tuples
are mapped back onto those paths, walking the model class to drop union tags.

Scalars follow the YAML 1.2 core schema: ``NO``, ``on`` and ``1:30`` stay strings and
dates stay strings; pydantic's lax mode still takes ``yes``/``on`` for a bool field.
Merge keys (``<<: *defaults``) are supported; any tag outside the core schema is refused.
"""

from __future__ import annotations

import dataclasses
import re
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import ValidationError

from inkctl.errors import Problem, RecipeInvalid
from inkctl.recipe.suggest import did_you_mean

__all__ = ["Document", "load_model", "parse_document", "parse_override", "MAX_NODES", "MAX_DEPTH"]

MAX_NODES = 100_000  # values after alias expansion; a real recipe has a few hundred
MAX_DEPTH = 100  # nesting levels; keeps our own recursion far below Python's limit
OVERRIDE = "--set"  # Problem.file for problems caused by an override

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # only its parser (events) is used
_MERGE = object()  # a plain '<<' key
_BAD = object()  # a value we refused (reported); dropped from the data
_CORE = "tag:yaml.org,2002:"
_NULLS = {"", "~", "null", "Null", "NULL"}
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_NON_PRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")  # not YAML
_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")  # YAML 1.1 line breaks, as libyaml counts lines
_PART = re.compile(r"([^.\[\]]+)((?:\[\d+\])*)")


def _fatal(file: str, message: str, line: int | None = None, col: int | None = None,
           hint: str | None = None) -> RecipeInvalid:
    """The document cannot be read at all: one problem, since nothing after it would mean anything."""
    return RecipeInvalid([Problem(message, "", file, line, col, hint)])


def _line_col(text: str, index: int) -> tuple[int, int]:
    """1-based line and column of ``text[index]``, counting line breaks the way YAML does."""
    rows = _BREAK.split(text[:index])
    return len(rows), len(rows[-1]) + 1


class _Node:
    """A composed YAML node. Aliases share the node object, so the tree is a DAG."""

    __slots__ = ("kind", "value", "line", "col", "raw", "error", "size", "height")

    def __init__(self, kind: str, value: Any, line: int, col: int):
        self.kind, self.value, self.line, self.col = kind, value, line, col  # kind: scalar | seq | map
        self.raw: str | None = None  # source text of a plain scalar (for "put it in quotes" hints)
        self.error: tuple[str, str | None] | None = None  # (message, hint) when the node is refused
        self.size, self.height = 1, 1  # expanded node count and depth, for the bomb/depth limits


class Document:
    """Parsed YAML: ``data`` (plain Python) plus the source position of every path in it.

    Paths are tuples of mapping keys (str) and list indices (int), or the dotted form
    ``hosts[1].name``. Positions are 1-based ``(line, col)``.
    """

    def __init__(self, data: Any, file: str, positions: dict, problems: list[Problem], bad: set):
        self.data, self.file = data, file
        self._pos = positions  # path -> (line, col, key (line, col) | None, raw, is_collection)
        self._problems, self._bad = problems, bad  # non-fatal problems; paths whose value was dropped

    def position(self, path: tuple | str) -> tuple[int, int] | None:
        """Where the value at ``path`` starts, or None if the document has no such path."""
        entry = self._pos.get(self._path(path))
        return entry[:2] if entry else None

    def key_position(self, path: tuple | str) -> tuple[int, int] | None:
        """Where the mapping key of ``path`` starts (None for list items and missing paths)."""
        entry = self._pos.get(self._path(path))
        return entry[2] if entry else None

    def _path(self, path: tuple | str) -> tuple | None:
        try:
            return _normalize(self.data, _parse_path(path) if isinstance(path, str) and path else tuple(path))
        except ValueError:  # not a path at all
            return None


# ---------------------------------------------------------------- reading and composing


def _read(source: str | bytes | Path, filename: str | None) -> tuple[str, str]:
    """Source to text. A ``Path`` is read from disk; ``str``/``bytes`` are the document itself."""
    if isinstance(source, Path):
        file = filename or str(source)
        try:
            raw = source.read_bytes()
        except FileNotFoundError:
            raise _fatal(file, "file not found", hint="check the path") from None
        except IsADirectoryError:
            raise _fatal(file, "is a directory, not a file") from None
        except OSError as e:
            raise _fatal(file, f"cannot read the file: {e.strerror or e}") from None
    else:
        file, raw = filename or "<text>", source
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            before = raw[: e.start].decode("utf-8-sig", "replace")
            raise _fatal(file, f"not valid UTF-8: byte 0x{raw[e.start]:02x} cannot be decoded",
                         *_line_col(before, len(before)), "save the file as UTF-8") from None
    else:
        text = raw
    bad = _NON_PRINTABLE.search(text)
    if bad:
        raise _fatal(file, f"character U+{ord(bad.group()):04X} is not allowed in YAML", *_line_col(text, bad.start()),
                     "remove it, or write it as an escape in a double-quoted string")
    return text, file


def _compose(text: str, file: str) -> _Node | None:
    """Build the node tree of the single document in ``text`` (None when empty), iteratively."""
    loader = _Loader(text)
    try:
        loader.get_event()  # StreamStart
        if loader.check_event(yaml.StreamEndEvent):
            return None
        loader.get_event()  # DocumentStart
        anchors: dict[str, _Node] = {}
        opened: set[str] = set()  # anchors of collections not yet closed: an alias to one is a cycle
        stack: list[tuple[_Node, str | None]] = []
        total, root = 0, None
        while root is None:
            ev = loader.get_event()
            line, col = ev.start_mark.line + 1, ev.start_mark.column + 1
            parent = stack[-1][0] if stack else None
            if isinstance(ev, yaml.AliasEvent):
                node = anchors.get(ev.anchor)
                if node is None and ev.anchor in opened:
                    raise _fatal(file, f"alias '*{ev.anchor}' refers to a node that contains it (recursive alias)",
                                 line, col)
                if node is None:
                    raise _fatal(file, f"alias '*{ev.anchor}' is not defined", line, col,
                                 f"define '&{ev.anchor}' before using it")
                total += node.size
                if len(stack) + node.height > MAX_DEPTH:
                    raise _fatal(file, f"nesting deeper than {MAX_DEPTH} levels after expanding alias '*{ev.anchor}'",
                                 line, col)
            elif isinstance(ev, yaml.ScalarEvent):
                total += 1
                is_key = parent is not None and parent.kind == "map" and len(parent.value) % 2 == 0
                node = _scalar(ev, line, col, is_key)
                if ev.anchor:
                    anchors[ev.anchor] = node
            elif isinstance(ev, yaml.CollectionStartEvent):
                total += 1
                if len(stack) >= MAX_DEPTH:
                    raise _fatal(file, f"nesting deeper than {MAX_DEPTH} levels", line, col)
                kind = "map" if isinstance(ev, yaml.MappingStartEvent) else "seq"
                node = _Node(kind, [], line, col)
                if ev.tag not in (None, "!", _CORE + kind):
                    node.error = _tag_error(ev.tag)
                if ev.anchor:
                    opened.add(ev.anchor)
                stack.append((node, ev.anchor))
                continue
            else:  # CollectionEndEvent
                node, anchor = stack.pop()
                node.size = 1 + sum(c.size for c in node.value)
                node.height = 1 + max((c.height for c in node.value), default=0)
                if anchor:
                    opened.discard(anchor)
                    anchors[anchor] = node
                parent = stack[-1][0] if stack else None
            if total > MAX_NODES:
                raise _fatal(file, f"the document expands to more than {MAX_NODES} values through aliases", line, col,
                             "this looks like an alias bomb; remove the nested '*' references")
            if parent is None:
                root = node
            else:
                parent.value.append(node)  # a map keeps [key, value, key, value, ...]
        loader.get_event()  # DocumentEnd
        if not loader.check_event(yaml.StreamEndEvent):
            mark = loader.peek_event().start_mark
            raise _fatal(file, "the file holds more than one YAML document", mark.line + 1, mark.column + 1,
                         "remove the second '---' and everything after it, or split the file")
        return root
    except yaml.MarkedYAMLError as e:
        raise _syntax(e, text, file) from None
    except yaml.YAMLError as e:  # reader errors carry no mark
        raise _fatal(file, f"invalid YAML: {e}", 1, 1) from None
    finally:
        loader.dispose()


def _syntax(e: yaml.MarkedYAMLError, text: str, file: str) -> RecipeInvalid:
    """PyYAML's parse error, with the offending character named (libyaml omits it) and a hint."""
    mark = e.problem_mark or e.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    rows = _BREAK.split(text)
    if line > len(rows):  # libyaml can put the end of the stream one line past the end
        line, col = len(rows), len(rows[-1]) + 1
    message, hint = str(e.problem or e.context), None
    if e.context and e.context_mark and e.context_mark is not mark and "next token" not in e.context:
        hint = f"{e.context} that starts at line {e.context_mark.line + 1}"
    if "cannot start any token" in message:
        ch = rows[line - 1][col - 1] if col <= len(rows[line - 1]) else "?"
        message = f"found character {ch!r} that cannot start any token"
        hint = ("indent with spaces: YAML does not allow tabs" if ch == "\t"
                else f"put the value in quotes ({ch!r} is reserved)")
    return _fatal(file, f"invalid YAML: {message}", line, col, hint)


def _scalar(ev: Any, line: int, col: int, is_key: bool) -> _Node:
    node = _Node("scalar", ev.value, line, col)
    if ev.tag is None and ev.implicit[0]:  # plain and untagged: resolve by the core schema
        node.raw = ev.value
        node.value = _MERGE if is_key and ev.value == "<<" else _resolve(ev.value)
    elif ev.tag not in (None, "!", _CORE + "str"):
        try:
            node.value = _explicit(ev.tag, ev.value)
        except (ValueError, KeyError):
            node.error = (f"'{ev.value}' is not a valid {_short_tag(ev.tag)}", None)
        except TypeError:
            node.error = _tag_error(ev.tag)
    return node


def _resolve(v: str) -> Any:
    if v in _NULLS:
        return None
    if v in _BOOLS:
        return _BOOLS[v]
    if v[0] in "-+.0123456789":
        try:
            if _INT.fullmatch(v):
                return int(v[2:], 8) if v[:2] == "0o" else int(v[2:], 16) if v[:2] == "0x" else int(v, 10)
            if _FLOAT.fullmatch(v):
                return float(v.lower().replace(".inf", "inf").replace(".nan", "nan"))
        except ValueError:  # e.g. more digits than int() accepts: keep the text
            pass
    return v


def _explicit(tag: str, v: str) -> Any:
    """Value of a scalar with an explicit core tag (``!!int 3``); TypeError for any other tag."""
    kind = tag[len(_CORE):] if tag.startswith(_CORE) else None
    if kind == "null":
        if v not in _NULLS:
            raise ValueError(v)
        return None
    if kind == "bool":
        return _BOOLS[v]
    if kind in ("int", "float"):
        value = _resolve(v)
        if type(value) not in ((int,) if kind == "int" else (int, float)):
            raise ValueError(v)
        return float(value) if kind == "float" else value
    raise TypeError(tag)


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_CORE):] if tag.startswith(_CORE) else tag


def _tag_error(tag: str) -> tuple[str, str]:
    return (f"unsupported tag '{_short_tag(tag)}'",
            "only plain YAML values are allowed: strings, numbers, true/false, null, lists and mappings")


# ---------------------------------------------------------------- constructing


class _Builder:
    """Node tree -> plain data, recording positions and collecting non-fatal problems."""

    def __init__(self, file: str):
        self.file, self.pos, self.problems, self.bad = file, {}, [], set()

    def problem(self, path: tuple, node: _Node, message: str, hint: str | None = None) -> None:
        self.problems.append(Problem(message, _dotted(path), self.file, node.line, node.col, hint))

    def build(self, node: _Node, path: tuple, key_at: tuple[int, int] | None) -> Any:
        self.pos[path] = (node.line, node.col, key_at, node.raw, node.kind != "scalar")
        if node.error:
            self.problem(path, node, *node.error)
            self.bad.add(path)
            return _BAD
        if node.kind == "scalar":
            return node.value
        if node.kind == "seq":
            items = [self.build(c, path + (i,), None) for i, c in enumerate(node.value)]
            return [None if v is _BAD else v for v in items]
        out: dict[str, Any] = {}
        first: dict[str, int] = {}
        for k, v, merged in self.entries(node, path):
            key = k.value
            if k.kind != "scalar" or k.error or not isinstance(key, str):
                got = "a mapping" if k.kind == "map" else "a list" if k.kind == "seq" else _got(key)
                hint = f'put it in quotes: "{k.raw}"' if k.raw else None
                self.problem(path, k, f"mapping keys must be strings, got {got}", hint)
                continue
            if key in first:
                if merged:  # keys written out win over merged ones
                    continue
                self.problem(path + (key,), k, f"duplicate key '{key}' (first defined at line {first[key]})",
                             "YAML keeps only the last one; remove the other")
            else:
                first[key] = k.line
            value = self.build(v, path + (key,), (k.line, k.col))
            if value is _BAD:
                out.pop(key, None)
            else:
                out[key] = value
        return out

    def entries(self, node: _Node, path: tuple) -> list[tuple[_Node, _Node, bool]]:
        """Key/value pairs of a mapping: its own first, then those merged in by '<<' (earlier wins)."""
        pairs = list(zip(node.value[::2], node.value[1::2]))
        out = [(k, v, False) for k, v in pairs if k.value is not _MERGE]
        for k, v in pairs:
            if k.value is _MERGE:
                for src in v.value if v.kind == "seq" else [v]:
                    if src.kind != "map" or src.error:
                        self.problem(path, src, "'<<' must be followed by a mapping or a list of mappings")
                        continue
                    out += [(k2, v2, True) for k2, v2, _ in self.entries(src, path)]
        return out


def _parse(source: str | bytes | Path, filename: str | None, *, mapping: bool = True) -> Document:
    """Read, compose and build; ``mapping``: the document must be a non-empty mapping."""
    text, file = _read(source, filename)
    root = _compose(text, file)
    if mapping and (root is None or (root.kind == "scalar" and root.value is None and not root.error)):
        raise _fatal(file, "the document is empty", 1, 1, "a recipe is a YAML mapping of fields, e.g. 'engine: ...'")
    if mapping and root.kind != "map":
        got = "a list" if root.kind == "seq" else "a tagged value" if root.error else _got(root.value)
        raise _fatal(file, f"the document must be a mapping of fields, got {got}", root.line, root.col)
    if mapping and root.error:
        raise _fatal(file, root.error[0], root.line, root.col, root.error[1])
    builder = _Builder(file)
    data = builder.build(root, (), None) if root is not None else None
    return Document(data, file, builder.pos, builder.problems, builder.bad)


def parse_document(path_or_text: str | bytes | Path, *, filename: str | None = None) -> Document:
    """Parse one YAML mapping. A ``Path`` is read from disk; a ``str`` or ``bytes`` is the text itself
    (a str is never guessed to be a file name). ``filename`` names it in problems.

    Raises RecipeInvalid (every problem, located) for anything wrong with the YAML itself.
    """
    doc = _parse(path_or_text, filename)
    if doc._problems:
        raise RecipeInvalid(_ordered(doc._problems))
    return doc


# ---------------------------------------------------------------- paths and overrides


def _parse_path(text: str) -> tuple:
    """``hosts[0].address`` or ``hosts.0.address`` -> ('hosts', 0, 'address') / ('hosts', '0', 'address')."""
    out: list[str | int] = []
    for part in text.split("."):
        m = _PART.fullmatch(part)
        if not m:
            raise ValueError(f"invalid path '{text}'" + (": empty part" if not part else f" at '{part}'"))
        out.append(m[1])
        out += [int(i) for i in re.findall(r"\d+", m[2])]
    return tuple(out)


def _normalize(data: Any, path: tuple) -> tuple:
    """Digit parts that index a list become ints, so both path spellings find the same node."""
    out, cur = [], data
    for seg in path:
        if isinstance(cur, list) and _is_index(seg):
            seg = int(seg)
        out.append(seg)
        try:
            cur = cur[seg] if isinstance(cur, (dict, list)) else None
        except (KeyError, IndexError, TypeError):
            cur = None
    return tuple(out)


def _is_index(seg: Any) -> bool:
    return isinstance(seg, int) or (seg.isascii() and seg.isdigit())


def _dotted(path: tuple) -> str:
    return "".join(f"[{s}]" if isinstance(s, int) else ("." if i else "") + str(s) for i, s in enumerate(path))


def parse_override(text: str) -> tuple[tuple, Any]:
    """``dotted.path=value`` -> (path tuple, value); the value is read as one YAML scalar or flow value.

    Anything that is not clearly YAML (a comment, a block mapping like ``a: b``, a parse error)
    stays the literal string, so ``x=a;b $(c)`` gives exactly that text.
    """
    def fail(message: str, hint: str | None = None) -> RecipeInvalid:
        return RecipeInvalid([Problem(message, "", OVERRIDE, hint=hint)])

    example = "e.g. --set engine.args.tensor_parallel=4"
    key, eq, value = text.partition("=")
    if not eq:
        raise fail(f"invalid override '{text}': expected PATH=VALUE", example)
    if not key.strip():
        raise fail(f"invalid override '{text}': the path before '=' is empty", example)
    try:
        path = _parse_path(key.strip())
    except ValueError as e:
        raise fail(f"invalid override '{text}': {e}") from None
    s = value.strip()
    if not s or "\n" in s or re.search(r"\s#", s):
        return path, s if s else ""
    try:
        doc = _parse(s, OVERRIDE, mapping=False)
    except RecipeInvalid as e:
        if s[0] in "[{":  # meant as a flow list/mapping: say why it is not one
            raise fail(f"invalid value in '{text}': {e.problems[0].message}") from None
        return path, s
    if doc._problems or (isinstance(doc.data, (dict, list)) and s[0] not in "[{"):
        return path, s
    if () not in doc._pos:  # no node at all, e.g. '...'
        return path, s
    raw = doc._pos[()][3]  # a plain scalar must be all of the text ('&x y' is not just 'y')
    return path, doc.data if raw is None or raw == s else s


def _apply(data: dict, path: tuple, value: Any) -> tuple:
    """Set ``value`` at ``path`` in place, creating missing mappings (and appending at index len);
    returns the normalized path. A path that cannot be applied leaves the data as it was."""
    cur: Any = data
    out: list = []
    undo: list[tuple[Any, Any, Any]] = []  # (container, key, old value) to restore on failure
    try:
        for seg in path:
            here = _dotted(tuple(out)) or "the document"
            if isinstance(cur, list):
                if not _is_index(seg):
                    raise ValueError(f"'{here}' is a list, so '{seg}' must be an index")
                seg = int(seg)
                if seg > len(cur):
                    raise ValueError(f"index {seg} is out of range ('{here}' has {len(cur)} items)")
                if seg == len(cur):
                    cur.append(None)
                    undo.append((cur, None, None))
            elif isinstance(seg, int):
                raise ValueError(f"'{here}' is not a list, so it has no item [{seg}]")
            out.append(seg)
            if len(out) < len(path):
                nxt = cur.get(seg) if isinstance(cur, dict) else cur[seg]
                if nxt is None:
                    undo.append((cur, seg, cur.get(seg, _BAD) if isinstance(cur, dict) else None))
                    nxt = cur[seg] = {}
                elif not isinstance(nxt, (dict, list)):
                    raise ValueError(f"'{_dotted(tuple(out))}' is {_got(nxt)}, not a mapping or list")
                cur = nxt
    except ValueError:
        for container, key, old in reversed(undo):
            if key is None and isinstance(container, list):
                container.pop()
            elif old is _BAD:
                del container[key]
            else:
                container[key] = old
        raise
    cur[out[-1]] = value
    return tuple(out)


# ---------------------------------------------------------------- pydantic errors -> problems


def _unwrap(t: Any, disc: Any = None) -> tuple[Any, Any]:
    """Strip Annotated, Optional and RootModel; keep any discriminator found on the way."""
    while True:
        origin = get_origin(t)
        if origin is Annotated:
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
        return (f.annotation, f.discriminator) if f else (None, None)
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
    tags = [str(getattr(m, "tag")) for m in getattr(member, "__metadata__", ()) if type(m).__name__ == "Tag"]
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


def _walk(model: type, loc: tuple) -> tuple[tuple, Any, Any, tuple | None, Any]:
    """pydantic loc -> (document path, type there, type of its parent, innermost union path, branch)."""
    path: list = []
    t, disc, parent = model, None, None
    union_at = branch = None
    for seg in loc:
        core, disc = _unwrap(t, disc)
        if get_origin(core) in (Union, types.UnionType):  # the segment names a union member, not a key
            t, disc, union_at, branch = _pick(core, str(seg), disc), None, tuple(path), seg
            continue
        if seg == "[key]":  # error in a dict key; the path already ends at that key
            continue
        path.append(seg)
        parent = core
        t, disc = _child(core, seg)
    return tuple(path), _unwrap(t, disc), parent, union_at, branch


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


def _got(v: Any) -> str:
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


def _one_of(values: list[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    return quoted[0] if len(quoted) == 1 else "one of " + ", ".join(quoted)


def _message(err: dict, path: tuple, leaf: tuple, parent: Any, raw: str | None) -> tuple[tuple, str, str | None, str]:
    """(path, message, hint, where) for one pydantic error; ``where`` is value | key | mapping."""
    typ, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    got = _got(value)
    if typ == "missing":
        return path, f"missing required field '{path[-1]}'", None, "mapping"
    if typ == "extra_forbidden":
        names = [n for n in _fields(parent) if not n.startswith("_")]
        hint = did_you_mean(str(path[-1]), names) or (f"valid fields here: {', '.join(names)}" if names else None)
        return path, f"unknown field '{path[-1]}'", hint, "key"
    if typ in ("union_tag_invalid", "union_tag_not_found"):
        disc = str(ctx.get("discriminator", "")).strip("'")
        tags = [t for m in get_args(leaf[0]) for t in _tags(m, leaf[1])]
        tags = tags or re.findall(r"'([^']*)'", str(ctx.get("expected_tags", "")))
        named = path + (disc,) if disc.isidentifier() else path
        if typ == "union_tag_not_found":
            hint = f"'{disc}' selects the variant: {_one_of(tags)}"
            return named, f"missing required field '{disc}'", hint, "mapping"
        tag = str(ctx.get("tag"))
        return named, f"expected {_one_of(tags)}, got '{tag}'", did_you_mean(tag, tags), "value"
    if typ in ("literal_error", "enum"):
        core = leaf[0]
        values = [str(getattr(a, "value", a)) for a in get_args(core)] if get_origin(core) is Literal else \
            [str(m.value) for m in core] if isinstance(core, type) and hasattr(core, "__members__") else []
        expected = _one_of(values) if values else str(ctx.get("expected"))
        hint = did_you_mean(value, values) if isinstance(value, str) and values else None
        return path, f"expected {expected}, got {got}", hint, "value"
    if typ in _EXPECT:
        message = f"expected {_EXPECT[typ]}, got {got}"
        if typ.endswith("_parsing") and ctx.get("error"):
            message += f" ({ctx['error']})"
        hint = f'put it in quotes: "{raw}"' if typ == "string_type" and raw is not None else None
        return path, message, hint, "value"
    if typ in _BOUNDS:
        return path, _BOUNDS[typ].format(**ctx) + f", got {got}", None, "value"
    if typ in ("too_short", "too_long"):
        n = ctx.get("min_length" if typ == "too_short" else "max_length")
        word = "at least" if typ == "too_short" else "at most"
        return path, f"must have {word} {n} item{'s' if n != 1 else ''}, got {ctx.get('actual_length')}", None, "value"
    if typ in ("value_error", "assertion_error") and ctx.get("error") is not None:
        return path, str(ctx["error"]), None, "value"
    message = err["msg"]  # a type this table does not know, or a custom error: keep pydantic's words
    if message.startswith("Input should be "):
        message = f"expected {message[16:]}, got {got}"
    return path, message, None, "value"


def _prune_unions(items: list[tuple[Problem, tuple | None, Any, int]]) -> list[Problem]:
    """Pydantic reports every member of a failed union; keep what the user most likely meant.

    A member whose errors lie *inside* the value accepted its shape, so members that only
    complain about the shape itself are dropped. If no member took the shape, their
    "expected X, got Y" messages become one "expected X or Z, got Y".
    """
    groups: dict[tuple, list] = {}
    for item in items:
        if item[1] is not None:
            groups.setdefault(item[1], []).append(item)
    drop: set[int] = set()
    merged: dict[int, Problem] = {}
    for union_at, group in groups.items():
        by_branch: dict[Any, list] = {}
        for item in group:
            by_branch.setdefault(item[2], []).append(item)
        if len(by_branch) < 2:
            continue
        inside = {b: g for b, g in by_branch.items() if any(item[3] > len(union_at) for item in g)}
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


def _locate(doc: Document, path: tuple, where: str, overridden: list[tuple]) -> tuple[str, int | None, int | None]:
    """(file, line, col) for a problem at ``path``: the key, the value, or the mapping holding it."""
    if where == "mapping":
        path = path[:-1]
    if any(path[: len(s)] == s for s in overridden) or (
        path not in doc._pos and any(s[: len(path)] == path for s in overridden)
    ):
        return OVERRIDE, None, None
    p = path
    while p not in doc._pos:
        p = p[:-1]
    line, col, key_at, _raw, collection = doc._pos[p]
    if key_at and (where != "value" or p != path or (collection and line != key_at[0])):  # block: its key
        return doc.file, *key_at
    return doc.file, line, col


def _ordered(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        key = (p.file, p.line, p.col, p.path, p.message, p.severity)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return sorted(out, key=lambda p: (p.file == OVERRIDE, p.line or 0, p.col or 0))


def load_model(model: type, path: str | Path, overrides: list[str] | tuple = (), *, text: str | None = None):
    """Parse ``path`` (or ``text``, reported as ``path``), apply ``--set`` overrides, validate as ``model``.

    Returns ``(instance, warnings)``. Raises RecipeInvalid with every problem found: YAML
    problems, override problems, validation errors, and the errors of ``instance.findings()``.
    """
    doc = _parse(Path(path) if text is None else text, str(path))
    problems = list(doc._problems)
    overridden: list[tuple] = []
    for item in overrides:
        try:
            target, value = parse_override(item)
            target = _apply(doc.data, target, value)
            overridden.append(target)
            for stale in [p for p in doc._pos if p[: len(target)] == target]:  # the file's text is gone there
                del doc._pos[stale]
        except RecipeInvalid as e:
            problems += e.problems
        except ValueError as e:
            problems.append(Problem(f"cannot apply '{item}': {e}", _dotted(target), OVERRIDE))
    try:
        obj = model.model_validate(doc.data)
    except ValidationError as e:
        items = []
        for err in e.errors(include_url=False):
            loc_path, leaf, parent, union_at, branch = _walk(model, err["loc"])
            if any(loc_path[: len(b)] == b for b in doc._bad):
                continue  # that value was refused already (e.g. a bad tag); don't report it twice
            entry = doc._pos.get(loc_path)
            pth, message, hint, where = _message(err, loc_path, leaf, parent, entry[3] if entry else None)
            file, line, col = _locate(doc, pth, where, overridden)
            items.append((Problem(message, _dotted(pth), file, line, col, hint), union_at, branch, len(loc_path)))
        raise RecipeInvalid(_ordered(problems + _prune_unions(items))) from None
    findings = getattr(obj, "findings", None)
    for p in findings() if callable(findings) else ():
        if p.file is None:
            pth = doc._path(p.path) or ()
            file, line, col = _locate(doc, pth, "value", overridden)
            p = dataclasses.replace(p, file=file, line=line, col=col)
        problems.append(p)
    errors = [p for p in _ordered(problems) if p.severity == "error"]
    warnings = [p for p in _ordered(problems) if p.severity != "error"]
    if errors:
        raise RecipeInvalid(errors + warnings)
    return obj, warnings
