"""Expected failures: each carries one clear message and an exit code.

Anything raised that is not an ``InkctlError`` is a bug and shows a traceback only
with ``--debug``; the CLI catches these in one place (``inkctl.cli.app``).
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK = 0
EXIT_FAILED = 1  # the deployment or a remote step failed
EXIT_INVALID = 2  # bad input: recipe, inventory, flags
EXIT_INTERRUPTED = 130


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 host``, ``2 hosts``, ``0 hosts``: a number with its noun in agreement."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input document, located as precisely as we can."""

    message: str
    path: str = ""  # dotted field path, e.g. "engine.args.tensor_parallel"
    file: str | None = None
    line: int | None = None  # 1-based
    col: int | None = None  # 1-based
    hint: str | None = None
    severity: str = "error"  # "error" | "warning"
    code: str = ""  # stable INKnnn code (inkctl/codes.py); every problem inkctl reports carries one

    @property
    def location(self) -> str:
        parts = [self.file or "<recipe>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        return ":".join(parts)

    def render(self) -> str:
        where = f"{self.location}: "
        field_ = f"{self.path}: " if self.path else ""
        text = f"{where}{self.severity}: {field_}{self.message}"
        if self.hint:
            text += f" (hint: {self.hint})"
        return text

    def as_dict(self) -> dict:
        from inkctl.codes import BY_CODE

        kind = BY_CODE.get(self.code)
        return {
            "code": self.code or None,
            "name": kind.name if kind else None,
            "severity": self.severity,
            "file": self.file,
            "line": self.line,
            "col": self.col,
            "path": self.path,
            "message": self.message,
            "hint": self.hint,
            "fix": self.hint or (kind.fix if kind else None),
        }


class InkctlError(Exception):
    """An expected failure with a message meant for a person."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def render(self) -> str:
        return self.message + (f"\nhint: {self.hint}" if self.hint else "")


class Cancelled(Exception):
    """The run was asked to stop (Ctrl-C, SIGTERM, a failure on another host), raised where the
    work notices it. Not an InkctlError: nothing that handles a failure may swallow it.
    ``started``: whether anything had been launched on a host when it was raised."""

    def __init__(self, *, started: bool = False):
        super().__init__("cancelled")
        self.started = started


class UsageError(InkctlError):
    """Bad flags or arguments."""

    exit_code = EXIT_INVALID


class RecipeInvalid(InkctlError):
    """A recipe or inventory failed to load; carries every problem found, not just the first."""

    exit_code = EXIT_INVALID

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        errors = [p for p in self.problems if p.severity == "error"]
        head = f"{counted(len(errors), 'problem')} found"
        super().__init__(head + ":\n" + "\n".join("  " + p.render() for p in self.problems))
