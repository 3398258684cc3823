"""Speculative decoding with a draft model: a second model the engine loads beside the served one.

The draft is a model like the served one: ``inkctl lock`` pins its revision and files (the lock
file's ``models.draft``), ``inkctl weights`` puts it in the same Hub cache on every host and
preflight checks it there, so the engine finds it offline. ``draft_view`` is the recipe with the
draft in the model's place (recipe/draft.py): the pinning, copying and checking code runs on it
unchanged.

Data only: each engine writes its own flags (``inkctl/engines/``), rules.py checks the section.
The engines' flags: vLLM ``--speculative-config`` (one JSON object: method, model,
num_speculative_tokens, revision); SGLang ``--speculative-algorithm`` with
``--speculative-draft-model-path`` (and ``--speculative-draft-model-revision``,
``--speculative-num-steps``, ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``).
"""

from typing import Any, Optional

from pydantic import Field

from inkctl.recipe.fields import Strict, empty_list


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
