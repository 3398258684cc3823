"""Which flags an engine release has: tables dumped from the releases' own argument parsers
(tools/engine_flags.py; one JSON file per release in recipe/engine_releases/).

A recipe targets a release by ``engine.version`` when it starts with one ('v0.28.0', '0.5.20'),
else by its image tag ('vllm/vllm-openai:v0.28.0', 'lmsysorg/sglang:v0.5.20-cu129'). Against
the table of that release: a flag the release marks deprecated is a warning, a flag it does not
have is an error (gone when an older table has it, with the release that removed it and the
flag that replaced it where one did), and a flag only the other engine has is an error whatever
the release. A release without a table of its own is judged only where the tables know: a flag
an older table shows removed is still gone, a deprecation still warns; every other flag is
named in one warning as not checked (as is everything where no release is found at all).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from inkctl.errors import Problem
from inkctl.recipe.checks.engine_flags import other_engines_flag
from inkctl.recipe.engine_registry import name_of
from inkctl.recipe.checks.flag_tables import _RELEASE, INDEX, TABLES, FlagTable, index_of, release_key, tables

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

__all__ = ["INDEX", "TABLES", "FlagTable", "check_argv", "describe_target", "engine_flag_findings", "flag_of",
           "index_of", "release_key", "replacement", "table_for", "tables", "targeted_release"]


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


# Flags a release replaced by another spelling: the engine's spec says (``renamed``, from the
# engines' own changes); a replacement holds the whole argument where the new spelling moved the
# meaning into a value. Where it does not say, the last table with the flag may: SGLang helps its
# deprecated aliases with "Deprecated alias for --new-flag", and vLLM 0.33 spells the negation of
# a boolean --enable-X as --disable-X where 0.32 had --no-enable-X.
_ALIAS_FOR = re.compile(r"(?:alias for|use|replaced by|renamed to) [`']?(--[A-Za-z0-9][\w-]*)", re.I)


def replacement(engine: str, flag: str, table: FlagTable) -> str | None:
    """What ``table``'s release takes instead of ``flag`` (a flag it no longer has), when known."""
    from inkctl.recipe.engine_registry import known, spec_of

    named = spec_of(engine).renamed.get(flag) if known(engine) else None
    if named and (flag_of(named) or named) in table.names:
        return named
    older = [t for t in tables(engine) if flag in t.names]
    if older:
        m = _ALIAS_FOR.search(older[-1].flags[flag].get("help") or "")
        if m and m.group(1) in table.names:
            return m.group(1)
    for old, new in (("--no-enable-", "--disable-"), ("--no-disable-", "--enable-")):
        if flag.startswith(old) and new + flag[len(old):] in table.names:
            return new + flag[len(old):]
    return None


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
    unchecked: list[tuple[int, str]] = []
    from inkctl.recipe.engine_registry import known, spec_of

    refused = spec_of(engine).set_by_inkctl if known(engine) else frozenset()
    for i, arg in enumerate(argv):
        flag = flag_of(arg)
        if flag is None:
            continue
        if other_engines_flag(engine, flag) is not None or flag in refused:
            continue  # rules._engine reports a flag the hand lists know as another engine's, or one inkctl sets
        cross = _cross_engine(engine, flag, path_of(i))
        if cross is not None:
            out.append(cross)
            continue
        if table is None:
            unchecked.append((i, flag))
            continue
        found = _against(r, table, exact, release or table.version, argv, i, path_of(i))
        if found is _UNCHECKED:
            unchecked.append((i, flag))
        elif found is not None:
            out.append(found)
    if unchecked:
        out.append(_unchecked(engine, release, table, unchecked, path_of))
    return out


_UNCHECKED = Problem("not checked")


def _cross_engine(engine: str, flag: str, path: str) -> Problem | None:
    """FLAG is only another engine's, by the tables (with tables of both at hand)."""
    mine = names(engine)
    if not mine or flag in mine:
        return None
    from inkctl.recipe.engine_registry import kinds

    other = next((k for k in kinds() if k != engine and flag in names(k)), None)
    if other is None:
        return None
    article = "an" if name_of(other)[0] in "AEIOSU" else "a"
    return Problem(f"{flag} is {article} {name_of(other)} flag, not a {name_of(engine)} one", path=path,
                   hint=_cross_hint(flag))


def _against(r: "Recipe", table: FlagTable, exact: bool, release: str, argv: list[str], i: int, path: str):
    """argv[i] judged by ``table``: a Problem, None (fine), or _UNCHECKED (a release without its
    own table, and a flag its closest older table cannot speak for)."""
    engine, arg = r.engine.kind, argv[i]
    flag = flag_of(arg) or arg
    word = name_of(engine)
    where = f"{word} {release}"
    info = table.flags.get(flag)
    if info is None:
        had = [t for t in tables(engine) if flag in t.names and t.key < table.key]
        if not had:
            return _UNCHECKED if not exact else Problem(
                f"{flag} is not a flag of {where}", path=path,
                hint=_instead(engine, flag, table) or "check the spelling against the engine's --help for this release")
        instead = replacement(engine, flag, table)
        said = f"; {instead} replaces it" if instead else ""
        return Problem(f"{flag} is gone in {where}: {removed_in(engine, flag, had[-1])}{said}", path=path,
                       hint=(f"use {instead}" if instead else "remove it") + f", or target {word} {had[-1].version}")
    if info.get("deprecated"):
        return Problem(f"{flag} is deprecated in {where} ({deprecated_since(engine, flag, table)})", path=path,
                       hint=info.get("help") or "see the release's --help", severity="warning")
    if not exact:
        return None
    value = argv[i + 1] if "=" not in arg and i + 1 < len(argv) else arg.partition("=")[2]
    choices = info.get("choices")
    if choices and info.get("takes_value") and value and not value.startswith("--") and value not in choices:
        return Problem(f"{flag} {value}: {where} accepts {', '.join(choices)}", path=path)
    return None


def _instead(engine: str, flag: str, table: FlagTable) -> str | None:
    instead = replacement(engine, flag, table)
    return f"{name_of(engine)} {table.version} spells it {instead}" if instead else None


def _unchecked(engine: str, release: str | None, table: FlagTable | None, found: list[tuple[int, str]], path_of) -> Problem:
    """One warning naming the flags no table could speak for, and why."""
    word = name_of(engine)
    flags = ", ".join(f for _, f in found)
    if release is None:
        why = "no release found in engine.version or the image tag"
        hint = f"set engine.version to the {word} release the image holds"
    elif table is None:
        oldest = tables(engine)[0].version if tables(engine) else None
        why = f"inkctl has no flag table for {word} {release}" + (f" (the oldest is {oldest})" if oldest else "")
        hint = "check them against the release's --help, or target a release inkctl has a table for"
    elif release_key(table.version) is None:  # a table of a commit, not of a release
        why = f"inkctl's {word} table is of a commit ({table.version}), not of {release}, and that commit has none of them"
        hint = f"check them against {word} {release}'s --help"
    else:
        why = (f"inkctl has no flag table for {word} {release}; the closest older one ({table.version}) cannot "
               "say whether it has them")
        hint = f"check them against {word} {release}'s --help (only removals and deprecations up to {table.version} were checked)"
    return Problem(f"not checked: {flags}: {why}", path=path_of(found[0][0]), hint=hint, severity="warning")


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
    """validate's check of engine.args.extra against the targeted release, and of the typed
    fields' values against the choices of the flags they pass."""
    return check_argv(r, list(r.engine.args.extra), lambda i: f"engine.args.extra[{i}]") + typed_choice_findings(r)


def typed_choice_findings(r: "Recipe") -> list[Problem]:
    """A typed field's value (reasoning_parser, tool_call_parser, kv_cache_dtype, ...) outside the
    choices the targeted release's own parser gives its flag: the engine refuses it at start, as
    it would the same value in extra. Judged only by a release's own table (a closer one may
    differ); a flag without choices there takes any value."""
    import difflib

    from inkctl.recipe.engine_registry import known, spec_of

    engine = r.engine.kind
    release = targeted_release(r)
    table, exact = table_for(engine, release) if release else (None, False)
    if table is None or not exact or not known(engine):
        return []
    out: list[Problem] = []
    for field, flags in spec_of(engine).flag_of.items():
        value = getattr(r.engine.args, field, None)
        if not isinstance(value, str) or not value:
            continue
        info = next((table.flags[f] for f in flags if f in table.flags and table.flags[f].get("takes_value")), None)
        choices = (info or {}).get("choices")
        if choices and value not in choices:
            flag = next(f for f in flags if f in table.flags and table.flags[f].get("takes_value"))
            near = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
            out.append(Problem(f"{field}: {value!r} is not one {name_of(engine)} {release}'s {flag} accepts: "
                               f"{', '.join(choices)}", path=f"engine.args.{field}",
                               hint=f"did you mean {near[0]!r}?" if near else "use one of them"))
    return out


def describe_target(r: "Recipe") -> str:
    release = targeted_release(r)
    if release is None:
        return "no release found in engine.version or the image tag"
    table, exact = table_for(r.engine.kind, release)
    if table is None:
        return f"{release}: no flag table"
    return f"{release}: flag table {table.version}" + ("" if exact else " (closest older)")
