"""The terminal: rich's console, the small ``Plain`` printer, and folding lines to a screen's
width (on a terminal, and piped: ``Folded``) without breaking a path, a hash or a URL."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_CONSOLES: dict[str, Any] = {}


def console(stderr: bool = False) -> "Console":
    key = "err" if stderr else "out"
    if key not in _CONSOLES:
        from rich.console import Console

        stream = sys.stderr if stderr else sys.stdout
        # on a terminal lines wrap at its width (by words, as rich does); piped, a line stays whole
        _CONSOLES[key] = Console(stderr=stderr, highlight=False, soft_wrap=not _isatty(stream))
    return _CONSOLES[key]


class Plain:
    """A small printer for the paper commands (validate, plan) and errors: rich's look for the few
    styles we use, without importing rich (benchmarks/startup.py measures why). Markup is the subset
    ``[red]``, ``[dim]``, ``[bold cyan]``, ... ``[/]``; colour only on a terminal, never with NO_COLOR."""

    CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36"}

    def __init__(self, stream):
        import os

        self.stream = stream
        self._line = ""  # what a print(..., end="") left on the current line, as it shows
        self.color = stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"

    def _markup(self, text: str) -> str:
        import re

        def tag(m: "re.Match[str]") -> str:
            if m.group(0).startswith("\\"):  # escaped: the text itself
                return m.group(0)[1:]
            words = m.group(1).split()
            if m.group(1) == "/":
                return "\x1b[0m" if self.color else ""
            if not all(w in self.CODES for w in words):
                return m.group(0)
            return f"\x1b[{';'.join(self.CODES[w] for w in words)}m" if self.color else ""

        return re.sub(r"\\?\[(/|[a-z ]+)\]", tag, text)

    def print(self, text: str = "", *, end: str = "\n", markup: bool = True, style: str | None = None, **_) -> None:
        if markup:
            text = self._markup(text)
        if style and self.color:
            text = self._markup(f"[{style}]") + text + "\x1b[0m"
        width = terminal_width(self.stream)
        if width and end == "\n":
            # what this line already shows (a print(..., end="") before) is folded with it, so the
            # break and the hanging indent follow the whole line, not a column count
            before = self._line
            lines = text.split("\n")
            first = fold(before + lines[0], width)
            first[0] = first[0][len(before):]
            text = "\n".join(first + [ln for rest in lines[1:] for ln in fold(rest, width)])
        self._line = "" if end == "\n" else self._line + visible(text)
        self.stream.write(text + end)


def visible(text: str) -> str:
    """The text as the screen shows it: without colour codes."""
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text) if "\x1b" in text else text


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_width(stream) -> int | None:
    """The width lines must fit: the terminal's (COLUMNS wins, as everywhere); None when piped."""
    import os

    if not _isatty(stream):
        return None
    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    if cols <= 0:
        try:
            cols = os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            return None
    return cols if cols >= 20 else None


_ANSI = None


def fold(line: str, width: int) -> list[str]:
    """One line as screen lines of at most WIDTH visible columns: broken between words, the rest
    indented 4 more than the line; a word wider than the screen is cut where the screen ends.
    An ``inkctl ...`` command in the line stays copy-pasteable: a break inside it ends with
    `` \\`` (the shell's line continuation); the command ends at a word ending in ``;`` or ``,``
    or at a lone ``/``. (A plan's argv is broken by ``_shell`` before it gets here.)"""
    import re

    global _ANSI
    if _ANSI is None:
        _ANSI = re.compile(r"\x1b\[[0-9;]*m")

    def vis(t: str) -> int:
        return len(_ANSI.sub("", t)) if "\x1b" in t else len(t)

    if vis(line) <= width:
        return [line]
    lead = re.match(r"((?:\x1b\[[0-9;]*m)+)( +)", line)  # a style opened before the indent: indent first
    if lead:
        line = lead.group(2) + lead.group(1) + line[lead.end():]
    indent = len(line) - len(line.lstrip(" "))
    hang = " " * min(indent + 4, width // 3)
    out: list[str] = []
    cur = " " * indent
    in_cmd = False  # the words so far are inside an inkctl command
    words = line.lstrip(" ").split(" ")
    for i, word in enumerate(words):
        bare = _ANSI.sub("", word)
        if in_cmd and (bare == "/" or bare.startswith("(")):  # prose again: "X / Y", "X (what it does)"
            in_cmd = False
        room = width - (2 if in_cmd else 0)  # a break inside a command needs room for " \\"
        if cur.strip() and vis(cur) + 1 + vis(word) > room:
            out.append(cur + (" \\" if in_cmd else ""))
            cur = hang
        elif cur.strip():
            cur += " "
        cur += word
        if bare == "$" or (bare == "inkctl" and _command_follows(words, i)):
            in_cmd = True
        elif in_cmd and bare.endswith((";", ",")):
            in_cmd = False
        while vis(cur) > width and "\x1b" not in cur and not _whole(bare):  # one word wider than the screen
            out.append(cur[:width])
            cur = hang + cur[width:]
    out.append(cur)
    return out


def _command_follows(words: list[str], i: int) -> bool:
    """``inkctl`` at words[i] starts a command when a command name follows ("inkctl up ..."), not
    in prose ("inkctl masks every secret")."""
    from inkctl.cli.common.helptext import LISTING

    nxt = _ANSI.sub("", words[i + 1]) if i + 1 < len(words) and _ANSI else (words[i + 1] if i + 1 < len(words) else "")
    return nxt in LISTING or nxt in ("--help", "--version", "-h")


def _whole(word: str) -> bool:
    """A word that must stay whole to be pasted: a path, a URL, a hash (it runs past the screen)."""
    import re

    return "/" in word or "://" in word or re.search(r"[0-9a-f]{12,}", word) is not None


def screen_width() -> int:
    """The width output must fit where no terminal says it: COLUMNS, else 80."""
    import os

    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    return cols if cols >= 20 else 80


class Folded:
    """A text stream that folds every line it is given to ``width`` (``fold``) before passing it
    on: what a command prints to a pipe or a file fits a screen as it does on a terminal. A
    line is passed on when it ends; ``flush`` passes on what there is of it and remembers the
    column, so the rest of the line is folded as if it had come at once."""

    def __init__(self, stream, width: int):
        self.stream, self.width = stream, width
        self._pending = ""  # the unfinished line
        self._column = 0  # what of the unfinished line was already passed on (flush)

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            *lines, self._pending = self._pending.split("\n")
            out = []
            for line in lines:
                out += self._fold(line)
                self._column = 0
            self.stream.write("".join(x + "\n" for x in out))
        return len(text)

    def _fold(self, line: str) -> list[str]:
        col = self._column
        got = fold(" " * col + line, self.width)
        got[0] = got[0][col:]
        return got

    def flush(self) -> None:
        if self._pending:
            *done, last = self._fold(self._pending)
            self.stream.write("".join(x + "\n" for x in done) + last)
            self._column = len(last) if done else self._column + len(last)
            self._pending = ""
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:  # fileno, encoding, errors, buffer ...: the stream's own
        return getattr(self.stream, name)


def relative(text: str) -> str:
    """Absolute paths in TEXT as paths relative to the current directory where that is shorter:
    what the user typed, and what fits a screen (a bundled recipe inside site-packages too)."""
    import os
    import re

    try:
        cwd = os.getcwd()
    except OSError:
        return text

    def short(m: "re.Match[str]") -> str:
        path = m.group(0)
        tail = ""
        while path and path[-1] in ".,;)":  # the sentence's punctuation, not the path's
            path, tail = path[:-1], path[-1] + tail
        if path == cwd:  # the directory itself: its name says more than "."
            return m.group(0)
        try:
            rel = os.path.relpath(path, cwd)
        except ValueError:
            return m.group(0)
        under = rel != os.pardir and not rel.startswith(os.pardir + os.sep)  # ../x is no help: a path under the cwd only
        return (rel if under and len(rel) < len(path) else path) + tail

    return re.sub(r"(?<![\w.~/-])/(?:[\w.@+-]+/?)+", short, text)


def plain(stderr: bool = False) -> Plain:
    return Plain(sys.stderr if stderr else sys.stdout)


def escape(text: str) -> str:
    """Text that prints as itself inside Plain's markup: a backslash before anything that looks
    like a style tag (``[red]``, ``[/]``), as rich does; any other text is returned unchanged."""
    import re

    return re.sub(r"\[(/|[a-z ]+)\]", lambda m: "\\" + m.group(0), text)
