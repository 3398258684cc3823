"""The at-start hotfix wrapper: verify every hotfix's sha256, run it, then exec the engine.

Fail-closed: a missing or altered hotfix, or one that exits non-zero, stops the container
before the engine starts, with a line that names the hotfix. The script is generated from
validated values only (file names are [A-Za-z0-9._-], digests are hex) and every value in it
is quoted by the one quoting function.
"""

from __future__ import annotations

from inkctl.plan.quote import command_line
from inkctl.recipe.patch import Hotfix

MOUNT = "/inkctl/hotfix"
ENTRY = "entry.sh"
EXIT_MISSING = 96
EXIT_ALTERED = 97
EXIT_FAILED = 98


def entry_script(hotfixes: list[Hotfix], pins: dict[str, str]) -> str:
    """The wrapper's text. ``pins`` maps hotfix name -> sha256 (from the recipe or the lock)."""
    lines = [
        "#!/bin/sh",
        "# inkctl at-start hotfix wrapper: verify, apply, then exec the engine (fail-closed).",
        "set -u",
        f"cd {MOUNT} || exit {EXIT_MISSING}",
        "verify() {",
        f'  [ -f "$1" ] || {{ echo "inkctl-hotfix: $1 is missing" >&2; exit {EXIT_MISSING}; }}',
        '  actual=$(sha256sum "$1" | cut -d" " -f1)',
        f'  [ "$actual" = "$2" ] || {{ echo "inkctl-hotfix: $1 was altered: expected sha256 $2, found $actual" >&2; exit {EXIT_ALTERED}; }}',
        "}",
        "gated_off() {",
        '  [ -n "$1" ] || return 1',
        '  eval "v=\\${$1:-}"',
        '  [ -z "$v" ] || [ "$v" = 0 ]',
        "}",
    ]
    for h in hotfixes:
        run = command_line([*h.interpreter, f"{MOUNT}/{h.name}"])
        apply = [
            f"  echo {command_line([f'inkctl-hotfix: applying {h.name}'])} >&2",
            f"  {run} || {{ rc=$?; echo {command_line([f'inkctl-hotfix: {h.name} failed'])} \"with exit $rc\" >&2; exit {EXIT_FAILED}; }}",
        ]
        lines.append(command_line(["verify", h.name, pins.get(h.name, "unpinned")]))
        if h.gate_env:
            skipped = f"inkctl-hotfix: {h.name} skipped: {h.gate_env} is not set"
            lines += [f"if gated_off {h.gate_env}; then", f"  echo {command_line([skipped])} >&2", "else", *apply, "fi"]
        else:
            lines += [x[2:] for x in apply]
    lines += ['echo "inkctl-hotfix: all hotfixes verified; starting the engine" >&2', 'exec "$@"', ""]
    return "\n".join(lines)
