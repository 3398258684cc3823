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

from inkctl.plan.step import EnvFile, Put, Run, Stage

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


def unit_key(unit: str) -> str | None:
    """The name a unit is paired by: ``--flag`` of ``--flag value`` or ``--flag=value``,
    ``-e K`` of ``-e K=V`` (an environment variable by its name); None for a lone word."""
    if not unit.startswith("-") or _number(unit):
        return None
    head, _, value = unit.partition(" ")
    if "=" in head:
        return head.split("=", 1)[0]
    if value and "=" in value and not value.startswith("-"):
        return f"{head} {value.split('=', 1)[0]}"
    return head


def diff_argv(old: tuple[str, ...] | list[str], new: tuple[str, ...] | list[str]) -> list[str]:
    """A compact unified-style diff of two argvs by flag: ``- --max-model-len 4096`` / ``+ --max-model-len 8192``.
    Unchanged flags are left out; a flag whose value changed is shown as its old unit, then its new
    one (paired by name, wherever it moved); an empty list means the same argv."""
    a, b = [u for u in flag_units(old) if not u.startswith(NOISE)], [u for u in flag_units(new) if not u.startswith(NOISE)]
    gone: list[str] = []
    came: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag != "equal":
            gone += a[i1:i2]
            came += b[j1:j2]
    out: list[str] = []
    for u in gone:
        out.append(f"- {u}")
        k = unit_key(u)
        twin = next((n for n in came if k is not None and unit_key(n) == k), None)
        if twin is not None:
            came.remove(twin)
            out.append(f"+ {twin}")
    out += [f"+ {u}" for u in came]
    return out


@dataclass(frozen=True)
class RankChange:
    """What changes for one rank: ``state`` is changed, unchanged, added or removed; ``lines``
    the argv diff (``- old`` / ``+ new``; an added rank: its new argvs)."""

    rank: int
    host: str
    state: str
    lines: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"rank": self.rank, "host": self.host, "state": self.state, "lines": list(self.lines)}


def rank_changes(old: dict[int, tuple[tuple[str, ...], ...]], new: dict[int, tuple[tuple[str, ...], ...]],
                 where: dict[int, str]) -> list[RankChange]:
    """Per rank, what changes between an old launch (a host's plan record, or the local launch
    record) and the new plan. ``where`` names each rank's host."""
    out: list[RankChange] = []
    for rank in sorted(set(old) | set(new)):
        host = where.get(rank, "")
        if rank not in new:
            out.append(RankChange(rank, host, "removed"))
        elif rank not in old:
            out.append(RankChange(rank, host, "added", tuple(f"+ {' '.join(argv)}" for argv in new[rank])))
        else:
            o, n = old[rank], new[rank]
            changed: list[str] = []
            for k in range(max(len(o), len(n))):
                changed += diff_argv(o[k] if k < len(o) else (), n[k] if k < len(n) else ())
            out.append(RankChange(rank, host, "changed" if changed else "unchanged", tuple(changed)))
    return out


def diff_plans(old: dict[int, tuple[tuple[str, ...], ...]], new: dict[int, tuple[tuple[str, ...], ...]],
               where: dict[int, str]) -> list[str]:
    """Per rank, what changes between the old record and the new plan, as indented lines
    (``up`` shows them before it replaces a deployment, ``plan`` for each replica of a rollout).
    ``where`` names each rank's host (``rank 1 (h2)``)."""
    lines: list[str] = []
    for c in rank_changes(old, new, where):
        name = f"rank {c.rank}" + (f" ({c.host})" if c.host else "")
        if c.state == "changed":
            lines.append(f"  {name}:")
            lines += ["    " + x for x in c.lines]
        elif c.state == "added":
            lines.append(f"  {name}: added")
            lines += ["    " + x for x in c.lines]
        else:
            lines.append(f"  {name}: {c.state}")
    return lines


def launch_record(plan) -> dict:
    """What ``up`` launched of a deployment, as this machine keeps it (``inkctl.launchlog``):
    per rank its host, container, image, the run argvs in launch order and the names of its
    environment (the recipe's ``--env`` names and its env file's; never a value of the env file:
    secrets reach a host only there). ``plan`` diffs the next version against it."""
    env_files: dict[tuple[str, str], tuple[str, ...]] = {}
    for st in plan.stages:
        for s in st.steps:
            for put in (s, *getattr(s, "files", ())):
                if isinstance(put, Put) and isinstance(put.content, EnvFile):
                    env_files[(put.host, put.path)] = tuple(k for k, _ in put.content.entries)
    ranks: dict[int, dict] = {}
    for st in plan.stages:
        for s in st.steps:
            if not (isinstance(s, Run) and s.kind == "run" and s.rank is not None):
                continue
            r = ranks.setdefault(s.rank, {"rank": s.rank, "host": s.host, "container": "", "image": "", "env": [],
                                          "argv": []})
            r["argv"].append(list(s.argv))
            spec = s.container
            if spec is not None:
                r["container"], r["image"] = spec.name, spec.image
                names = [*spec.env_names, *env_files.get((s.host, spec.env_file or ""), ())]
                r["env"] = sorted(set(r["env"]) | set(names))
    return {"version": VERSION, "recipe_hash": plan.recipe_hash, "ranks": [ranks[k] for k in sorted(ranks)]}


def launched_argv(record: dict) -> tuple[dict[int, tuple[tuple[str, ...], ...]], dict[int, str]]:
    """A launch record's run argvs per rank and each rank's host. Raises ValueError when it is
    not one."""
    ranks = record.get("ranks") if isinstance(record, dict) else None
    if not isinstance(ranks, list):
        raise ValueError("not a launch record")
    try:
        argv = {int(r["rank"]): tuple(tuple(str(a) for a in v) for v in r["argv"]) for r in ranks}
        where = {int(r["rank"]): str(r.get("host", "")) for r in ranks}
    except (KeyError, TypeError, ValueError):
        raise ValueError("not a launch record") from None
    return argv, where
