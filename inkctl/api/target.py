"""What a command names (a recipe, an inventory, ``--set`` overrides) and what it acts on: the
loaded recipe and its plan. Every command that touches hosts starts here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from inkctl.errors import UsageError

if TYPE_CHECKING:
    from inkctl.plan.step import Plan
    from inkctl.recipe.loaded import Loaded


@dataclass(frozen=True)
class Target:
    """The recipe (a file or a bundled recipe's name), the inventory, the overrides."""

    recipe: Path
    hosts: Path | None = None
    sets: tuple[str, ...] = ()

    @classmethod
    def of(cls, recipe: Path | str, hosts: Path | str | None = None,
           sets: Iterable[str] | None = None) -> Target:
        return cls(Path(recipe), None if hosts is None else Path(hosts), tuple(sets or ()))

    def where(self) -> str:
        """``RECIPE [--hosts FILE]``, as a command to run next names it."""
        return f"{self.recipe}" + (f" --hosts {self.hosts}" if self.hosts else "")


class Targeted(NamedTuple):
    """A loaded recipe, its plan, and the built image the plan runs (None: the recipe's own)."""

    loaded: Loaded
    plan: Plan
    image: str | None


def load(target: Target, command: str, *, need_hosts: bool = True) -> Loaded:
    """The recipe with its hosts and overrides; a command that touches hosts needs hosts."""
    from inkctl.recipe.source import load_recipe

    loaded = load_recipe(target.recipe, list(target.sets), target.hosts)
    if need_hosts and loaded.hosts is None:
        raise UsageError(f"{command} needs hosts: pass --hosts FILE (an inventory) or list hosts: in the recipe")
    return loaded


def one_group(target: Target, command: str, *, gateway: Callable[[Target], Any] | None, gateway_usage: str,
              fleet: Callable[[Loaded], Any] | None, fleet_usage: str) -> Loaded | None:
    """The loaded recipe of one engine group, with whatever the command prints masked from here
    on. A gateway file is handed to ``gateway``, a recipe with ``fleet:`` (loaded and armed) to
    ``fleet``, and None returned; a kind without its callable is a UsageError with its usage."""
    from inkctl.recipe.filekind import is_gateway_file
    from inkctl.scrub import arm_for

    if is_gateway_file(target.recipe):
        if gateway is None:
            raise UsageError(gateway_usage)
        gateway(target)
        return None
    loaded = load(target, command)
    arm_for(loaded.recipe)  # a host's stderr, an engine's echoed env: masked
    if loaded.recipe.fleet is not None:
        if fleet is None:
            raise UsageError(fleet_usage)
        fleet(loaded)
        return None
    return loaded


def plan_for(loaded: Loaded, target: Target) -> tuple[Plan, str | None]:
    """The plan (and the built image it runs), noted in the run's record."""
    from inkctl import runlog
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs

    assert loaded.hosts is not None  # load(need_hosts=True)
    inputs = plan_inputs(loaded)
    plan = build_plan(loaded.recipe, loaded.hosts, **inputs)
    runlog.note_plan(plan, target.recipe)  # the run's record (when this command leaves one)
    return plan, inputs.get("image")


def load_target(target: Target, command: str) -> Targeted:
    """What every command that touches hosts without starting anything starts with: the recipe,
    its hosts, its plan; whatever it prints (an engine's echoed env too) masked."""
    from inkctl.scrub import arm_for

    loaded = load(target, command)
    arm_for(loaded.recipe)
    plan, image = plan_for(loaded, target)
    return Targeted(loaded, plan, image)
