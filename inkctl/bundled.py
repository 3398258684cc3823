"""What ships with inkctl: the bundled recipes, examples, patches and the recipe reference.

In a source checkout they are the repository's ``recipes/``, ``examples/``, ``patches/`` and
``docs/``; a wheel (pip, pipx) carries the same directories as ``inkctl/share/`` (setup.py maps
them there). Either way they keep their layout, so a bundled recipe finds its patches exactly as
a recipe in a checkout does (``patches.directory`` is relative to the directory above recipes/).

A bundled recipe is named by its file name without ``.yaml``: ``inkctl recipes`` lists these
names, and ``plan``/``up``/... accept them wherever they take a recipe file.
"""

from __future__ import annotations

from pathlib import Path

KINDS = ("recipes", "examples")  # the directories whose recipes have names; inventories excluded
SUFFIXES = (".yaml", ".yml")


def share_dir() -> Path | None:
    """The directory holding recipes/, examples/, patches/, docs/ (None if neither copy exists)."""
    pkg = Path(__file__).resolve().parent
    for cand in (pkg / "share", pkg.parent):  # a wheel's copy; else the checkout the package runs from
        if (cand / "recipes").is_dir():
            return cand
    return None


def bundled_files() -> list[Path]:
    """Every bundled recipe (recipes/ first, then examples/), inventories left out, sorted by name."""
    root = share_dir()
    if root is None:
        return []
    out: list[Path] = []
    for kind in KINDS:
        d = root / kind
        if d.is_dir():
            out += sorted(p for p in d.iterdir() if p.suffix in SUFFIXES and p.is_file() and not is_inventory_file(p))
    return out


def is_inventory_file(path: Path) -> bool:
    """Cheap and without parsing: bundled inventories are named hosts*.yaml."""
    return path.name.startswith("hosts")


def name_of(path: Path) -> str:
    return path.stem


def names() -> list[str]:
    return [name_of(p) for p in bundled_files()]


def unknown_hint(wanted: str) -> str:
    """What to say when ``wanted`` names no bundled recipe: the nearest names (all of them when
    there are few), then where the whole list is; short enough for one 80-column line or two."""
    import difflib

    known = names()
    stem = Path(str(wanted)).name
    for suffix in SUFFIXES:
        stem = stem[: -len(suffix)] if stem.endswith(suffix) else stem
    near = [n for n in known if stem and stem.lower() in n.lower()]
    near += [n for n in difflib.get_close_matches(stem, known, n=3, cutoff=0.5) if n not in near]
    if not near:
        return "pass a recipe file, or a name `inkctl recipes` lists"
    shown = ", ".join(near[:3]) + (f" (and {len(near) - 3} more)" if len(near) > 3 else "")
    return f"did you mean {shown}? `inkctl recipes` lists all {len(known)}"


def find(name: str) -> Path | None:
    """A bundled recipe by name (``inkling-small-2x-dgx-spark-vllm``, with or without .yaml)."""
    stem = name
    for suffix in SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    for p in bundled_files():
        if p.stem == stem:
            return p
    return None


def resolve(path: str | Path) -> Path:
    """A file that exists is itself; a bare name that is not a file is NAME.yaml here if there is
    one (the copy `inkctl init NAME` made, edited), else a bundled recipe if one has it."""
    p = Path(path)
    if p.exists() or len(p.parts) != 1:
        return p
    for suffix in SUFFIXES:
        if p.suffix != suffix and (here := p.with_name(p.name + suffix)).is_file():
            return here
    return find(p.name) or p


def installed_copy(path: Path) -> bool:
    """PATH is one of the recipes installed with inkctl (a wheel's share/), not a user's file."""
    pkg_share = Path(__file__).resolve().parent / "share"
    try:
        return Path(path).resolve().is_relative_to(pkg_share)
    except OSError:
        return False


def lock_command(path: Path, flags: str = "") -> str:
    """The `inkctl lock` command for a recipe, in backticks, as a hint says it. An installed
    recipe is not locked where it lies (inside site-packages): its copy is."""
    if installed_copy(path):
        return f"`inkctl init {Path(path).stem}` here, then `inkctl lock {Path(path).name}{flags}`"
    import os

    shown = str(path)
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows): the path as it is
        rel = shown
    under = rel != os.pardir and not rel.startswith(os.pardir + os.sep)
    return f"`inkctl lock {rel if under and len(rel) < len(shown) else shown}{flags}`"
