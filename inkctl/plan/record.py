"""The plan record: what ``up`` launched, kept on each host, so that the next ``up`` of a changed
recipe can say what changes. Pure: no I/O.

``<deployment dir>/plan.json`` holds the recipe hash and the argv of every run step of the
ranks on that host, in launch order. Argvs never hold secret values (those reach a host only
in the 0600 env file, by ``--env-file``), so the record is safe to keep and to show.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from inkctl.plan.step import Run, Stage

RECORD = "plan.json"
VERSION = 1
# the recipe hash label always differs between two versions; the diff's header says so once
NOISE = "--label inkctl.recipe-hash="


def record_path(deployment_dir: str) -> str:
    return f"{deployment_dir}/{RECORD}"


def record_text(deployment: str, recipe_hash: str, host: str, stages: list[Stage] | tuple[Stage, ...]) -> str:
    """The record of ``host``: one run per line, so ``inkctl plan`` shows it readably."""
    runs = [{"rank": s.rank, "purpose": s.purpose, "argv": list(s.argv)}
            for st in stages for s in st.steps if isinstance(s, Run) and s.host == host]
    head = json.dumps({"version": VERSION, "deployment": deployment, "recipe_hash": recipe_hash, "host": host})
    body = ",\n".join("  " + json.dumps(r) for r in runs)
    return head[:-1] + ', "runs": [\n' + body + "\n]}\n"


@dataclass(frozen=True)
class Record:
    host: str
    recipe_hash: str
    argv_by_rank: dict[int, tuple[tuple[str, ...], ...]]


def parse_record(text: str) -> Record:
    """Raises ValueError when the text is not a plan record."""
    d = json.loads(text)
    if not isinstance(d, dict) or not isinstance(d.get("runs"), list):
        raise ValueError("not a plan record")
    ranks: dict[int, list[tuple[str, ...]]] = {}
    for r in d["runs"]:
        ranks.setdefault(int(r["rank"]), []).append(tuple(str(a) for a in r["argv"]))
    return Record(host=str(d.get("host", "")), recipe_hash=str(d.get("recipe_hash", "")),
                  argv_by_rank={k: tuple(v) for k, v in ranks.items()})


def argv_by_rank(stages, host: str | None = None) -> dict[int, tuple[tuple[str, ...], ...]]:
    """The run argvs of a plan per rank (of one host, or all); host housekeeping (page-cache) is not a rank's."""
    out: dict[int, list[tuple[str, ...]]] = {}
    for st in stages:
        for s in st.steps:
            if isinstance(s, Run) and s.kind == "run" and s.rank is not None and host in (None, s.host):
                out.setdefault(s.rank, []).append(tuple(s.argv))
    return {k: tuple(v) for k, v in out.items()}


def flag_units(argv: tuple[str, ...] | list[str]) -> list[str]:
    """Group an argv into units a person compares: ``--flag value``, ``--flag=value``, ``-e K=V``,
    ``--switch``, or a lone word. A value never starts with '-' (except a negative number)."""
    units: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and not _number(a) and "=" not in a and i + 1 < len(argv) and _value(argv[i + 1]):
            units.append(f"{a} {argv[i + 1]}")
            i += 2
        else:
            units.append(a)
            i += 1
    return units


def _number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _value(s: str) -> bool:
    return not s.startswith("-") or _number(s)


def diff_argv(old: tuple[str, ...] | list[str], new: tuple[str, ...] | list[str]) -> list[str]:
    """A compact unified-style diff of two argvs by flag: ``- --max-model-len 4096`` / ``+ --max-model-len 8192``.
    Unchanged flags are left out; an empty list means the same argv."""
    a, b = [u for u in flag_units(old) if not u.startswith(NOISE)], [u for u in flag_units(new) if not u.startswith(NOISE)]
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        out += [f"- {u}" for u in a[i1:i2]]
        out += [f"+ {u}" for u in b[j1:j2]]
    return out


def diff_plans(old: dict[int, tuple[tuple[str, ...], ...]], new: dict[int, tuple[tuple[str, ...], ...]],
               where: dict[int, str]) -> list[str]:
    """Per rank, what changes between the old record and the new plan, as indented lines.
    ``where`` names each rank's host (``rank 1 (h2)``)."""
    lines: list[str] = []
    for rank in sorted(set(old) | set(new)):
        name = f"rank {rank}" + (f" ({where[rank]})" if rank in where else "")
        if rank not in new:
            lines.append(f"  {name}: removed")
            continue
        if rank not in old:
            lines.append(f"  {name}: added")
            lines += [f"    + {' '.join(argv)}" for argv in new[rank]]
            continue
        changed: list[str] = []
        o, n = old[rank], new[rank]
        for k in range(max(len(o), len(n))):
            changed += diff_argv(o[k] if k < len(o) else (), n[k] if k < len(n) else ())
        if changed:
            lines.append(f"  {name}:")
            lines += ["    " + c for c in changed]
        else:
            lines.append(f"  {name}: same command")
    return lines
