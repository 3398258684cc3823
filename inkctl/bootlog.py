"""Boot records, beside the run records (``runlog``): one JSON file per ``up``, under
``<results-dir>/boots/<deployment>/``, so that the next boot of the recipe is compared with it
and ``inkctl results --boots`` can compare two.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

from inkctl.errors import InkctlError

SUBDIR = "boots"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80] or "deployment"


def save(base: Path, deployment: str, record: dict, when: datetime | None = None) -> Path:
    """Write the record under a name of its own: two ``up`` runs of one recipe (on other hosts,
    from one directory) that save within the same second get two files, never one overwritten,
    and a reader never sees a half-written one (the whole file is written aside, then linked in)."""
    when = when or datetime.now(timezone.utc)
    d = base / SUBDIR / _slug(deployment)
    d.mkdir(parents=True, exist_ok=True)
    stem = when.strftime("%Y%m%d-%H%M%S")
    body = {"deployment": deployment, "date": when.isoformat(timespec="seconds"), **record}
    return write_new(d, stem, json.dumps(body, indent=2) + "\n")


def write_new(d: Path, stem: str, text: str) -> Path:
    """``d/stem.json``, or ``d/stem-N.json`` for the first N free: created whole or not at all
    (a link of a finished temp file fails when the name is taken, where a test of the name
    followed by a write would let two writers both take it)."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".part", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        for n in range(1, 10000):
            path = d / (f"{stem}.json" if n == 1 else f"{stem}-{n}.json")
            try:
                os.link(tmp, path)
                return path
            except FileExistsError:
                continue
            except OSError:  # a filesystem without hard links: created exclusively, then written
                try:
                    with open(path, "x", encoding="utf-8") as f:
                        f.write(text)
                    return path
                except FileExistsError:
                    continue
        raise OSError(f"no free name for {stem} in {d}")
    finally:
        os.unlink(tmp)


def _order(f: Path) -> tuple[str, int]:
    """Oldest first: the date stem, then the counter a second boot within that second got."""
    m = re.fullmatch(r"(\d{8}-\d{6})(?:-(\d+))?", f.stem)
    return (m.group(1), int(m.group(2) or 1)) if m else (f.stem, 0)


def list_boots(base: Path, deployment: str | None = None) -> list[dict]:
    """Every boot record, oldest first (per deployment): id (deployment/stem), path, date.
    A directory that another command removes meanwhile is left out, not an error."""
    root = base / SUBDIR
    out: list[dict] = []
    try:
        dirs = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:  # no boots yet (or not readable): nothing to list
        return out
    for d in dirs:
        if deployment is not None and d.name != _slug(deployment):
            continue
        try:
            files = sorted(d.glob("*.json"), key=_order)
        except OSError:
            continue
        for f in files:
            out.append({"id": f"{d.name}/{f.stem}", "path": str(f), "deployment": d.name})
    return out


def read(path: Path) -> dict | None:
    """A boot record's content; None when it is not one (cut short, not JSON, not an object)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def previous(base: Path, deployment: str) -> tuple[str, dict] | None:
    """The latest readable boot record of this deployment: (id, record), or None."""
    for b in reversed(list_boots(base, deployment)):
        data = read(Path(b["path"]))
        if data is not None:
            return b["id"], data
    return None


def load(base: Path, ref: str) -> tuple[str, dict]:
    """A boot by id (deployment/stem), a unique prefix of one, or a file path."""
    p = Path(ref)
    if p.is_file():
        return p.stem, _readable(p)
    boots = list_boots(base)
    matches = [b for b in boots if b["id"] == ref] or [b for b in boots if b["id"].startswith(ref)]
    if len(matches) != 1:
        what = "no boot" if not matches else f"{len(matches)} boots ({', '.join(b['id'] for b in matches[:4])})"
        raise InkctlError(f"{ref!r}: {what} under {base / SUBDIR} matches",
                          hint="inkctl results --boots lists them; give an id, a unique prefix or a file")
    return matches[0]["id"], _readable(Path(matches[0]["path"]))


def _readable(path: Path) -> dict:
    data = read(path)
    if data is None:
        raise InkctlError(f"{path}: not a readable boot record (cut short, or not JSON)",
                          hint="inkctl up writes one per boot; remove this one or name another")
    return data
