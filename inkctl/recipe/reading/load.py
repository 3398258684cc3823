"""Turn a YAML file into a validated pydantic model, or into a list of every problem, each located.

Three parts, one module each: ``document`` reads the YAML with the position of every path,
``override`` applies ``--set``, ``pydantic_errors`` tells validation errors in the document's
words. This module puts them together and points each problem at its file:line:col (or at
the ``--set`` flag that caused it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from inkctl.codes import code
from inkctl.errors import Problem, RecipeInvalid
from inkctl.recipe.reading.document import MAX_DEPTH, MAX_NODES, Document, parse, parse_document
from inkctl.recipe.reading.override import OVERRIDE, apply_override, parse_override, typed_for
from inkctl.recipe.reading.paths import dotted
from inkctl.recipe.reading.pydantic_errors import explain, prune_unions

__all__ = ["Document", "load_model", "parse_document", "parse_override", "OVERRIDE", "MAX_NODES", "MAX_DEPTH"]


def _locate(doc: Document, path: tuple, where: str, overridden: list[tuple]) -> tuple[str, int | None, int | None]:
    """(file, line, col) for a problem at ``path``: the key, the value, or the mapping holding it."""
    if where == "mapping":
        path = path[:-1]
    if any(path[: len(s)] == s for s in overridden) or (
        doc.located(path) is None and any(s[: len(path)] == path for s in overridden)
    ):
        return OVERRIDE, None, None
    p = path
    while doc.located(p) is None:
        p = p[:-1]
    at = doc.located(p)
    assert at is not None  # the loop stops at a located path (the root always is)
    if at.key and (where != "value" or p != path or (at.collection and at.line != at.key[0])):  # block: its key
        return doc.file, *at.key
    return doc.file, at.line, at.col


def _ordered(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        key = (p.file, p.line, p.col, p.path, p.message, p.severity)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return sorted(out, key=lambda p: (p.file == OVERRIDE, p.line or 0, p.col or 0))


def _raw(doc: Document):
    def raw(path: tuple) -> str | None:
        at = doc.located(path)
        return at.raw if at else None
    return raw


def _rules_of(obj: Any) -> Callable[[Any], list[Problem]] | None:
    """The cross-field rules of what was loaded: a Recipe's (``rules.recipe_findings``; the
    Recipe itself does not import its rules), else the object's own ``findings`` (an inventory)."""
    from inkctl.recipe.model import Recipe

    if isinstance(obj, Recipe):
        from inkctl.recipe.checks.rules import recipe_findings

        return recipe_findings
    own = getattr(obj, "findings", None)
    return (lambda o: own()) if own is not None else None


def load_model(model: type[BaseModel], path: str | Path, overrides: list[str] | tuple = (), *, text: str | None = None,
               rules: Callable[[Any], list[Problem]] | None = None):
    """Parse ``path`` (or ``text``, reported as ``path``), apply ``--set`` overrides, validate as ``model``.

    Returns ``(instance, warnings)``. Raises RecipeInvalid with every problem found: YAML
    problems, override problems, validation errors, and the errors of ``rules(instance)`` (the
    cross-field rules; by default a Recipe's ``rules.recipe_findings``, else ``instance.findings()``).
    """
    doc = parse(Path(path) if text is None else text, str(path))
    problems = list(doc.problems)
    overridden: list[tuple] = []
    for item in overrides:
        try:
            target, value = parse_override(item)
            value = typed_for(model, doc.normalized(target) or target, value, item.partition("=")[2])
            target = apply_override(doc.data, target, value)
            overridden.append(target)
            doc.forget(target)  # the file's text is gone there
        except RecipeInvalid as e:
            problems += e.problems
        except ValueError as e:
            problems.append(Problem(f"cannot apply '{item}': {e}", dotted(target), OVERRIDE, code=code("bad-override")))
    try:
        obj = model.model_validate(doc.data)
    except ValidationError as e:
        items = []
        for err in e.errors(include_url=False):
            x = explain(model, err, _raw(doc))
            if doc.is_refused(x.loc_path):
                continue  # that value was refused already (e.g. a bad tag); don't report it twice
            file, line, col = _locate(doc, x.path, x.where, overridden)
            items.append((Problem(x.message, dotted(x.path), file, line, col, x.hint, code=x.code), x))
        raise RecipeInvalid(_ordered(problems + prune_unions(items))) from None
    rules = rules or _rules_of(obj)
    for p in rules(obj) if rules is not None else ():
        if p.file is None:
            pth = doc.normalized(p.path) or ()
            file, line, col = _locate(doc, pth, "value", overridden)
            p = dataclasses.replace(p, file=file, line=line, col=col)
        problems.append(p)
    errors = [p for p in _ordered(problems) if p.severity == "error"]
    warnings = [p for p in _ordered(problems) if p.severity != "error"]
    if errors:
        raise RecipeInvalid(errors + warnings)
    return obj, warnings
