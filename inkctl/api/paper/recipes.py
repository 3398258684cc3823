"""``recipes`` and ``schema``: the recipes there are (bundled, in a directory, in a recipe
repository) and the schema they follow."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inkctl.errors import EXIT_INVALID, InkctlError


@dataclass
class Listing:
    """One row per recipe file (an ``error`` where it does not load); ``checkout``: the recipe
    repository they came from (``--from``), None for the bundled ones or a directory."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    checkout: Any = None

    def as_json(self) -> Any:
        c = self.checkout
        return {"source": c.source, "commit": c.commit, "path": str(c.path), "recipes": self.rows} if c else self.rows


def listing(directory: Path | None = None, from_: str | None = None, ref: str | None = None) -> Listing:
    """The recipes in DIRECTORY, in a repository (``from_`` a git URL or a directory, at
    ``ref``), or the bundled ones."""
    from inkctl import bundled
    from inkctl.recipe.reading.filekind import expand_paths
    from inkctl.recipe.reading.source import is_inventory

    checkout = None
    if from_ is not None:
        from inkctl.recipe.foreign.repository import fetch

        if directory is not None:
            raise InkctlError("give a directory or --from, not both", exit_code=EXIT_INVALID)
        checkout = fetch(from_, ref)
        directory = checkout.path
    if directory is None:
        paths = bundled.bundled_files()
        if not paths:
            raise InkctlError("no bundled recipes found: this installation of inkctl is incomplete",
                              hint="reinstall inkctl, or pass a directory: inkctl recipes DIR")
    else:
        paths = [p for p in expand_paths([str(directory)]) if not is_inventory(p)]
    # what `plan` accepts: the bundled name, the path of a recipe in DIR, or a repository's file
    # by its path in it (the header says where it is)
    named = (bundled.name_of if directory is None else str) if checkout is None else (
        lambda p: str(p.relative_to(checkout.path)))
    return Listing([_row(path, named(path)) for path in paths], checkout)


def _row(path: Path, ref: str) -> dict[str, Any]:
    from inkctl.recipe.reading.source import load_recipe

    try:
        r = load_recipe(path).recipe
    except InkctlError:
        return {"recipe": ref, "path": str(path), "error": _foreign(path, ref) or "invalid (run inkctl validate)"}
    return {
        "recipe": ref, "path": str(path), "name": r.name, "model": r.model.repo,
        "hardware": f"{r.hardware.nodes}x{r.hardware.gpus_per_host} {r.hardware.accelerator}",
        "engine": _engine_label(r),
        "parallel": _parallel(r),
        "runtime": r.container.runtime, "patches": r.patches.mode,
        "status": r.provenance.status if r.provenance else "draft",
    }


def _parallel(r: Any) -> str:
    a = r.engine.args
    text = f"TP={a.tensor_parallel} PP={a.pipeline_parallel}"
    if a.data_parallel.size > 1:
        text += f" DP={a.data_parallel.size}" + (" (attention)" if a.data_parallel.attention else "")
    if a.expert is not None and a.expert.enabled:
        text += " EP"
    return text


def _foreign(path: Path, shown: str) -> str | None:
    """A recipe of another tool: say how to import it instead of calling it invalid."""
    import yaml

    from inkctl.recipe.foreign.convert import detect

    try:
        kind = detect(yaml.safe_load(path.read_text()))
    except Exception:
        return None
    return f"a {kind} recipe: inkctl import it" if kind else None


def schema(format_: str) -> str:
    """The recipe JSON Schema (``json``, for editors) or the recipe reference (``markdown``)."""
    import json

    from inkctl.recipe.reference import json_schema, markdown_reference

    if format_ == "json":
        return json.dumps(json_schema(), indent=2) + "\n"
    if format_ == "markdown":
        return markdown_reference()
    raise InkctlError(f"--format must be json or markdown, not {format_!r}", exit_code=EXIT_INVALID)


def _engine_label(r) -> str:
    """'vllm v0.28.0', with how the ranks form one server where the engine has several ways ('(ray)')."""
    from inkctl.recipe.engine_registry import spec_of

    variant = spec_of(r.engine.kind).variant(r)
    return f"{r.engine.kind} {r.engine.version.split()[0]}" + (f" ({variant})" if variant else "")
