"""``results`` below the command line: the bench runs saved under a results directory
(``bench.report``) listed, read, compared with each other or with the numbers a recipe
records; and the boot records ``up`` saves there (``inkctl.bootlog``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inkctl.errors import InkctlError


@dataclass
class Run:
    """A saved run: its directory, its run.json, its points."""

    path: Path
    meta: dict
    points: list[dict]

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class AgainstRecipe:
    """A run compared with the results a recipe records."""

    run: Run
    recipe_model: str
    same_model: bool  # the run measured the model the recipe serves (its name or repo)
    rows: list[dict]


def list_runs(results_dir: Path) -> list[dict]:
    from inkctl.bench import report

    return report.list_runs(results_dir)


def load_run(results_dir: Path, ref: str) -> Run:
    from inkctl.bench import report

    return Run(*report.load_run(results_dir, ref))


def compare_runs(a: Run, b: Run) -> list[dict]:
    """B against A, point by point (the same max concurrency or rate), metric by metric."""
    from inkctl.bench import compare

    rows = compare.compare_runs(a.points, b.points)
    if not rows:
        raise InkctlError(f"{a.name} and {b.name} have no point in common (same max concurrency or rate)")
    return rows


def against_recipe(run: Run, recipe: Path) -> AgainstRecipe:
    """``run`` against the numbers recorded in ``recipe``'s results: section."""
    from inkctl.bench import compare
    from inkctl.recipe.reading.source import load_recipe

    r = load_recipe(recipe).recipe
    measured = r.results
    if not measured:
        raise InkctlError(f"{recipe}: the recipe records no results: to compare with")
    rows = compare.compare_recipe(measured, run.points)
    return AgainstRecipe(run, r.model.name, run.meta.get("model") in {r.model.name, r.model.repo}, rows)


def plot(run: Run) -> Path:
    """plot.png in the run's directory (needs matplotlib)."""
    from inkctl.bench.plot import plot_run

    return plot_run(run.points, f"{run.meta.get('model')} ({run.name})", run.path / "plot.png")


def list_boots(results_dir: Path) -> list[dict]:
    from inkctl import bootlog as boots

    return boots.list_boots(results_dir)


def boots_dir(results_dir: Path) -> Path:
    from inkctl import bootlog as boots

    return results_dir / boots.SUBDIR


def load_boots(results_dir: Path, refs: list[str]) -> list[tuple[str, dict]]:
    """(id, record) of each boot record ``refs`` names, in order."""
    from inkctl import bootlog as boots

    return [boots.load(results_dir, r) for r in refs]
