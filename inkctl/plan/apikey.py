"""How an engine gets the recipe's API key (``api_key``) without a command line.

vLLM reads ``VLLM_API_KEY`` from its environment: the rank's 0600 env file carries it.
SGLang has no such variable; it reads ``--api-key`` from a YAML file named by ``--config``
(``server_args_config_parser``: the file's keys become flags inside the process, so its argv
shows only the path). The env file carries the key as ``INKCTL_API_KEY`` and a constant
``sh`` prologue (no value in it) writes the 0600 file inside the container with the shell's
builtin ``printf``, drops the variable and ``exec``s the engine with ``--config FILE``. Nothing
in any argv, in the plan or in ``ps`` holds the value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.plan.step import SecretRef

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

CONFIG_FILE = "/tmp/inkctl-api-key.yaml"  # inside the container (its own /tmp)


def prologue(path: str = CONFIG_FILE) -> str:
    """The constant script (no value in it): the key's 0600 YAML file, then the engine with --config.
    The value is bearer-token syntax (``inkctl.secret.BEARER``): no quote in it ends the YAML scalar."""
    return ("umask 077 && printf \"api-key: '%s'\\n\" \"$INKCTL_API_KEY\" > " + path
            + " && unset INKCTL_API_KEY && exec \"$@\" --config " + path)




def env_entries(recipe: "Recipe") -> tuple[tuple[str, SecretRef], ...]:
    """The env file's extra line for the key, under the name the engine's rank reads."""
    name = recipe.api_key
    if name is None:
        return ()
    from inkctl.recipe.engine_registry import spec_of

    var = next(iter(spec_of(recipe.engine.kind).api_key_env), None)  # the variable the engine's rank reads
    if var is None or var == name:
        return ()
    return ((var, SecretRef(name)),)


def wrap(recipe: "Recipe", command: list[str]) -> list[str]:
    """The rank's command, behind the prologue when its engine reads the key from a file."""
    from inkctl.recipe.engine_registry import spec_of

    if recipe.api_key is None or not spec_of(recipe.engine.kind).api_key_config:  # the config-file prologue
        return command
    return ["/bin/sh", "-c", prologue(), "inkctl-api-key", *command]
