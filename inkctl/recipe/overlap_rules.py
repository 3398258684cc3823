"""Things said twice, or said and then not passed: a variable in the environment beside the typed
field that passes the same setting, and a value the engine derives itself and never receives."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.errors import Problem

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

# vLLM: the environment variable older releases read, and the expert field whose flag replaced it
_VLLM_ENV_OF_FIELD = {"VLLM_ALL2ALL_BACKEND": "all2all_backend"}


def overlap_findings(r: "Recipe") -> list[Problem]:
    out: list[Problem] = []
    ep, a = r.engine.args.expert, r.engine.args
    if r.engine.kind != "vllm" or ep is None:
        return out
    for var, field in _VLLM_ENV_OF_FIELD.items():
        typed, env = getattr(ep, field), r.container.env.get(var)
        if typed is None or env is None:
            continue
        same = env == typed
        out.append(Problem(f"{var}={env} in the environment beside expert.{field}: {typed} (--all2all-backend): "
                           + ("the same setting twice" if same else "two different backends; the flag wins in "
                              "releases that have it, the variable in older ones"),
                           path=f"container.env.{var}", severity="warning" if same else "error",
                           hint=f"keep expert.{field} and remove {var} from container.env"))
    size = a.tensor_parallel * a.data_parallel.size
    if ep.size is not None and ep.size == size:
        out.append(Problem(f"vLLM takes no expert size: it spreads the experts over tensor_parallel x data_parallel = "
                           f"{size} ranks itself, so size: {ep.size} is not passed (the same number)",
                           path="engine.args.expert.size", severity="warning", hint="remove size"))
    return out
