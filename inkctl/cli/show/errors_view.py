"""An error and a recipe's problems as people read them: located, scrubbed, relative paths."""

from __future__ import annotations

import sys

from inkctl.cli.show.terminal import plain, relative
from inkctl.errors import InkctlError, Problem, RecipeInvalid


def print_error(e: InkctlError) -> None:
    from inkctl.scrub import active

    scrub = active()  # every error passes the one scrubber
    e.message, e.hint = relative(scrub.text(e.message)), relative(scrub.text(e.hint)) if e.hint else e.hint
    out = plain(stderr=True)
    if isinstance(e, RecipeInvalid):
        errors = [p for p in e.problems if p.severity == "error"]
        out.print(f"[red]error:[/] {len(errors)} problem{'s' if len(errors) != 1 else ''} found", markup=True)
        print_problems(e.problems, strict=False, stream=sys.stderr)
        return
    out.print("[red]error:[/] ", end="")
    out.print(e.message, markup=False)
    if e.hint:
        out.print("[dim]hint:[/] ", end="")
        out.print(e.hint, markup=False)


def print_problems(problems: list[Problem], *, strict: bool, stream=None) -> None:
    out = plain(stderr=stream is sys.stderr)
    for p in problems:
        color = "red" if p.severity == "error" or strict else "yellow"
        out.print(f"  [{color}]{p.severity}[/] " + (f"{p.code} " if p.code else ""), end="")
        text = relative(f"{p.location}: {p.path + ': ' if p.path else ''}{p.message}")
        out.print(text, markup=False)
        if p.hint:
            out.print("      hint: " + relative(p.hint), markup=False, style="dim")
