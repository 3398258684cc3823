"""Speculative decoding with a draft model: a second model the engine loads beside the served one.

The draft is a model like the served one: ``inkctl lock`` pins its revision and files (the lock
file's ``models.draft``), ``inkctl weights`` puts it in the same Hub cache on every host and
preflight checks it there, so the engine finds it offline. ``draft_view`` is the recipe with the
draft in the model's place (recipe/draft.py): the pinning, copying and checking code runs on it
unchanged.

The engines' flags: vLLM ``--speculative-config`` (one JSON object: method, model,
num_speculative_tokens, revision); SGLang ``--speculative-algorithm`` with
``--speculative-draft-model-path`` (and ``--speculative-draft-model-revision``,
``--speculative-num-steps``, ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

from pydantic import Field

from inkctl.errors import Problem
from inkctl.recipe.fields import Strict, empty_list

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe


class DraftModel(Strict):
    """The draft model's repository and files."""

    repo: str = Field(min_length=1, description="Hugging Face repository id of the draft, e.g. 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B'.")
    revision: Optional[str] = Field(None, description="Repository revision (commit) of the draft.")
    include: list[str] = Field(default_factory=empty_list, description="Glob patterns of further files to fetch (as model.weights.include).")
    exclude: list[str] = Field(default_factory=empty_list, description="Glob patterns of files to leave out (as model.weights.exclude).")


class Speculative(Strict):
    """Speculative decoding: a draft proposes tokens, the served model verifies them."""

    method: str = Field(min_length=1, description="Algorithm: vLLM's speculative-config method (e.g. 'eagle3', 'eagle', 'mtp', 'ngram', 'draft_model'); SGLang's --speculative-algorithm (e.g. 'EAGLE3', 'EAGLE', 'NEXTN', 'STANDALONE', 'NGRAM').")
    draft: Optional[DraftModel] = Field(None, description="The draft model (none for methods without one: ngram, mtp/NEXTN heads inside the served model).")
    num_speculative_tokens: Optional[int] = Field(None, ge=1, le=64, description="vLLM num_speculative_tokens; SGLang --speculative-num-draft-tokens.")
    num_steps: Optional[int] = Field(None, ge=1, le=64, description="SGLang --speculative-num-steps.")
    eagle_topk: Optional[int] = Field(None, ge=1, le=64, description="SGLang --speculative-eagle-topk.")
    config: dict[str, Any] = Field(default_factory=dict, description="Further keys of vLLM's --speculative-config JSON object, passed as given (e.g. draft_tensor_parallel_size: 1). vLLM only.")


def vllm_args(r: "Recipe") -> list[str]:
    spec = r.speculative
    if spec is None:
        return []
    cfg: dict = {"method": spec.method}
    if spec.draft is not None:
        cfg["model"] = spec.draft.repo
        if spec.draft.revision:
            cfg["revision"] = spec.draft.revision
    if spec.num_speculative_tokens is not None:
        cfg["num_speculative_tokens"] = spec.num_speculative_tokens
    cfg.update({k: v for k, v in spec.config.items() if k not in cfg})
    return ["--speculative-config", json.dumps(cfg, separators=(",", ":"))]


def sglang_args(r: "Recipe") -> list[str]:
    spec = r.speculative
    if spec is None:
        return []
    argv = ["--speculative-algorithm", spec.method]
    if spec.draft is not None:
        argv += ["--speculative-draft-model-path", spec.draft.repo]
        if spec.draft.revision:
            argv += ["--speculative-draft-model-revision", spec.draft.revision]
    for flag, value in (("--speculative-num-steps", spec.num_steps), ("--speculative-eagle-topk", spec.eagle_topk),
                        ("--speculative-num-draft-tokens", spec.num_speculative_tokens)):
        if value is not None:
            argv += [flag, str(value)]
    return argv


def speculative_findings(r: "Recipe") -> list[Problem]:
    spec, out = r.speculative, list[Problem]()
    if spec is None:
        return out
    if r.engine.kind == "vllm" and (spec.num_steps is not None or spec.eagle_topk is not None):
        field = "num_steps" if spec.num_steps is not None else "eagle_topk"
        out.append(Problem(f"speculative.{field} is SGLang's; vLLM takes num_speculative_tokens",
                           path=f"speculative.{field}", hint="remove it"))
    if r.engine.kind == "sglang" and spec.config:
        out.append(Problem("speculative.config is vLLM's --speculative-config; SGLang takes --speculative-* flags",
                           path="speculative.config", hint="remove it, or pass SGLang's flags in engine.args.extra"))
    needs_draft = spec.method.lower() in ("eagle", "eagle3", "draft_model", "standalone")
    if needs_draft and spec.draft is None:
        out.append(Problem(f"method {spec.method} needs a draft model", path="speculative.draft",
                           hint="set speculative.draft.repo"))
    if spec.draft is not None and spec.draft.repo == r.model.repo:
        out.append(Problem("the draft is the served model itself", path="speculative.draft.repo",
                           hint="name the draft's own repository"))
    return out
