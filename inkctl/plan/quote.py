"""The one place an argv becomes shell text.

Remote commands travel over SSH as a string that the remote user's shell parses; every
argument is quoted here so that any value (quotes, ';', '$()', backticks, newlines,
unicode) arrives literally. Nothing else in inkctl concatenates shell text.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence


def command_line(argv: Sequence[str]) -> str:
    """Quote ``argv`` for a POSIX shell; ``shlex.split(command_line(a)) == list(a)``."""
    if not argv:
        raise ValueError("an empty argv is not a command")
    return shlex.join(argv)
