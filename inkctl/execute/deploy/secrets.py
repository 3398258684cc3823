"""A host's env file: the one place a secret's value is revealed.

The secrets themselves are resolved on the control machine before anything starts
(``inkctl.secret.resolve_secrets``); the values live only in ``Secret`` objects until
``render_env_file`` writes the bytes of a host's 0600 env file.
"""

from __future__ import annotations

from inkctl.plan.step import EnvFile, FabricRef, SecretRef
from inkctl.secret import Secret


def render_env_file(env: EnvFile, secrets: dict[str, Secret], fabric: dict[str, str] | None = None) -> bytes:
    """The one place a secret's value is revealed: the content of a 0600 env file. ``fabric``:
    the values the host's preflight read for the plan's ``FabricRef``s; one it did not read
    leaves its line out (NCCL then chooses by itself, as without the variable)."""
    lines = []
    for key, value in env.entries:
        if isinstance(value, SecretRef):
            lines.append(f"{key}={secrets[value.name].reveal()}\n")
        elif isinstance(value, FabricRef):
            if (fabric or {}).get(value.what):
                lines.append(f"{key}={(fabric or {})[value.what]}\n")
        else:
            lines.append(f"{key}={value}\n")
    return "".join(lines).encode()
