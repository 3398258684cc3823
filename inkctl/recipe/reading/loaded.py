"""What loading a recipe yields: the recipe, its hosts, its warnings, its directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from inkctl.errors import Problem
from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe


@dataclass
class Loaded:
    recipe: Recipe
    path: Path
    hosts: list[Host] | None  # None: plan with placeholders
    warnings: list[Problem] = field(default_factory=list)
    hosts_source: str | None = None  # "--hosts FILE" | "recipe" | None

    @property
    def root(self) -> Path:
        """The repository a recipe belongs to: the parent of recipes/, else the recipe's directory."""
        d = self.path.resolve().parent
        return d.parent if d.name == "recipes" else d

    @property
    def patch_dir(self) -> Path:
        return (self.root / self.recipe.patches.directory).resolve()
