"""What a YAML file given to a command is, told from its top-level keys without loading a model:
a gateway file has ``models:`` and no ``engine:`` (a recipe has ``engine:``). The text is parsed
once per process (recipe/document.py keeps the parse), so asking costs validate nothing extra,
and this module imports neither pydantic nor the gateway's models."""

from __future__ import annotations

from pathlib import Path


def is_gateway_file(path: str | Path) -> bool:
    p = Path(path)
    if p.suffix not in (".yaml", ".yml") or not p.is_file():
        return False
    from inkctl.errors import InkctlError
    from inkctl.recipe.document import parse

    try:
        data = parse(p, None, mapping=False).data
    except (OSError, UnicodeDecodeError, InkctlError):
        return False
    return isinstance(data, dict) and "models" in data and "engine" not in data
