"""``validate``: a verdict on each recipe, gateway or inventory file, every problem located.
What CI runs on every push, so light to import (benchmarks/startup.py): everything it needs is
imported where it is used; a verdict on a file alone is kept (``validate_cache.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

from inkctl.errors import InkctlError

# (path, ok, problems, warnings)
Verdict = Tuple[Path, bool, list, list]


def verdicts(paths: List[str], strict: bool = False, sets: Optional[List[str]] = None,
             hosts: Optional[Path] = None, check_hosts: Optional[Callable[[Any], None]] = None) -> list[Verdict]:
    """One verdict per file PATHS name (directories and globs expanded). With ``hosts``,
    ``check_hosts(loaded)`` plans each recipe on them (``api/plan.check_hosts``)."""
    from inkctl.recipe.reading.filekind import expand_paths

    cache = None
    if not sets and hosts is None:  # a verdict on the file alone: kept (api/paper/validate_cache.py)
        from inkctl.api.paper.validate_cache import open_cache

        cache = open_cache()
    results: list[Verdict] = []
    for path in expand_paths(paths):
        kept = cache.get(path) if cache is not None else None
        if kept is not None:
            problems, warnings = kept
            results.append((path, not problems and not (strict and warnings), problems, warnings))
            continue
        results.append(_verdict(path, strict, sets, hosts, check_hosts, cache))
    return results


def _verdict(path: Path, strict: bool, sets: Optional[List[str]], hosts: Optional[Path],
             check_hosts: Optional[Callable[[Any], None]], cache: Any) -> Verdict:
    try:
        from inkctl.recipe.reading.filekind import is_gateway_file
        from inkctl.recipe.reading.source import is_inventory, load_inventory

        if is_inventory(path):
            load_inventory(path)
            return (path, True, [], [])
        if is_gateway_file(path):
            from inkctl.api.paper.validate_gateway import validate_gateway

            problems, warnings = validate_gateway(path, hosts)
            return (path, not problems and not (strict and warnings), problems, warnings)
        loaded = _load(path, sets, hosts, cache)
        if hosts is not None and check_hosts is not None:
            check_hosts(loaded)
        return (path, not (strict and loaded.warnings), [], loaded.warnings)
    except InkctlError as e:
        from inkctl.errors import Problem, RecipeInvalid

        problems = e.problems if isinstance(e, RecipeInvalid) else []
        if not problems:
            from inkctl.codes import code

            problems = [Problem(e.message, file=str(path), hint=e.hint, code=code("cannot-load"))]
        return (path, False, problems, [])


def _load(path: Path, sets: Optional[List[str]], hosts: Optional[Path], cache: Any) -> Any:
    """``load_recipe``; with a cache, its verdict kept there, found by what it was made of
    (the recipe, the files it read or looked for), when it is a verdict: loaded, or invalid."""
    from inkctl.errors import RecipeInvalid
    from inkctl.recipe.reading.source import load_recipe

    if cache is None:
        return load_recipe(path, list(sets or []), hosts)
    from inkctl.api.paper.validate_cache import looked_for, reads_of, recording

    data = path.read_bytes()
    opened: set[str] = set()
    try:
        with recording(opened):
            loaded = load_recipe(path)
    except RecipeInvalid as e:
        if e.problems and path.read_bytes() == data:
            cache.put(path, data, reads_of(path, opened, []), e.problems, [])
        raise
    if path.read_bytes() == data:  # the verdict is on these bytes (not on a file changed meanwhile)
        cache.put(path, data, reads_of(path, opened, looked_for(loaded)), [], loaded.warnings)
    return loaded
