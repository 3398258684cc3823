"""What a command names (a recipe, an inventory, ``--set`` overrides) and what it acts on: the
loaded recipe and its plan. Every command that touches hosts starts here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from inkctl.errors import UsageError

if TYPE_CHECKING:
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded


@dataclass(frozen=True)
class Target:
    """The recipe (a file or a bundled recipe's name), the inventory, the overrides, and where
    it runs: ``backend`` names one of ``api.backend.BACKENDS`` ("ssh": the inventory's hosts;
    "slurm": a job from this login node, the user's ``--slurm``; "k8s": export only)."""

    recipe: Path
    hosts: Path | None = None
    sets: tuple[str, ...] = ()
    backend: str = "ssh"

    @classmethod
    def of(cls, recipe: Path | str, hosts: Path | str | None = None,
           sets: Iterable[str] | None = None, *, backend: str = "ssh", slurm: bool = False) -> Target:
        """``slurm=True`` is the command line's ``--slurm``: the Slurm backend."""
        return cls(Path(recipe), None if hosts is None else Path(hosts), tuple(sets or ()),
                   "slurm" if slurm else backend)

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
    from inkctl.recipe.reading.source import load_recipe

    loaded = load_recipe(target.recipe, list(target.sets), target.hosts)
    if need_hosts and loaded.hosts is None:
        raise UsageError(f"{command} needs hosts: pass --hosts FILE (an inventory) or list hosts: in the recipe")
    return loaded


class Kind(NamedTuple):
    """What a target names: ``"gateway"`` (a gateway file; ``loaded`` None: it loads its own
    recipes), ``"fleet"`` (a recipe with ``fleet:``) or ``"group"`` (one engine group)."""

    kind: str
    loaded: Loaded | None


def kind_of(target: Target, command: str) -> Kind:
    """A gateway file, a fleet or one group; a recipe loaded with whatever the command prints
    masked from here on (a host's stderr, an engine's echoed env)."""
    from inkctl.recipe.reading.filekind import is_gateway_file
    from inkctl.scrub import arm_for

    if is_gateway_file(target.recipe):
        return Kind("gateway", None)
    loaded = load(target, command)
    arm_for(loaded.recipe)
    return Kind("fleet" if loaded.recipe.fleet is not None else "group", loaded)


def one_group(target: Target, command: str, usage: str) -> Loaded:
    """The loaded recipe of one engine group (masked, as ``kind_of``); a gateway file or a fleet
    is a UsageError with ``usage`` (``api.backend`` dispatches those)."""
    what = kind_of(target, command)
    if what.loaded is None or what.kind != "group":
        raise UsageError(usage)
    return what.loaded


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
