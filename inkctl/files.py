"""Files on this machine that another inkctl may read or write at the same moment."""

from __future__ import annotations

from pathlib import Path


def replace_text(path: Path, text: str) -> None:
    """Write ``path`` whole under a temp name of its own, then rename it over the old one: a
    reader sees the old file or the new one, and two writers never share a temp file (a fixed
    ``.tmp`` name let the second one's rename find it gone)."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
