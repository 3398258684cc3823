"""Options shared by several commands, declared once."""

from __future__ import annotations

from typing import List, Optional

import typer

from inkctl.errors import UsageError

HostsOpt = typer.Option(None, "--hosts", help="Inventory file (YAML with a list 'hosts:'); wins over hosts in the recipe.")
SetOpt = typer.Option(None, "--set", help="Override a recipe field: dotted.path=value (repeatable).")
OutputOpt = typer.Option("text", "--output", "-o", help="text or json.")


def output_format(value: str) -> str:
    if value not in ("text", "json"):
        raise UsageError(f"--output must be 'text' or 'json', not {value!r}")
    return value


def overrides(values: Optional[List[str]]) -> list[str]:
    return list(values or [])
