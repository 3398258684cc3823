"""The values of options several commands share, checked. No typer here: ``inkctl validate``
uses these without it (``cli/validate.py``); ``cli/common/options.py`` declares the options."""

from __future__ import annotations

from typing import List, Optional

from inkctl.errors import UsageError


def output_format(value: str) -> str:
    if value not in ("text", "json"):
        raise UsageError(f"--output must be 'text' or 'json', not {value!r}")
    return value


def overrides(values: Optional[List[str]]) -> list[str]:
    return list(values or [])
