"""``init``: start a project from a bundled recipe, the way ``kamal init`` starts one: the recipe,
an inventory template for it and its patch files, copied here to edit; nothing overwritten."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inkctl.errors import UsageError

DEFAULT = "vllm-single-docker"
SCHEMA_LINE = "# yaml-language-server: $schema="


@dataclass
class Project:
    """What ``init`` wrote: the recipe's file name, its inventory's, the patch files the recipe
    names that the bundled recipe does not carry (to add by hand) and where they go."""

    recipe_file: str
    inventory: str
    recipe: Any
    missing: list[str] = field(default_factory=list)
    patch_dir: str = ""


KEY_FILE = "api-key"  # init --api-key: the generated key, 0600, beside the recipe
KEY_SECRET = "API_KEY"


def init(name: str | None, here: Path, wrote: Callable[[Path], None], *, api_key: bool = False) -> Project:
    """Copy the bundled recipe NAME (default ``DEFAULT``), an inventory template for it and its
    patch files into HERE; ``wrote(path)`` after each file. Checks first: nothing is written if
    any of them is there already. ``api_key``: also a new random key in HERE/api-key (0600) that
    the recipe names as its ``api_key`` (a secret read from that file)."""
    from inkctl.recipe.inventory_template import inventory_for
    from inkctl.recipe.reading.source import load_recipe

    src = _source(name or DEFAULT, here)
    loaded = load_recipe(src)
    recipe = loaded.recipe
    text = src.read_text()
    # a second recipe in one project: hosts.yaml stays as it is, this recipe's template goes beside it
    inv = "hosts.yaml" if not (here / "hosts.yaml").exists() else f"hosts-{src.stem}.yaml"
    body = _own_schema(text)
    if api_key:
        body = with_api_key(body, here / KEY_FILE)
    written = {here / src.name: body, here / inv: inventory_for(recipe, text, src.name)}
    p = recipe.patches
    sources = [h.source for h in p.hotfixes] + [f.source for f in p.files if hasattr(f, "source")]
    patch_dir = here / p.directory
    copies = [(loaded.patch_dir / s, patch_dir / s) for s in sources if (loaded.patch_dir / s).is_file()]
    keyfile = [here / KEY_FILE] if api_key else []
    there = [str(dst.relative_to(here)) for dst in [*written, *(d for _, d in copies), *keyfile] if dst.exists()]
    if there:
        raise UsageError(f"{', '.join(there)} already exist{'s' if len(there) == 1 else ''} here; init overwrites nothing",
                         hint="run it in an empty directory, or move those files away")
    if api_key:
        _write_key(here / KEY_FILE)
        wrote(Path(KEY_FILE))
    for dst, content in written.items():
        dst.write_text(content)
        wrote(dst.relative_to(here))
    for s, dst in copies:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(s, dst)
        wrote(dst.relative_to(here))
    missing = [s for s in sources if not (loaded.patch_dir / s).is_file()]
    return Project(src.name, inv, recipe, missing, str(p.directory))


def _source(wanted: str, here: Path) -> Path:
    """The bundled recipe named ``wanted``, or a recipe file of one's own (`inkctl recipes DIR`)."""
    from inkctl import bundled

    src = bundled.find(wanted)
    if src is None and Path(wanted).expanduser().is_file():
        src = Path(wanted).expanduser().resolve()
        if src.parent == here.resolve():
            raise UsageError(f"{wanted} is here already: init copies a recipe into this directory",
                             hint="run init in another directory, or edit the file where it is")
    if src is None:
        raise UsageError(f"no bundled recipe or recipe file named {wanted!r}", hint=bundled.unknown_hint(wanted))
    return src


def _write_key(path: Path) -> None:
    """A new random key (256 bits, URL-safe: a bearer token), created 0600, never printed."""
    import os
    import secrets

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("sk-" + secrets.token_urlsafe(32) + "\n")


def with_api_key(text: str, keyfile: Path) -> str:
    """The recipe text with ``api_key: API_KEY`` and that secret read from ``keyfile``: added to
    its ``secrets:`` block when it has one, else a new block at the end."""
    entry = f"  {KEY_SECRET}: {{file: {keyfile}}}  # made by inkctl init --api-key; keep the file private\n"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    at = next((i for i, ln in enumerate(lines) if ln.rstrip() == "secrets:"), None)
    if at is None:
        lines += ["secrets:\n", entry]
    else:
        lines.insert(at + 1, entry)
    lines.append(f"api_key: {KEY_SECRET}  # clients send it: Authorization: Bearer <the key in {keyfile.name}>\n")
    return "".join(lines)


def _own_schema(text: str) -> str:
    """The recipe's editor schema line, pointed at the schema that ships with this inkctl (the
    bundled file's ``../docs/recipe.schema.json`` means nothing beside the copy)."""
    from inkctl import bundled

    root = bundled.share_dir()
    schema = root / "docs" / "recipe.schema.json" if root else None
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(SCHEMA_LINE):
            lines[i] = f"{SCHEMA_LINE}{schema.as_uri()}\n" if schema and schema.is_file() else ""
    return "".join(lines)
