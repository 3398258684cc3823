"""What a YAML file given to a command is, told from its top-level keys without loading a model:
a gateway file has ``models:`` and no ``engine:`` (a recipe has ``engine:``). The text is parsed
once per process (recipe/reading/document.py keeps the parse), so asking costs validate nothing extra,
and this module imports neither pydantic nor the gateway's models. Also: the files a command's
paths name (``expand_paths``), for the same reason (``inkctl validate`` with a cached verdict
loads no model: api/paper/validate_cache.py)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["expand_paths", "is_gateway_file", "recipe_path_or_self"]


def is_gateway_file(path: str | Path) -> bool:
    p = Path(path)
    if p.suffix not in (".yaml", ".yml") or not p.is_file():
        return False
    from inkctl.errors import InkctlError
    from inkctl.recipe.reading.document import parse

    try:
        data = parse(p, None, mapping=False).data
    except (OSError, UnicodeDecodeError, InkctlError):
        return False
    return isinstance(data, dict) and "models" in data and "engine" not in data


def expand_paths(paths: list[str]) -> list[Path]:
    """Files, directories (their *.yaml/*.yml, recursively) and globs -> recipe files, sorted."""
    import glob

    from inkctl.errors import UsageError

    out: list[Path] = []
    for p in paths:
        matches = glob.glob(p, recursive=True) if any(c in p for c in "*?[") else [str(recipe_path_or_self(p))]
        if not matches:
            raise UsageError(f"{p}: no such file or directory")
        for m in matches:
            if os.path.isdir(m):
                out += sorted(x for x in Path(m).rglob("*") if x.suffix in (".yaml", ".yml") and not x.name.endswith(".lock.yaml"))
            elif os.path.exists(m):
                out.append(Path(m))
            else:
                raise UsageError(f"{m}: no such file or directory")
    return out


def recipe_path_or_self(path: str) -> Path:
    from inkctl import bundled

    return bundled.resolve(path)
