"""No flag twice and per-role arguments (issue 28): a flag the plan itself writes, given again in
``engine.args.extra``, is one located error naming the recipe field to use; a flag a headless
worker refuses goes to ``engine.args.head_extra``; ``head_extra`` and ``worker_extra`` reach
exactly their ranks."""

from __future__ import annotations

import copy

from inkctl.plan.deploy import build_plan
from inkctl.plan.proof import rank_argvs
from inkctl.recipe.model import Recipe
from inkctl.recipe.checks.rules import recipe_findings

TWO = {
    "name": "t",
    "model": {"repo": "org/m"},
    "hardware": {"accelerator": "h200", "compute_capability": "9.0", "gpus_per_host": 8, "nodes": 2},
    "engine": {"kind": "vllm", "version": "v0.28.0", "image": {"ref": "img:1", "digest": "sha256:" + "a" * 64},
               "args": {"tensor_parallel": 16}},
    "network": {"socket_ifname": "eth0"},
}


def recipe(base=TWO, **patch) -> Recipe:
    data = copy.deepcopy(base)
    for dotted, value in patch.items():
        cur = data
        keys = dotted.split("__")
        for k in keys[:-1]:
            cur = cur.setdefault(k, {})
        cur[keys[-1]] = value
    return Recipe.model_validate(data)


def errors(r: Recipe) -> dict[str, tuple[str, str | None]]:
    return {p.path: (p.message, p.hint) for p in recipe_findings(r) if p.severity == "error"}


def test_a_flag_the_plan_writes_is_refused_in_extra_with_the_field_to_use():
    r = recipe(engine__multinode="ray", engine__args__extra=["--distributed-executor-backend", "mp"])
    msg, hint = errors(r)["engine.args.extra[0]"]
    assert msg == ("--distributed-executor-backend is already in the planned argv: given again, vLLM keeps the last one "
                   "without a word")
    assert hint == "remove it; set engine.multinode instead"
    # native multi-node: the rendezvous flags the plan writes
    msg, hint = errors(recipe(engine__args__extra=["--master-port=29600"]))["engine.args.extra[0]"]
    assert "--master-port is already in the planned argv" in msg and hint == "remove it; set engine.master_port instead"


def test_sglang_flags_the_plan_writes_are_refused_too():
    r = recipe(engine__kind="sglang", engine__version="v0.5.20", engine__args__extra=["--dist-init-addr", "10.0.0.1:5000"])
    msg, hint = errors(r)["engine.args.extra[0]"]
    assert "--dist-init-addr is already in the planned argv" in msg and "SGLang keeps the last one" in msg
    assert hint == "remove it; set engine.dist_init_port and the head's cluster_address instead"


def test_a_flag_only_the_head_takes_goes_to_head_extra():
    msg, hint = errors(recipe(engine__args__extra=["--api-server-count", "8"]))["engine.args.extra[0]"]
    assert msg == "--api-server-count goes to the head only: vLLM refuses it on a headless worker rank"
    assert hint == "move it to engine.args.head_extra"
    assert "engine.args.worker_extra[0]" in errors(recipe(engine__args__worker_extra=["--api-server-count", "8"]))
    assert errors(recipe(engine__args__head_extra=["--api-server-count", "8"])) == {}
    msg, _ = errors(recipe(engine__args__head_extra=["--port", "9000"]))["engine.args.head_extra[0]"]
    assert msg.startswith("--port is already in the planned argv")
    one = copy.deepcopy(TWO)
    one["hardware"].update(nodes=1)
    one["engine"]["args"]["tensor_parallel"] = 8
    assert errors(recipe(one, engine__args__extra=["--api-server-count", "8"])) == {}  # no worker ranks: no refusal


def test_head_and_worker_arguments_reach_exactly_their_ranks():
    r = recipe(engine__args__extra=["--max-num-batched-tokens", "8192"],
               engine__args__head_extra=["--api-server-count", "8"], engine__args__worker_extra=["--enable-eplb"])
    head, worker = rank_argvs(build_plan(r, None), r)
    assert head.argv[-4:] == ("--max-num-batched-tokens", "8192", "--api-server-count", "8")
    assert worker.argv[-3:] == ("--max-num-batched-tokens", "8192", "--enable-eplb")
    assert "--api-server-count" not in worker.argv and "--enable-eplb" not in head.argv


def test_unused_role_arguments_leave_the_recipe_hash_as_it_was():
    from inkctl.plan.identity import recipe_hash

    assert recipe_hash(recipe()) == recipe_hash(recipe(engine__args__head_extra=[], engine__args__worker_extra=[]))
    assert recipe_hash(recipe()) != recipe_hash(recipe(engine__args__head_extra=["--api-server-count", "8"]))


def test_every_flag_a_bundled_plan_writes_is_one_its_engine_declares():
    """flag_findings reads the plan only when a given flag is one the engine's plan may write
    (``may_plan``): that set must hold every flag the plans really write."""
    from pathlib import Path

    from inkctl.engines._common import may_plan, planned_flags
    from inkctl.recipe.engine_registry import spec_of
    from inkctl.recipe.reading.source import load_recipe

    root = Path(__file__).resolve().parents[2]
    paths = [p for d in ("recipes", "examples") for p in sorted((root / d).glob("*.yaml")) if not p.name.startswith("hosts")]
    for path in paths:
        r = load_recipe(path).recipe
        missing = set(planned_flags(r)) - may_plan(spec_of(r.engine.kind))
        assert not missing, f"{path.name}: the plan writes {sorted(missing)}, which the engine's spec does not declare"


def test_typed_fields_are_held_to_the_choices_of_the_release_like_extra():
    sgl = copy.deepcopy(TWO)
    sgl["hardware"].update(nodes=1)
    sgl["engine"].update(kind="sglang", version="v0.5.20")
    sgl["engine"]["args"] = {"tensor_parallel": 8, "reasoning_parser": "deepseek_r1", "tool_call_parser": "llama3x"}
    found = {p.path: p for p in recipe_findings(Recipe.model_validate(sgl)) if p.severity == "error"}
    assert found["engine.args.reasoning_parser"].message.startswith(
        "reasoning_parser: 'deepseek_r1' is not one SGLang 0.5.20's --reasoning-parser accepts: ")
    assert found["engine.args.reasoning_parser"].hint == "did you mean 'deepseek-r1'?"
    assert found["engine.args.tool_call_parser"].hint == "did you mean 'llama3'?"
    # the same values in extra were refused already, with the same table
    sgl["engine"]["args"] = {"tensor_parallel": 8, "extra": ["--reasoning-parser", "deepseek_r1"]}
    assert "engine.args.extra[0]" in {p.path for p in recipe_findings(Recipe.model_validate(sgl)) if p.severity == "error"}
    # right values pass; a release without its own table is not judged by another's choices
    sgl["engine"]["args"] = {"tensor_parallel": 8, "reasoning_parser": "deepseek-r1", "tool_call_parser": "llama3"}
    assert not [p for p in recipe_findings(Recipe.model_validate(sgl)) if p.severity == "error"]
    sgl["engine"]["version"] = "v0.5.99"
    sgl["engine"]["args"] = {"tensor_parallel": 8, "reasoning_parser": "deepseek_r1"}
    assert "engine.args.reasoning_parser" not in {p.path for p in recipe_findings(Recipe.model_validate(sgl))}
