"""What ``inkctl validate`` found in a recipe file, kept under the user's cache directory
(``$XDG_CACHE_HOME/inkctl/validate``, else ``~/.cache/inkctl/validate``), so that validating
an unchanged file again costs neither pydantic's model classes nor YAML (benchmarks/startup.py
reports runs with and without it). ``INKCTL_VALIDATE_CACHE=0`` turns it off.

An entry is found only by everything its verdict was made of; a change in any of them is
another key, or a stale entry that is not used:

- the recipe file's bytes, the path as given, its absolute and real paths, the working directory;
- inkctl's version and every file of the inkctl package (size and modification time: a
  checkout edited in place is another inkctl);
- the Python that runs it (version, executable) and the installed pydantic, pydantic-core
  and PyYAML (their distribution names, which carry the versions, and their files' sizes and
  modification times);
- the files the verdict read or looked for besides the recipe (the lock file, hotfix and
  patch sources, anything opened while loading, seen by an audit hook): each one's sha256,
  or that it was missing, checked again on every use.

Only recipes are kept (not inventories or gateway files), and only what loading said: its
problems and its warnings. The command prints them as it prints a fresh verdict.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Iterator

from inkctl.errors import Problem

FORMAT = 1
KEEP = 512  # entries; beyond it the oldest half goes
THIRD_PARTY = {"pydantic": "pydantic-", "pydantic_core": "pydantic_core-", "yaml": "pyyaml-"}
_RECORDING: list[set[str]] = []  # the files opened while a verdict is made (audit hook)
_HOOKED = [False]
_PACKAGE_DIRS: dict[str, Path | None] = {}


def cache_dir() -> Path | None:
    """Where entries live; None when the cache is off."""
    if os.environ.get("INKCTL_VALIDATE_CACHE", "1") in ("0", "off", "no", "false"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "inkctl" / "validate"


def _files_state(root: Path | str, recursive: bool, prefix: str = "") -> list:
    """(relative name, size, mtime_ns) of every file under ROOT (its own folder only, or all)."""
    out = []
    with os.scandir(root) as entries:
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if recursive and e.name != "__pycache__":
                    out += _files_state(e.path, True, f"{prefix}{e.name}/")
                continue
            st = e.stat()
            out.append((prefix + e.name, st.st_size, st.st_mtime_ns))
    return sorted(out)


def _package_dir(name: str) -> Path | None:
    if name not in _PACKAGE_DIRS:
        from importlib.util import find_spec

        spec = find_spec(name)
        locations = spec.submodule_search_locations if spec is not None else None
        _PACKAGE_DIRS[name] = Path(list(locations)[0]) if locations else None
    return _PACKAGE_DIRS[name]


def environment() -> list:
    """What a verdict depends on besides the recipe and the files it read: this inkctl, this
    Python, and the libraries that validate (without importing them)."""
    import inkctl

    here = Path(inkctl.__file__).parent
    state: list[Any] = [FORMAT, inkctl.__version__, str(here), _files_state(here, recursive=True),
                        sys.version, sys.executable, sys.implementation.cache_tag]
    for name, dist in THIRD_PARTY.items():
        d = _package_dir(name)
        if d is None:
            state.append((name, None))
            continue
        try:
            dists = sorted(n for n in os.listdir(d.parent) if n.lower().startswith(dist) and n.endswith(".dist-info"))
        except OSError:
            dists = []
        state.append((name, str(d), dists, _files_state(d, recursive=False)))
    return state


def file_state(path: str | Path) -> str:
    """A file as a verdict saw it: its sha256, "missing", or "other" (a directory, ...)."""
    p = Path(path)
    try:
        if p.is_file():
            return hashlib.sha256(p.read_bytes()).hexdigest()
        return "other" if p.exists() else "missing"
    except OSError as e:
        return f"unreadable: {e.errno}"


class Cache:
    """The entries under ``root``, keyed for this inkctl, this Python and this working directory."""

    def __init__(self, root: Path, env: list | None = None):
        self.root = root
        text = json.dumps(environment() if env is None else env, sort_keys=True, default=str)
        self.env = hashlib.sha256(text.encode()).hexdigest()
        self.cwd = os.getcwd()
        self.pruned = False

    def _key(self, path: Path, data: bytes) -> str:
        h = hashlib.sha256()
        h.update(json.dumps([self.env, self.cwd, str(path), os.path.abspath(path), os.path.realpath(path)]).encode())
        h.update(b"\0")
        h.update(data)
        return h.hexdigest()

    def get(self, path: Path) -> tuple[list[Problem], list[Problem]] | None:
        """(problems, warnings) as loading ``path`` gave them, if nothing they came from changed."""
        try:
            key = self._key(path, path.read_bytes())
            entry = json.loads((self.root / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("format") != FORMAT:
            return None
        if any(file_state(p) != state for p, state in entry["reads"]):
            return None
        return ([Problem(**p) for p in entry["problems"]], [Problem(**p) for p in entry["warnings"]])

    def put(self, path: Path, data: bytes, reads: dict[str, str], problems: list[Problem],
            warnings: list[Problem]) -> None:
        from inkctl.files import replace_text

        entry = {"format": FORMAT, "recipe": os.path.abspath(path), "reads": sorted(reads.items()),
                 "problems": [vars(p) for p in problems], "warnings": [vars(w) for w in warnings]}
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            replace_text(self.root / f"{self._key(path, data)}.json", json.dumps(entry))
            if not self.pruned:
                self.pruned = True
                self._prune()
        except OSError as e:  # a read-only or full home: the verdict stands, unkept
            import logging

            logging.getLogger(__name__).debug("validate cache: cannot keep %s: %s", path, e)

    def _prune(self) -> None:
        entries = [self.root / n for n in os.listdir(self.root) if n.endswith(".json")]
        if len(entries) <= KEEP:
            return
        entries.sort(key=lambda p: p.stat().st_mtime_ns)
        for p in entries[: len(entries) - KEEP // 2]:
            p.unlink(missing_ok=True)


def open_cache() -> Cache | None:
    root = cache_dir()
    return None if root is None else Cache(root)


def _audit(event: str, args: tuple) -> None:
    if _RECORDING and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(args[0]))
        for opened in _RECORDING:
            opened.add(path)


@contextmanager
def recording(opened: set[str]) -> Iterator[None]:
    """Add to ``opened`` the absolute paths of the files opened meanwhile (an audit hook)."""
    if not _HOOKED[0]:
        sys.addaudithook(_audit)
        _HOOKED[0] = True
    _RECORDING.append(opened)
    try:
        yield
    finally:
        _RECORDING.remove(opened)


def reads_of(path: Path, opened: set[str], looked_for: list[Path]) -> dict[str, str]:
    """The files a verdict on ``path`` depends on, each as it was: what loading opened (less the
    recipe itself, inkctl's and Python's own files, which the key holds) and what it looked for."""
    import inkctl

    mine = os.path.abspath(path)
    own = tuple(os.path.join(os.path.abspath(d), "") for d in
                {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(inkctl.__file__)}
                | {str(_package_dir(n) or "") for n in THIRD_PARTY} - {""})
    files = {p for p in opened if p != mine and not p.startswith(own)}
    files |= {os.path.abspath(p) for p in looked_for}
    return {p: file_state(p) for p in sorted(files)}


def looked_for(loaded: Any) -> list[Path]:
    """Files a loaded recipe's verdict looked for without opening them when absent: its lock
    file, its hotfix and patch sources (recipe/reading/source.py, recipe/lockfile.py)."""
    from inkctl.recipe.lockfile import lock_path

    out = [lock_path(loaded)]
    p = loaded.recipe.patches
    out += [loaded.patch_dir / h.source for h in p.hotfixes]
    out += [loaded.patch_dir / f.source for f in p.files if getattr(f, "source", None)]
    return out
