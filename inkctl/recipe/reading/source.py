"""Load what a command needs: the recipe (with --set overrides), its hosts, its directory."""

from __future__ import annotations

from pathlib import Path

from inkctl.codes import code
from inkctl.errors import Problem, RecipeInvalid, UsageError
from inkctl.recipe.hosts import Host, Inventory
from inkctl.recipe.reading.loaded import Loaded
from inkctl.recipe.model import Recipe


def load_recipe(path: str | Path, overrides: list[str] | tuple[str, ...] = (), hosts_file: str | Path | None = None) -> Loaded:
    from inkctl.recipe.reading.load import load_model
    from inkctl.recipe.checks.rules import recipe_findings

    path = recipe_path(path)
    # --set hosts[1].name=... changes the hosts in use: the inventory's when --hosts gives one
    for_hosts = [o for o in overrides if hosts_file is not None and _sets_hosts(o)]
    overrides = [o for o in overrides if o not in for_hosts]
    try:
        recipe, warnings = load_model(Recipe, path, list(overrides), rules=recipe_findings)
    except RecipeInvalid as e:
        raise _swapped(path, e, expected="recipe") from None
    hosts, source = None, None
    if hosts_file is not None:
        hosts, inv_warnings = inventory_for(recipe, hosts_file, for_hosts)
        source = f"--hosts {hosts_file}"
        warnings = [*warnings, *inv_warnings]
    elif recipe.hosts is not None:
        hosts, source = list(recipe.hosts), "recipe"
    from inkctl.recipe.checks.rules import every_host_ifname

    if every_host_ifname(hosts):  # the inventory names each host's interface: nothing to warn about
        warnings = [w for w in warnings if not (w.path == "network.socket_ifname" and "multi-node without" in w.message)]
    loaded = Loaded(recipe=recipe, path=path, hosts=hosts, warnings=list(warnings), hosts_source=source)
    warnings += _file_findings(loaded)
    from inkctl.recipe.lockfile import apply_lock

    loaded.warnings = apply_lock(loaded, warnings)  # pins the lock settles; drift (an error with --strict)
    return loaded


def recipe_path(path: str | Path) -> Path:
    """A recipe file, or the name of a bundled recipe (what ``inkctl recipes`` lists)."""
    from inkctl import bundled

    p = bundled.resolve(path)
    if not p.exists():
        raise UsageError(f"{path}: no such recipe file, and no bundled recipe of that name",
                         hint=bundled.unknown_hint(str(path)))
    return p


def _sets_hosts(override: str) -> bool:
    key = override.partition("=")[0].strip()
    return key == "hosts" or key.startswith(("hosts[", "hosts."))


def load_inventory(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> list[Host]:
    return inventory_warned(path, overrides)[0]


def inventory_warned(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> tuple[list[Host], list[Problem]]:
    """The inventory's hosts and its warnings (a loopback address that runs here without SSH ...)."""
    from inkctl.recipe.reading.load import load_model

    try:
        inv, warnings = load_model(Inventory, Path(path), list(overrides))
    except RecipeInvalid as e:
        raise _swapped(Path(path), e, expected="inventory") from None
    return list(inv.hosts), list(warnings)


def inventory_for(recipe: Recipe, path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> tuple[list[Host], list[Problem]]:
    """The inventory's hosts for ``recipe``: every way they do not fit it (host count, each host's
    GPUs) reported at once, each at its line in the inventory (INK210), not at the recipe."""
    from inkctl.recipe.hosts import fit_findings

    hosts, warnings = inventory_warned(path, overrides)
    from dataclasses import replace

    misfits = [replace(p, file=str(path)) for p in _located(fit_findings(recipe, hosts), Path(path))] \
        if recipe.fleet is None else []
    if misfits:
        raise RecipeInvalid([*misfits, *warnings])
    return hosts, warnings


def _swapped(path: Path, e: RecipeInvalid, *, expected: str) -> RecipeInvalid:
    """A recipe given where an inventory belongs, or the other way round: one problem that says so,
    instead of one "unknown field" or "missing field" per key."""
    from inkctl.recipe.reading.load import parse_document

    try:
        data = parse_document(path).data
    except RecipeInvalid:
        return e
    keys = list(data) if isinstance(data, dict) else []
    if expected == "recipe" and keys == ["hosts"]:
        message = "this looks like an inventory (its only field is 'hosts'), not a recipe"
        hint = f"pass the recipe as the argument and this file with --hosts {path}"
    elif expected == "inventory" and set(keys) - {"hosts"} and set(keys) <= set(Recipe.model_fields):
        message = "this looks like a recipe, not an inventory (an inventory has only 'hosts:')"
        hint = "pass the recipe as the argument and the inventory with --hosts FILE"
    elif expected == "recipe" and "models" in keys and "engine" not in keys:
        message = "this is a gateway file (several recipes behind one endpoint), not a recipe"
        hint = "plan, up, status and down take it; other commands, one of its recipes"
    else:
        return e
    return RecipeInvalid([Problem(message, file=str(path), line=1, col=1, hint=hint, code=code("wrong-document"))])


def _file_findings(loaded: Loaded) -> list[Problem]:
    """Patch and hotfix sources that are not on disk: warned (the recipe says where they come from)."""
    out = []
    p = loaded.recipe.patches
    items = [(f"patches.hotfixes[{i}].source", h.source, h.origin) for i, h in enumerate(p.hotfixes)]
    items += [(f"patches.files[{i}].source", f.source, None) for i, f in enumerate(p.files) if hasattr(f, "source")]
    for path, src, origin in items:
        if not (loaded.patch_dir / src).is_file():
            where = f"; it comes from {origin}" if origin else ""
            out.append(Problem(f"{src} is not in {loaded.patch_dir}{where}", path=path, file=str(loaded.path),
                               severity="warning", hint="put the file there before build or up", code=code("missing-file")))
    return _located(out, loaded.path) if out else out


def _located(problems: list[Problem], path: Path) -> list[Problem]:
    """Give problems found after loading their file:line:col (parsing again is cheap and rare)."""
    from dataclasses import replace

    from inkctl.recipe.reading.load import parse_document

    doc = parse_document(path)
    out = []
    for p in problems:
        pos = doc.position(p.path)
        out.append(replace(p, line=pos[0], col=pos[1]) if pos else p)
    return out


def is_inventory(path: str | Path) -> bool:
    """An inventory is a document whose only top-level key is ``hosts``."""
    from inkctl.recipe.reading.load import parse_document

    try:
        data = parse_document(Path(path)).data
    except Exception:  # the real load reports it, located
        return False
    return isinstance(data, dict) and set(data) == {"hosts"}

