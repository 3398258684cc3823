"""The one place an argv becomes shell text.

Remote commands travel over SSH as a string that the remote user's shell parses; every
argument is quoted here so that any value (quotes, ';', '$()', backticks, newlines,
unicode) arrives literally. Nothing else in inkctl concatenates shell text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence


def command_line(argv: Sequence[str]) -> str:
    """Quote ``argv`` for a POSIX shell; ``shlex.split(command_line(a)) == list(a)``."""
    if not argv:
        raise ValueError("an empty argv is not a command")
    return shlex.join(argv)


def shell_words(argv: Sequence[str], variables: Mapping[str, str]) -> str:
    """Like ``command_line``, but each occurrence of a token in ``variables`` (token -> shell
    variable name) becomes ``"${NAME}"``, expanded when the script runs; everything else is
    quoted literally. For scripts whose values come from where they run (a Slurm allocation)."""
    if not argv:
        raise ValueError("an empty argv is not a command")
    if not variables:
        return command_line(argv)
    pattern = re.compile("|".join(re.escape(t) for t in sorted(variables, key=len, reverse=True)))
    words = []
    for arg in argv:
        parts, pos = [], 0
        for m in pattern.finditer(arg):
            if m.start() > pos:
                parts.append(shlex.quote(arg[pos:m.start()]))
            parts.append(f'"${{{variables[m.group(0)]}}}"')
            pos = m.end()
        if pos < len(arg) or not parts:
            parts.append(shlex.quote(arg[pos:]))
        words.append("".join(parts))
    return " ".join(words)
