"""Boot records: one JSON file per ``up``, under ``<results-dir>/boots/<deployment>/``, so that
the next boot of the recipe is compared with it and ``inkctl results --boots`` can compare two.
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
    when = when or datetime.now(timezone.utc)
    d = base / SUBDIR / _slug(deployment)
    d.mkdir(parents=True, exist_ok=True)
    stem = when.strftime("%Y%m%d-%H%M%S")
    path, n = d / f"{stem}.json", 1
    while path.exists():
        n += 1
        path = d / f"{stem}-{n}.json"
    body = {"deployment": deployment, "date": when.isoformat(timespec="seconds"), **record}
    path.write_text(json.dumps(body, indent=2) + "\n")
    return path


def _order(f: Path) -> tuple[str, int]:
    """Oldest first: the date stem, then the counter a second boot within that second got."""
    m = re.fullmatch(r"(\d{8}-\d{6})(?:-(\d+))?", f.stem)
    return (m.group(1), int(m.group(2) or 1)) if m else (f.stem, 0)


def list_boots(base: Path, deployment: str | None = None) -> list[dict]:
    """Every boot record, oldest first (per deployment): id (deployment/stem), path, date."""
    root = base / SUBDIR
    if not root.is_dir():
        return []
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if deployment is not None and d.name != _slug(deployment):
            continue
        for f in sorted(d.glob("*.json"), key=_order):
            out.append({"id": f"{d.name}/{f.stem}", "path": str(f), "deployment": d.name})
    return out


def previous(base: Path, deployment: str) -> tuple[str, dict] | None:
    """The latest boot record of this deployment: (id, record), or None."""
    boots = list_boots(base, deployment)
    for b in reversed(boots):
        try:
            return b["id"], json.loads(Path(b["path"]).read_text())
        except (OSError, ValueError):
            continue
    return None


def load(base: Path, ref: str) -> tuple[str, dict]:
    """A boot by id (deployment/stem), a unique prefix of one, or a file path."""
    p = Path(ref)
    if p.is_file():
        return p.stem, json.loads(p.read_text())
    boots = list_boots(base)
    matches = [b for b in boots if b["id"] == ref] or [b for b in boots if b["id"].startswith(ref)]
    if len(matches) != 1:
        what = "no boot" if not matches else f"{len(matches)} boots ({', '.join(b['id'] for b in matches[:4])})"
        raise InkctlError(f"{ref!r}: {what} under {base / SUBDIR} matches",
                          hint="inkctl results --boots lists them; give an id, a unique prefix or a file")
    return matches[0]["id"], json.loads(Path(matches[0]["path"]).read_text())
