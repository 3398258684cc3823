"""The serve command of an imported recipe, read as the shell that would run it reads it.

sparkrun hands the rendered ``command`` to bash inside the container, so a recipe's command is a
small script: ``\\``-newline continuations, ``# comments``, quoted JSON, ``VAR=value`` before the
program, wrappers such as ``taskset -c 5-9`` or ``numactl ...``, and at times further commands
joined by ``&&`` or ``;``. This module finds the one command that starts the server and says
what else the script does; deciding what to keep is the caller's. Pure: no I/O.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from inkctl.errors import InkctlError

# the words that start a server, longest first (python3 -m sglang.launch_server before sglang)
SERVERS: tuple[tuple[str, ...], ...] = (
    ("python3", "-m", "sglang.launch_server"), ("python", "-m", "sglang.launch_server"),
    ("python3", "-m", "vllm.entrypoints.openai.api_server"), ("python", "-m", "vllm.entrypoints.openai.api_server"),
    ("vllm", "serve"), ("sglang", "serve"), ("llama-server",), ("trtllm-serve",),
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = {";", "&&", "||", "|", "&", "\n", ";;"}
_NO_EFFECT = {"exec", "env", "command"}  # words before the program that change nothing inkctl plans


class Refused(InkctlError):
    """A recipe inkctl cannot import faithfully; ``key`` is the top-level key at fault, ``text``
    a piece of its value that shows where (for the caller to give file:line)."""

    def __init__(self, message: str, *, key: str, text: str | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.key, self.text = key, text


@dataclass
class ShellCommand:
    """The server's command and what surrounds it in the script."""

    argv: list[str]  # the server program and its arguments
    env: dict[str, str] = field(default_factory=dict)  # VAR=value words before the program
    wrappers: list[str] = field(default_factory=list)  # other words before it (taskset -c 5-9)
    others: list[str] = field(default_factory=list)  # the script's other commands, as text
    notes: list[str] = field(default_factory=list)  # what reading it changed (a trailing backslash)


def read(text: str) -> ShellCommand:
    """The server command of a rendered shell script (raises when there is none)."""
    notes: list[str] = []
    text = _uncomment(text.replace("\\\r\n", " ").replace("\\\n", " "))
    stripped = text.rstrip()
    if _odd_trailing_backslash(stripped):
        text = stripped[:-1]
        notes.append("a trailing '\\' ends the command (bash would pass it to the engine as an argument): dropped")
    commands = _commands(_tokens(text))
    found = [(i, c, at) for i, c in enumerate(commands) if (at := _server_at(c)) is not None]
    if not found:
        raise InkctlError("the command starts no server inkctl knows (vllm serve, sglang serve, "
                          "python3 -m sglang.launch_server)", hint="write the serve command out and import again")
    i, words, at = found[0]
    expanded = expansions(text)
    if expanded:
        raise Expanded(expanded[0])
    env, wrappers = _before(words[:at])
    others = [shlex.join(c) for k, c in enumerate(commands) if k != i]
    return ShellCommand(argv=words[at:], env=env, wrappers=wrappers, others=others, notes=notes)


class Expanded(InkctlError):
    """The command leaves a value to the container's shell (``$VAR``, ``${VAR:-default}``, ``$(...)``)."""

    def __init__(self, text: str):
        super().__init__(f"{text} is expanded by the container's shell when sparkrun runs the command; inkctl "
                         "passes the engine its arguments without a shell",
                         hint="write the value out in the command, or set the variable under env:")
        self.text = text


_EXPANSION = re.compile(r"\$\{[^}]*\}|\$\([^)]*\)|\$[A-Za-z_][A-Za-z0-9_]*|`[^`]*`")


def expansions(text: str) -> list[str]:
    """What bash would expand: $... and `...` outside single quotes (a backslash escapes outside quotes)."""
    plain, quoted, escaped = [], False, False
    for ch in text:
        if escaped:
            escaped = False
            plain.append(" ")
            continue
        if ch == "\\" and not quoted:
            escaped = True
            plain.append(" ")
        elif ch == "'":
            quoted = not quoted
            plain.append(" ")
        else:
            plain.append(" " if quoted else ch)
    return _EXPANSION.findall("".join(plain))


def _odd_trailing_backslash(s: str) -> bool:
    return (len(s) - len(s.rstrip("\\"))) % 2 == 1


def _uncomment(text: str) -> str:
    """Lines that are only a comment go (their quotes would confuse the reader)."""
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("#"))


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|\n")
    lexer.whitespace_split = True
    lexer.whitespace = " \t\r"
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as e:
        raise InkctlError(f"the command is not a shell command line: {e}",
                          hint="check its quotes; a value with spaces needs them") from None


def _commands(tokens: list[str]) -> list[list[str]]:
    """Split at ; && || | & and newlines; an inline ``# comment`` runs to the end of its line."""
    out: list[list[str]] = [[]]
    comment = False
    for t in tokens:
        if t in _SEPARATORS or set(t) <= set(";&|\n"):
            comment = False
            out.append([])
        elif comment or t.startswith("#"):
            comment = True
        else:
            out[-1].append(t)
    return [c for c in out if c]


def _server_at(words: list[str]) -> int | None:
    for i in range(len(words)):
        if any(tuple(words[i:i + len(s)]) == s for s in SERVERS):
            return i
    return None


def _before(words: list[str]) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    wrappers: list[str] = []
    for w in words:
        if _ASSIGNMENT.match(w) and not wrappers:
            k, _, v = w.partition("=")
            env[k] = v
        elif w in _NO_EFFECT and not wrappers:
            continue
        else:
            wrappers.append(w)
    return env, wrappers
