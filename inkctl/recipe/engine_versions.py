"""Which flags an engine release has: tables dumped from the releases' own argument parsers
(tools/engine_flags.py; one JSON file per release in recipe/engine_releases/).

A recipe targets a release by ``engine.version`` when it starts with one ('v0.28.0', '0.5.20'),
else by its image tag ('vllm/vllm-openai:v0.28.0', 'lmsysorg/sglang:v0.5.20-cu129'). Against
the table of that release (or, without one, the closest older release that has a table, said so):
a flag the release marks deprecated is a warning, a flag it does not have is an error (gone when
an older table has it), and a flag only the other engine has is an error whatever the release.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from inkctl.errors import Problem
from inkctl.recipe.engine_flags import other_engines_flag
from inkctl.recipe.engine_registry import name_of
from inkctl.recipe.flag_tables import _RELEASE, INDEX, TABLES, FlagTable, index_of, release_key, tables

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

__all__ = ["INDEX", "TABLES", "FlagTable", "check_argv", "describe_target", "engine_flag_findings", "flag_of",
           "index_of", "release_key", "table_for", "tables", "targeted_release"]


def _release_text(text: str) -> str | None:
    m = _RELEASE.match(text.strip())
    return m.group(0).lstrip("v") if m else None


def targeted_release(r: "Recipe") -> str | None:
    """The release a recipe targets: engine.version when it starts with one, else the image tag."""
    e = r.engine
    found = _release_text(e.version)
    if found:
        return found
    ref = e.image.ref.rsplit("/", 1)[-1]
    return _release_text(ref.split(":", 1)[1]) if ":" in ref else None


def table_for(engine: str, release: str) -> tuple[FlagTable | None, bool]:
    """The table of that release, else the closest older one (second value False)."""
    want = release_key(release)
    older = [t for t in tables(engine) if want is not None and t.key <= want]
    if not older:
        return None, False
    return older[-1], older[-1].key == want


def flag_of(arg: str) -> str | None:
    if not arg.startswith("--") or arg == "--":
        return None
    return arg.split("=", 1)[0]


@functools.lru_cache(maxsize=None)
def names(engine: str) -> frozenset[str]:
    """Every flag any table of ``engine`` has (empty without tables)."""
    return frozenset().union(*(t.names for t in tables(engine)))


def check_argv(r: "Recipe", argv: list[str], path_of) -> list[Problem]:
    """Problems with the flags of one engine command line; ``path_of(i)`` names the field of argv[i]."""
    engine = r.engine.kind
    release = targeted_release(r)
    table, exact = table_for(engine, release) if release else (None, False)
    out: list[Problem] = []
    for i, arg in enumerate(argv):
        flag = flag_of(arg)
        if flag is None or other_engines_flag(engine, flag) is not None:
            continue  # rules._engine reports a flag the engines' hand lists know as another engine's
        found = _cross_engine(engine, flag, path_of(i))
        if found is None and table is not None:
            where = f"{name_of(engine)} {table.version}" + ("" if exact else f" (the closest table to {release})")
            found = _against_table(engine, table, where, argv, i, path_of(i))
        if found is not None:
            out.append(found)
    return out


def _cross_engine(engine: str, flag: str, path: str) -> Problem | None:
    """A flag only another engine's tables have (only with this engine's tables at hand)."""
    mine = names(engine)
    if not mine or flag in mine:
        return None
    from inkctl.recipe.engine_registry import kinds

    other = next((k for k in kinds() if k != engine and flag in names(k)), None)
    if other is None:
        return None
    return Problem(f"{flag} is an {name_of(other)} flag, not a {name_of(engine)} one", path=path, hint=_cross_hint(flag))


def _against_table(engine: str, table: FlagTable, where: str, argv: list[str], i: int, path: str) -> Problem | None:
    """argv[i] against the targeted release's table: gone, not a flag, deprecated, or a value not among its choices."""
    arg = argv[i]
    flag = arg.split("=", 1)[0]
    info = table.flags.get(flag)
    if info is None:
        had = [t for t in tables(engine) if flag in t.names and t.key < table.key]
        if had:
            return Problem(f"{flag} is gone in {where}: {removed_in(engine, flag, had[-1])}",
                           path=path, hint=f"remove it, or target {name_of(engine)} {had[-1].version}")
        return Problem(f"{flag} is not a flag of {where}", path=path,
                       hint="check the spelling against the engine's --help for this release")
    if info.get("deprecated"):
        return Problem(f"{flag} is deprecated in {where} ({deprecated_since(engine, flag, table)})", path=path,
                       hint=info.get("help") or "see the release's --help", severity="warning")
    value = argv[i + 1] if "=" not in arg and i + 1 < len(argv) else arg.partition("=")[2]
    choices = info.get("choices")
    if choices and info.get("takes_value") and value and not value.startswith("--") and value not in choices:
        return Problem(f"{flag} {value}: {where} accepts {', '.join(choices)}", path=path)
    return None


def _adjacent(a: FlagTable, b: FlagTable) -> bool:
    """b is the release right after a (0.5.19 -> 0.5.20): no release between them can be missing."""
    return a.key[:2] == b.key[:2] and b.key[2] == a.key[2] + 1 and b.key[3:] in ((), (0,))


def deprecated_since(engine: str, flag: str, table: FlagTable) -> str:
    """'since 0.5.16': the oldest table of the run of tables up to ``table`` that mark the flag
    deprecated. Where the table before that run is not the release right before it, the
    deprecation came in one of the releases between: 'since 0.14.1 or a release after 0.11.2';
    where the run starts at the oldest table: 'since 0.11.2 or earlier'."""
    older = [t for t in tables(engine) if t.key <= table.key]
    since = table
    for t in reversed(older):
        if not t.flags.get(flag, {}).get("deprecated"):
            return f"since {since.version}" + ("" if _adjacent(t, since) else f" or a release after {t.version}")
        since = t
    return f"since {since.version} or earlier"


def removed_in(engine: str, flag: str, last: FlagTable) -> str:
    """Where the tables show the flag go: 'removed in 0.5.20 (0.5.19 has it)' when the two are
    consecutive releases, else 'removed after 0.11.2, by 0.14.1'."""
    after = [t for t in tables(engine) if t.key > last.key]
    if not after:
        return f"the last release with it is {last.version}"
    first = after[0]
    dep = last.flags[flag].get("deprecated")
    was = f", deprecated {deprecated_since(engine, flag, last)}" if dep else ""
    if _adjacent(last, first):
        return f"removed in {first.version} ({last.version} has it{was})"
    return f"removed after {last.version}, by {first.version}" + (f" ({last.version} has it{was})" if was else "")


def _cross_hint(flag: str) -> str:
    known = {"--mem-fraction-static": "engine.args.memory_fraction", "--gpu-memory-utilization": "engine.args.memory_fraction",
             "--context-length": "engine.args.max_model_len", "--max-model-len": "engine.args.max_model_len",
             "--tp-size": "engine.args.tensor_parallel", "--tensor-parallel-size": "engine.args.tensor_parallel",
             "--max-running-requests": "engine.args.max_running_requests", "--max-num-seqs": "engine.args.max_running_requests"}
    field = known.get(flag)
    return f"use {field}: inkctl writes each engine's own flag" if field else "remove it, or use the other engine"


def engine_flag_findings(r: "Recipe") -> list[Problem]:
    """validate's check of engine.args.extra against the targeted release."""
    return check_argv(r, list(r.engine.args.extra), lambda i: f"engine.args.extra[{i}]")


def describe_target(r: "Recipe") -> str:
    release = targeted_release(r)
    if release is None:
        return "no release found in engine.version or the image tag"
    table, exact = table_for(r.engine.kind, release)
    if table is None:
        return f"{release}: no flag table"
    return f"{release}: flag table {table.version}" + ("" if exact else " (closest older)")
