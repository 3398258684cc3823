"""What a recipe's ``api_key`` must be: a secret it defines, never a flag on a command line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.errors import Problem

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

# flags that would put a key on the engine's command line (seen by `ps` on the host)
KEY_FLAGS = ("--api-key", "--admin-api-key")


def api_key_findings(r: "Recipe") -> list[Problem]:
    out: list[Problem] = []
    for i, x in enumerate(r.engine.args.extra):
        flag = x.split("=", 1)[0]
        if flag in KEY_FLAGS:
            out.append(Problem(f"{flag} on the command line shows the key to anyone who runs `ps` on the host",
                               path=f"engine.args.extra[{i}]",
                               hint="remove it; name a secret in api_key instead (e.g. api_key: API_KEY with "
                                    "secrets: {API_KEY: {env: MY_KEY}}): the engine gets it without a command line"))
    name = r.api_key
    if name is None:
        return out
    if name not in r.secrets:
        defined = ", ".join(sorted(r.secrets)) or "none"
        out.append(Problem(f"api_key names {name}, which the secrets section does not define (defined: {defined})",
                           path="api_key", hint=f"add it: secrets: {{{name}: {{env: {name}}}}} (or file: PATH)"))
    from inkctl.recipe.engine_registry import spec_of

    spec = spec_of(r.engine.kind)
    if spec.api_key_config:
        for i, x in enumerate(r.engine.args.extra):
            if x.split("=", 1)[0] == "--config":
                out.append(Problem(f"with api_key, inkctl hands {spec.name} its key in a --config file, and "
                                   f"{spec.name} takes only one --config", path=f"engine.args.extra[{i}]",
                                   hint="move the options of your config file into engine.args"))
    return out
