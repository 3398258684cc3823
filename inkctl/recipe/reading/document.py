"""A YAML document read into plain Python data, with the source position of every path in it.

Why not ``yaml.safe_load``: it throws positions away, silently keeps the last of two
duplicate keys, expands alias bombs without limit, and the C composer recurses once per
nesting level (tens of thousands of ``[`` crash the interpreter). So we read libyaml's
*event* stream (fast, iterative), compose a small node tree ourselves under limits (depth,
expanded size, recursive or undefined aliases), then construct plain data while recording
where every path starts.

Scalars follow the YAML 1.2 core schema: ``NO``, ``on`` and ``1:30`` stay strings and
dates stay strings. Merge keys (``<<: *defaults``) are supported; any tag outside the core
schema is refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from inkctl.codes import code
from inkctl.errors import Problem, RecipeInvalid
from inkctl.recipe.reading.paths import described, dotted, normalize, parse_path

__all__ = ["Document", "Located", "parse", "parse_document", "MAX_NODES", "MAX_DEPTH", "LIBYAML"]

MAX_NODES = 100_000  # values after alias expansion; a real recipe has a few hundred
MAX_DEPTH = 100  # nesting levels; keeps our own recursion far below Python's limit

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # only its parser (events) is used
LIBYAML = _Loader.__name__.startswith("C")  # the pure-Python parser words some syntax errors differently
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


def _fatal(kind: str, file: str, message: str, line: int | None = None, col: int | None = None,
           hint: str | None = None) -> RecipeInvalid:
    """The document cannot be read at all: one problem, since nothing after it would mean anything."""
    return RecipeInvalid([Problem(message, "", file, line, col, hint, code=code(kind))])


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



class Located(NamedTuple):
    """Where one path of a document was written. (A named tuple: a document records one for every
    path, and a tuple is made several times faster than a frozen dataclass.)"""

    line: int  # 1-based, where the value starts
    col: int
    key: tuple[int, int] | None  # where its mapping key starts (None for list items and the root)
    raw: str | None  # source text of a plain scalar (for "put it in quotes" hints)
    collection: bool  # a mapping or list, not a scalar


class Document:
    """Parsed YAML: ``data`` (plain Python) plus where every path in it was written.

    Paths are tuples of mapping keys (str) and list indices (int), or the dotted form
    ``hosts[1].name``. Positions are 1-based ``(line, col)``. ``problems`` are the
    non-fatal problems found while reading (duplicate keys, bad tags, ...); ``refused``
    the paths whose value was dropped because of one of them.
    """

    def __init__(self, data: Any, file: str, located: dict[tuple, Located], problems: list[Problem],
                 refused: set[tuple]):
        self.data, self.file = data, file
        self._located = located
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.refused: frozenset[tuple] = frozenset(refused)

    def located(self, path: tuple | str) -> Located | None:
        """Where ``path`` was written, or None if the document has no such path."""
        key = self.normalized(path)
        return None if key is None else self._located.get(key)

    def position(self, path: tuple | str) -> tuple[int, int] | None:
        """Where the value at ``path`` starts, or None if the document has no such path."""
        at = self.located(path)
        return (at.line, at.col) if at else None

    def is_refused(self, path: tuple) -> bool:
        """True when ``path`` lies in a value that was refused (and reported) while reading."""
        return any(path[: len(r)] == r for r in self.refused)

    def forget(self, prefix: tuple) -> None:
        """The value at ``prefix`` was replaced (by ``--set``): the file's text no longer says where it is."""
        for stale in [p for p in self._located if p[: len(prefix)] == prefix]:
            del self._located[stale]

    def normalized(self, path: tuple | str) -> tuple | None:
        """``path`` as a tuple whose list indices are ints; None when it is not a path at all."""
        try:
            return normalize(self.data, parse_path(path) if isinstance(path, str) and path else tuple(path))
        except ValueError:
            return None


# ---------------------------------------------------------------- reading and composing


def _read(source: str | bytes | Path, filename: str | None) -> tuple[str, str]:
    """Source to text. A ``Path`` is read from disk; ``str``/``bytes`` are the document itself."""
    raw: str | bytes
    if isinstance(source, Path):
        file = filename or str(source)
        try:
            raw = source.read_bytes()
        except FileNotFoundError:
            raise _fatal("unreadable-file", file, "file not found", hint="check the path") from None
        except IsADirectoryError:
            raise _fatal("unreadable-file", file, "is a directory, not a file") from None
        except OSError as e:
            raise _fatal("unreadable-file", file, f"cannot read the file: {e.strerror or e}") from None
    else:
        file, raw = filename or "<text>", source
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            before = raw[: e.start].decode("utf-8-sig", "replace")
            raise _fatal("invalid-text", file, f"not valid UTF-8: byte 0x{raw[e.start]:02x} cannot be decoded",
                         *_line_col(before, len(before)), "save the file as UTF-8") from None
    else:
        text = raw
    bad = _NON_PRINTABLE.search(text)
    if bad:
        raise _fatal("invalid-text", file, f"character U+{ord(bad.group()):04X} is not allowed in YAML", *_line_col(text, bad.start()),
                     "remove it, or write it as an escape in a double-quoted string")
    return text, file


class _Composer:
    """The state of one document's composition: anchors, the open collections, the running count
    of values (aliases expanded). ``feed`` takes one event and returns the node it completes, or
    None while a collection stays open."""

    def __init__(self, file: str):
        self.file = file
        self.anchors: dict[str, _Node] = {}
        self.opened: set[str] = set()  # anchors of collections not yet closed: an alias to one is a cycle
        self.stack: list[tuple[_Node, str | None]] = []
        self.total = 0

    @property
    def parent(self) -> _Node | None:
        return self.stack[-1][0] if self.stack else None

    def feed(self, ev, line: int, col: int) -> _Node | None:
        if isinstance(ev, yaml.AliasEvent):
            return self._alias(ev, line, col)
        if isinstance(ev, yaml.ScalarEvent):
            self.total += 1
            parent = self.parent
            is_key = parent is not None and parent.kind == "map" and len(parent.value) % 2 == 0
            node = _scalar(ev, line, col, is_key)
            if ev.anchor:
                self.anchors[ev.anchor] = node
            return node
        if isinstance(ev, yaml.CollectionStartEvent):
            self._open(ev, line, col)
            return None
        return self._close()  # CollectionEndEvent

    def _alias(self, ev, line: int, col: int) -> _Node:
        node = self.anchors.get(ev.anchor or "")
        if node is None and ev.anchor in self.opened:
            raise _fatal("bad-alias", self.file, f"alias '*{ev.anchor}' refers to a node that contains it (recursive alias)",
                         line, col)
        if node is None:
            raise _fatal("bad-alias", self.file, f"alias '*{ev.anchor}' is not defined", line, col,
                         f"define '&{ev.anchor}' before using it")
        self.total += node.size
        if len(self.stack) + node.height > MAX_DEPTH:
            raise _fatal("too-large", self.file, f"nesting deeper than {MAX_DEPTH} levels after expanding alias '*{ev.anchor}'",
                         line, col)
        return node

    def _open(self, ev, line: int, col: int) -> None:
        self.total += 1
        if len(self.stack) >= MAX_DEPTH:
            raise _fatal("too-large", self.file, f"nesting deeper than {MAX_DEPTH} levels", line, col)
        kind = "map" if isinstance(ev, yaml.MappingStartEvent) else "seq"
        node = _Node(kind, [], line, col)
        if ev.tag not in (None, "!", _CORE + kind):
            node.error = _tag_error(ev.tag)
        if ev.anchor:
            self.opened.add(ev.anchor)
        self.stack.append((node, ev.anchor))

    def _close(self) -> _Node:
        node, anchor = self.stack.pop()
        node.size = 1 + sum(c.size for c in node.value)
        node.height = 1 + max((c.height for c in node.value), default=0)
        if anchor:
            self.opened.discard(anchor)
            self.anchors[anchor] = node
        return node


def _compose(text: str, file: str) -> _Node | None:
    """Build the node tree of the single document in ``text`` (None when empty), iteratively."""
    loader = _Loader(text)
    try:
        loader.get_event()  # StreamStart
        if loader.check_event(yaml.StreamEndEvent):
            return None
        loader.get_event()  # DocumentStart
        root = _tree(loader, _Composer(file))
        loader.get_event()  # DocumentEnd
        if not loader.check_event(yaml.StreamEndEvent):
            mark = loader.peek_event().start_mark
            raise _fatal("many-documents", file, "the file holds more than one YAML document", mark.line + 1, mark.column + 1,
                         "remove the second '---' and everything after it, or split the file")
        return root
    except yaml.MarkedYAMLError as e:
        raise _syntax(e, text, file) from None
    except yaml.YAMLError as e:  # reader errors carry no mark
        raise _fatal("yaml-syntax", file, f"invalid YAML: {e}", 1, 1) from None
    finally:
        loader.dispose()


def _tree(loader, c: _Composer) -> _Node:
    """The document's root: events fed to the composer until the outermost node is complete."""
    while True:
        ev = loader.get_event()
        line, col = ev.start_mark.line + 1, ev.start_mark.column + 1
        node = c.feed(ev, line, col)
        if node is None:
            continue
        if c.total > MAX_NODES:
            raise _fatal("too-large", c.file, f"the document expands to more than {MAX_NODES} values through aliases",
                         line, col, "this looks like an alias bomb; remove the nested '*' references")
        parent = c.parent
        if parent is None:
            return node
        parent.value.append(node)  # a map keeps [key, value, key, value, ...]


# The node trees of the last few documents composed, by file name and text. `inkctl validate`
# reads a file to tell a recipe from an inventory, again to load it, and a third time to place a
# warning found late; the text is read each time, and an unchanged text is not composed again.
# A tree is never changed once composed: each reading builds its own data from it.
_COMPOSED: dict[tuple[str, str], _Node | None] = {}
_KEEP = 16


def _composed(text: str, file: str) -> _Node | None:
    key = (file, text)
    if key in _COMPOSED:
        return _COMPOSED[key]
    root = _compose(text, file)
    if len(_COMPOSED) >= _KEEP:
        _COMPOSED.clear()
    _COMPOSED[key] = root
    return root


def _syntax(e: yaml.MarkedYAMLError, text: str, file: str) -> RecipeInvalid:
    """PyYAML's parse error, with the offending character named (libyaml omits it) and a hint."""
    mark = e.problem_mark or e.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    rows = _BREAK.split(text)
    if line > len(rows):  # libyaml can put the end of the stream one line past the end
        line, col = len(rows), len(rows[-1]) + 1
    tab = _indent_tab(rows, line)
    if tab:  # the parser's words ("while scanning a plain scalar") would not say what is wrong
        return _fatal("tab-indent", file, "tab character used for indentation; YAML indents with spaces", *tab,
                      "replace the tab with spaces")
    message, hint = str(e.problem or e.context), None
    if e.context and e.context_mark and e.context_mark is not mark and "next token" not in e.context:
        hint = f"{e.context} that starts at line {e.context_mark.line + 1}"
    if "cannot start any token" in message:
        ch = rows[line - 1][col - 1] if col <= len(rows[line - 1]) else "?"
        message = f"found character {ch!r} that cannot start any token"
        hint = ("indent with spaces: YAML does not allow tabs" if ch == "\t"
                else f"put the value in quotes ({ch!r} is reserved)")
    return _fatal("yaml-syntax", file, f"invalid YAML: {message}", line, col, hint)


def _indent_tab(rows: list[str], upto: int) -> tuple[int, int] | None:
    """(line, col) of the tab in the indentation nearest above line ``upto`` (inclusive), if any."""
    for n in range(min(upto, len(rows)), 0, -1):
        row = rows[n - 1]
        indent = row[: len(row) - len(row.lstrip(" \t"))]
        if "\t" in indent and row.strip():
            return n, indent.index("\t") + 1
    return None


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
        except ValueError as e:  # e.g. more digits than int() accepts: keep the text
            import logging  # here: loading a recipe imports no logging (start-up, benchmarks/startup.py)

            logging.getLogger(__name__).debug("%.40s stays text: %s", v, e)
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
        self.file = file
        self.located: dict[tuple, Located] = {}
        self.problems: list[Problem] = []
        self.refused: set[tuple] = set()

    def problem(self, kind: str, path: tuple, node: _Node, message: str, hint: str | None = None) -> None:
        self.problems.append(Problem(message, dotted(path), self.file, node.line, node.col, hint, code=code(kind)))

    def build(self, node: _Node, path: tuple, key_at: tuple[int, int] | None) -> Any:
        self.located[path] = Located(node.line, node.col, key_at, node.raw, node.kind != "scalar")
        if node.error:
            self.problem("unsupported-tag", path, node, *node.error)
            self.refused.add(path)
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
                got = "a mapping" if k.kind == "map" else "a list" if k.kind == "seq" else described(key)
                hint = f'put it in quotes: "{k.raw}"' if k.raw else None
                self.problem("key-not-string", path, k, f"mapping keys must be strings, got {got}", hint)
                continue
            if key in first:
                if merged:  # keys written out win over merged ones
                    continue
                self.problem("duplicate-key", path + (key,), k, f"duplicate key '{key}' (first defined at line {first[key]})",
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
                        self.problem("bad-merge", path, src, "'<<' must be followed by a mapping or a list of mappings")
                        continue
                    out += [(k2, v2, True) for k2, v2, _ in self.entries(src, path)]
        return out


def parse(source: str | bytes | Path, filename: str | None, *, mapping: bool = True) -> Document:
    """Read, compose and build; ``mapping``: the document must be a non-empty mapping."""
    text, file = _read(source, filename)
    root = _composed(text, file)
    if mapping:
        if root is None or (root.kind == "scalar" and root.value is None and not root.error):
            raise _fatal("not-a-mapping", file, "the document is empty", 1, 1, "a recipe is a YAML mapping of fields, e.g. 'engine: ...'")
        if root.kind != "map":
            got = "a list" if root.kind == "seq" else "a tagged value" if root.error else described(root.value)
            raise _fatal("not-a-mapping", file, f"the document must be a mapping of fields, got {got}", root.line, root.col)
        if root.error:
            raise _fatal("unsupported-tag", file, root.error[0], root.line, root.col, root.error[1])
    builder = _Builder(file)
    data = builder.build(root, (), None) if root is not None else None
    return Document(data, file, builder.located, builder.problems, builder.refused)


def parse_document(path_or_text: str | bytes | Path, *, filename: str | None = None) -> Document:
    """Parse one YAML mapping. A ``Path`` is read from disk; a ``str`` or ``bytes`` is the text itself
    (a str is never guessed to be a file name). ``filename`` names it in problems.

    Raises RecipeInvalid (every problem, located) for anything wrong with the YAML itself.
    """
    doc = parse(path_or_text, filename)
    if doc.problems:
        raise RecipeInvalid(sorted(doc.problems, key=lambda p: (p.line or 0, p.col or 0)))
    return doc

