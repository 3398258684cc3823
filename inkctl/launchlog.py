"""Launch records, beside the boot records (``bootlog``): what ``up`` launched of a deployment
(per rank its host, container, image, argvs and environment names: ``plan.record.launch_record``),
one JSON file per launch under ``<results-dir>/launches/<deployment>/``, so that ``plan`` can show
what the next version replaces without touching a host. Never a secret value: the argvs hold
none (secrets reach a host only in its 0600 env file) and the environment is kept by name.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from inkctl.bootlog import _order, _slug, write_new

SUBDIR = "launches"
KEEP = 5  # launches kept per deployment (the newest); plan reads the last one


def folder(base: Path, deployment: str) -> Path:
    return base / SUBDIR / _slug(deployment)


def save(base: Path, deployment: str, record: dict, when: datetime | None = None) -> Path:
    """Write the record under a name of its own (``bootlog.write_new``: whole or not at all), then
    drop the oldest beyond ``KEEP``."""
    when = when or datetime.now(timezone.utc)
    d = folder(base, deployment)
    d.mkdir(parents=True, exist_ok=True)
    body = {"deployment": deployment, "date": when.isoformat(timespec="seconds"), **record}
    path = write_new(d, when.strftime("%Y%m%d-%H%M%S"), json.dumps(body, indent=1) + "\n")
    for old in sorted(d.glob("*.json"), key=_order)[:-KEEP]:
        old.unlink(missing_ok=True)  # another up may have removed it first
    return path


def latest(base: Path, deployment: str) -> tuple[Path, dict] | None:
    """The newest readable launch record of ``deployment``: (its path, its content), or None."""
    try:
        files = sorted(folder(base, deployment).glob("*.json"), key=_order)
    except OSError:
        return None
    for f in reversed(files):
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("ranks"), list):
            return f, data
    return None
