"""A value that must never be shown: not in plans, logs, errors, JSON or a remote ``ps``."""

from __future__ import annotations

MASK = "***"


class Secret:
    """Holds a secret value; every way of printing it yields ``***``.

    The only way to the value is :meth:`reveal`, called in exactly one place: where the
    executor writes a host's 0600 env file.
    """

    __slots__ = ("_value", "name")

    def __init__(self, name: str, value: str):
        self.name = name
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({self.name}={MASK})"

    def __str__(self) -> str:
        return MASK

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other.name == self.name and other._value == self._value

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self):  # never pickled with its value
        raise TypeError("a Secret cannot be pickled")
