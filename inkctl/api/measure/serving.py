"""Which server ``smoke`` and ``bench`` talk to: a deployment's (the URL and model its plan
answers on), a fleet's router, or any OpenAI-compatible server (``--url``, ``--model``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from inkctl.api.target import Target, load, plan_for
from inkctl.errors import UsageError

if TYPE_CHECKING:
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded

CHAT = "/v1/chat/completions"


@dataclass
class Where:
    """The server to talk to and what the recipe (if any) says about it."""

    base_url: str
    model: str
    loaded: Optional[Loaded] = None
    plan: Optional[Plan] = None
    fleet: Optional[dict] = None  # a fleet's router: replicas, router kind, policy
    api_key: Optional[str] = field(default=None, repr=False)  # the key requests carry (the recipe's api_key)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")


def where(target: Target | None, url: str | None, model: str | None, command: str,
          api_key: str | None = None) -> Where:
    """The server ``command`` talks to. ``target`` (a recipe) gives the model, the checks and,
    with hosts, the URL its plan answers on; ``url`` wins over the plan's. A recipe with
    ``fleet:`` is measured through its router (its replica 0 gives the provenance). Without a model, the one the server lists."""
    if target is None and url is None:
        raise UsageError(f"{command} needs a RECIPE (with --hosts) or --url URL --model NAME")
    loaded = plan = base = fleet_info = None
    if target is not None and url is not None and target.hosts is None:
        # a recipe for its checks and model, the server at --url (a port-forward, a proxy): no hosts
        from inkctl.scrub import arm_for

        loaded = load(target, command, need_hosts=False)
        arm_for(loaded.recipe)
    elif target is not None:
        loaded, plan, base, fleet_info = _deployment(target, command)
    if url is not None:
        base = _base_url(url)
    if base is None:
        raise UsageError(f"{command}: the plan has no server URL; pass --url")
    if api_key is None and loaded is not None:
        api_key = recipe_api_key(loaded.recipe)
    name = model or (loaded.recipe.model.name if loaded else None)
    if not name:
        from inkctl.client.models import the_one_model

        name = the_one_model(base, command, api_key)
    return Where(base, name, loaded, plan, fleet_info, api_key)


def recipe_api_key(recipe) -> str | None:
    """The value of the recipe's ``api_key`` secret, read on this machine where the recipe says
    (env or file), or None without one; a missing one fails naming where it was looked for."""
    if recipe.api_key is None:
        return None
    from inkctl.secret import resolve_secrets

    return resolve_secrets(recipe.secrets, [recipe.api_key], bearer=recipe.api_key)[recipe.api_key].reveal()


def _deployment(target: Target, command: str):
    """(loaded, plan, the URL its health answers on or None, the fleet's router or None)."""
    from inkctl.plan.step import WaitHealth
    from inkctl.scrub import arm_for

    loaded = load(target, command)
    arm_for(loaded.recipe)
    base = fleet_info = None
    if loaded.recipe.fleet is not None:
        # a fleet is measured through its router; provenance comes from replica 0
        from inkctl.api.fleet import fleet_of
        from inkctl.execute.deploy.fleet import replica_loaded

        plans = fleet_of(loaded)
        rep = plans.replicas[0]
        loaded, plan, base = replica_loaded(loaded, rep), rep.plan, plans.url
        r = plans.router_spec
        fleet_info = {"replicas": len(plans.replicas), "router": r.kind, "policy": r.policy_name, "url": plans.url}
    else:
        plan, _ = plan_for(loaded, target)
    health = next((s for s in plan.steps() if isinstance(s, WaitHealth)), None)
    if base is None and health is not None and health.answer_url:
        base = health.answer_url[: -len(CHAT)] if health.answer_url.endswith(CHAT) else health.answer_url
    return loaded, plan, base, fleet_info


def _base_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url {url!r}: give a base URL such as http://10.0.0.5:8000")
    base = url.rstrip("/")
    for suffix in (CHAT, "/v1/completions", "/v1"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def provenance(where: Where, accept_new: bool, tokenizer: Optional[str], results_dir: Optional[Path] = None) -> dict:
    """What a run measured: the URL, the tokenizer, the fleet's router; with a recipe its name
    and hash; with a deployment what its hosts run (asked) and its latest boot record."""
    prov: dict = {"url": where.base_url, "tokenizer": tokenizer}
    if where.fleet:
        prov["fleet"] = where.fleet  # through the router: how many replicas, which policy
    if where.loaded is None:
        return prov
    if where.plan is None:  # a recipe and --url, no hosts to ask: what the recipe says
        from inkctl.plan.identity import recipe_hash

        prov["recipe"] = {"name": where.loaded.recipe.name, "hash": recipe_hash(where.loaded.recipe)}
        return prov
    from inkctl.bench.provenance import deployment_provenance

    prov.update(deployment_provenance(where.loaded, where.plan, accept_new=accept_new))
    if results_dir is not None:  # how the deployment measured booted: its latest boot record (inkctl up)
        from inkctl import bootlog as boots

        last = boots.previous(results_dir, where.plan.deployment)
        prov["boot"] = {"id": last[0], **last[1]} if last else None
    return prov
