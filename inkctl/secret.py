"""A value that must never be shown: not in plans, logs, errors, JSON or a remote ``ps``.

A recipe names where each secret comes from (an environment variable or a file here), never
its value. All are resolved up front on the control machine (``resolve_secrets``): a missing
one fails ``up`` before the first connection, naming the secret and where it was looked for.
The values then live only in ``Secret`` objects, revealed in two places: the bytes of a host's
0600 env file (``execute.deploy.secrets``) and, for the recipe's ``api_key``, the Authorization
header of inkctl's own requests to the endpoint (``execute.deploy.runner``), both behind the
scrubber.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from inkctl.errors import InkctlError

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


MIN_SECRET_LEN = 8  # shorter values cannot be masked without masking ordinary text


# RFC 6750's b64token: what an ``Authorization: Bearer`` header carries
BEARER = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def resolve_secrets(sources: dict, names: list[str] | tuple[str, ...] | None = None, *,
                    bearer: str | None = None) -> dict[str, Secret]:
    """name -> Secret for every name (default: all of ``sources``); every problem reported at once.
    ``bearer`` names the API key: its value must be a bearer token (letters, digits, ``-._~+/``)."""
    wanted = list(sources) if names is None else list(dict.fromkeys(names))
    out: dict[str, Secret] = {}
    problems: list[str] = []
    for name in wanted:
        src = sources.get(name)
        if src is None:
            problems.append(f"{name}: the plan needs it but the recipe's secrets section does not define it")
            continue
        value, why = _read(src)
        if value is None:
            problems.append(f"{name}: {why}")
        elif "\n" in value or "\r" in value:
            problems.append(f"{name}: the value from {src.describe()} spans several lines; an env file holds one line per variable")
        elif len(value) < MIN_SECRET_LEN:
            problems.append(f"{name}: the value from {src.describe()} has {len(value)} character"
                            f"{'s' if len(value) != 1 else ''}; inkctl masks every secret value in all it prints, and "
                            f"masking one shorter than {MIN_SECRET_LEN} characters would shred the output "
                            "(every occurrence of those letters becomes ***): use the real secret")
        elif name == bearer and not BEARER.fullmatch(value):
            problems.append(f"{name}: the value from {src.describe()} is the recipe's api_key but is not a bearer "
                            "token (letters, digits and - . _ ~ + / only, as an Authorization header carries it)")
        else:
            out[name] = Secret(name, value)
    if problems:
        n = len(problems)
        raise InkctlError(
            f"{n} secret{'s' if n != 1 else ''} could not be resolved on this machine (nothing was started):\n"
            + "\n".join("  " + p for p in problems),
            hint="export the variable or create the file the recipe's secrets section names, then run again",
            exit_code=2)
    return out


def _read(src) -> tuple[str | None, str]:
    if src.env:
        value = os.environ.get(src.env)
        if value is None or value == "":
            return None, f"environment variable {src.env} is not set (or empty) on this machine"
        return value, ""
    if src.file:
        path = Path(os.path.expanduser(src.file))
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None, f"file {path} does not exist"
        except OSError as e:
            return None, f"cannot read file {path}: {e.strerror}"
        first = text.splitlines()[0].strip() if text.strip() else ""
        if not first:
            return None, f"file {path} is empty"
        return first, ""
    return None, "the recipe gives neither env nor file for it"


def secret_values(secrets: dict[str, Secret]) -> list[str]:
    """For the scrubber: the values to mask in everything inkctl prints."""
    return [s.reveal() for s in secrets.values()]


def readable_values(sources: dict) -> list[str]:
    """The values of the secrets that can be read here (for masking); unreadable ones are skipped."""
    out = []
    for src in sources.values():
        value, _ = _read(src)
        if value:
            out.append(value)
    return out
