"""The one scrubber: every secret value becomes ``***`` in everything inkctl prints.

Events of ``up`` go through a ``ScrubbingSink``; ``logs`` (text, JSON, ``-f``), ``status``,
``watch`` events and every error message go through ``active()``, which a command that loads
a recipe arms with the secret values it can read on this machine (``arm``). Engines echo
their environment into their logs; inkctl must not print what they echo.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from inkctl.secret import MASK


class Scrubber:
    """Replaces every known secret value in any outgoing string by ***."""

    def __init__(self, values: list[str] | tuple[str, ...] = ()):
        # longest first, so a secret containing another is masked whole
        self.values = sorted({v for v in values if v}, key=len, reverse=True)

    def text(self, s: str) -> str:
        for v in self.values:
            if v in s:
                s = s.replace(v, MASK)
        return s

    def error(self, e: Any) -> None:
        """Mask an error's message and hint in place (an ``InkctlError``: its args follow its
        message), before it is raised on to the one who prints it."""
        e.message, e.hint = self.text(e.message), self.text(e.hint) if e.hint else e.hint
        e.args = (e.message,)

    def __call__(self, obj: Any) -> Any:
        if not self.values:
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, (list, tuple)):
            return type(obj)(self(x) for x in obj)
        if isinstance(obj, dict):
            return {k: self(v) for k, v in obj.items()}
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return dataclasses.replace(obj, **{f.name: self(getattr(obj, f.name)) for f in dataclasses.fields(obj)})
        return obj


_ACTIVE = Scrubber()


def active() -> Scrubber:
    """The scrubber of the running command (it masks nothing before ``arm``)."""
    return _ACTIVE


def arm(values) -> Scrubber:
    """Add secret values to the running command's scrubber; returns it."""
    global _ACTIVE
    _ACTIVE = Scrubber([*_ACTIVE.values, *values])
    return _ACTIVE


def arm_for(recipe) -> Scrubber:
    """Arm with every secret of ``recipe`` that can be read on this machine. Commands that only
    read (logs, status, watch) do not need the values, but must mask what the engines echo;
    an unreadable secret cannot be echoed by anything inkctl started from here with it."""
    from inkctl.secret import readable_values

    return arm(readable_values(getattr(recipe, "secrets", None) or {}))
