"""A recipe repository from elsewhere (``inkctl recipes --from GIT_URL|DIR``): cloned at a pinned
commit into inkctl's cache, so what is listed is exactly what a later ``plan``/``up`` of one of its
files reads. Git runs as an argv (never a shell); nothing from the repository runs here."""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from inkctl.errors import InkctlError


@dataclass(frozen=True)
class Checkout:
    source: str
    path: Path
    commit: str | None  # None: a plain directory, not a git repository


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "inkctl" / "recipe-repos"


def is_git_url(source: str) -> bool:
    return source.startswith(("https://", "http://", "ssh://", "git@", "file://", "git://")) or source.endswith(".git")


def _git(*argv: str, cwd: Path | None = None) -> str:
    try:
        p = subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except FileNotFoundError:
        raise InkctlError("git is not installed", hint="install git, or clone the repository yourself and pass its directory") from None
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise InkctlError(f"git {argv[0]} failed: {last}", hint="check the URL and the ref (--ref)")
    return p.stdout.strip()


def fetch(source: str, ref: str | None = None) -> Checkout:
    """A directory as it is, or a git repository cloned (once) and checked out at ``ref``
    (a commit, tag or branch; default: the remote's HEAD), pinned to the commit it resolves to."""
    if not is_git_url(source):
        p = Path(source)
        if not p.is_dir():
            raise InkctlError(f"{source}: not a directory, and not a git URL", hint="pass a directory or a git URL (https://, ssh://, file://)")
        commit = None
        if (p / ".git").exists():
            commit = _git("rev-parse", "HEAD", cwd=p)
        return Checkout(source, p, commit)
    dest = cache_root() / hashlib.sha256(source.encode()).hexdigest()[:16]
    if not (dest / ".git").is_dir():
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git("clone", "--quiet", "--no-checkout", "--", source, str(dest))
    else:
        _git("fetch", "--quiet", "--tags", "origin", cwd=dest)
    want = ref or "origin/HEAD"
    commit = _git("rev-parse", "--verify", "--end-of-options", f"{want}^{{commit}}", cwd=dest)
    _git("checkout", "--quiet", "--detach", commit, cwd=dest)
    return Checkout(source, dest, commit)
