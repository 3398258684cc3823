"""The flags each engine release has: tables dumped from the releases' own argument parsers
(tools/engine_flags.py; one JSON file per release in recipe/engine_releases/, and their index).
Data: a new engine's tables are files here, named in the index by their ``engine``."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

TABLES = Path(__file__).resolve().parents[1] / "engine_releases"
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?")


@dataclass(frozen=True)
class FlagTable:
    """One release's flags. ``names`` comes from the small index (every check that asks only
    whether a release has a flag); ``flags`` (help, choices, deprecation) reads the release's own
    file, once, when asked: validate reads one or two of the tables, not all of them."""

    engine: str
    version: str
    names: frozenset[str]
    file: str

    @property
    def flags(self) -> dict[str, dict]:
        return _flags(self.file)

    @property
    def key(self) -> tuple[int, ...]:
        return release_key(self.version) or (0,)


def release_key(text: str) -> tuple[int, ...] | None:
    m = _RELEASE.match(text.strip())
    if not m:
        return None
    return tuple(int(g) for g in m.groups(default="0"))


@functools.lru_cache(maxsize=None)
def _flags(file: str) -> dict[str, dict]:
    return json.loads((TABLES / file).read_text())["flags"]


def index_of(table_files) -> dict[str, dict]:
    """What ``INDEX`` holds, from the tables themselves: per file, engine, version and flag names
    (tools/engine_flags.py writes it; tests/unit/test_engine_flags.py checks it is current)."""
    out = {}
    for p in sorted(table_files):
        doc = json.loads(p.read_text())
        out[p.name] = {"engine": doc["engine"], "version": doc["version"], "names": sorted(doc["flags"])}
    return out


INDEX = "index.json"


@functools.lru_cache(maxsize=None)
def tables(engine: str) -> tuple[FlagTable, ...]:
    index = json.loads((TABLES / INDEX).read_text())
    out = [FlagTable(e["engine"], e["version"], frozenset(e["names"]), file)
           for file, e in index.items() if e["engine"] == engine]
    return tuple(sorted(out, key=lambda t: t.key))
