"""Which files of a model the engine reads, and the pin of them kept in the lock file.

Pure: no I/O beyond reading the lock file. A manifest lists every needed file with its size
and the hash the Hub gives: sha256 for LFS files (shards), the git blob id (sha1 of
``blob <size>\\0`` + content) for small files. The Hub cache names a blob by that same value, so
the manifest says exactly where each file lives in ``models--org--name/blobs``.
"""

from __future__ import annotations

import fnmatch
import posixpath
from dataclasses import dataclass, field
from typing import Sequence

from inkctl.bundled import lock_command
from inkctl.errors import InkctlError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack", ".onnx", ".onnx_data",
                   ".ckpt", ".tflite", ".ot", ".nemo", ".mlmodel", ".npz", ".pkl")
SAFETENSORS_INDEX = "model.safetensors.index.json"
DEFAULT_HUB = "https://huggingface.co"
CONTAINER_HF_HOME = "/root/.cache/huggingface"


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the repository root, '/'-separated
    size: int
    sha256: str | None = None  # LFS files
    blob_id: str | None = None  # git blob id (sha1), every file on the Hub

    @property
    def etag(self) -> str:
        """The blob's name in the Hub cache."""
        return self.sha256 or self.blob_id or ""

    @property
    def algo(self) -> str:
        return "sha256" if self.sha256 else "git-sha1"

    def as_dict(self) -> dict:
        d: dict = {"path": self.path, "size": self.size}
        if self.sha256:
            d["sha256"] = self.sha256
        if self.blob_id:
            d["blob_id"] = self.blob_id
        return d


@dataclass(frozen=True)
class Manifest:
    repo: str
    revision: str  # the commit sha
    ref: str  # what the recipe asked for ('main' when nothing)
    files: tuple[FileEntry, ...] = field(default=())

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def file(self, path: str) -> FileEntry:
        for f in self.files:
            if f.path == path:
                return f
        raise KeyError(path)

    def as_dict(self) -> dict:
        return {"repo": self.repo, "revision": self.revision, "ref": self.ref,
                "bytes": self.total_bytes, "files": [f.as_dict() for f in self.files]}

    @classmethod
    def from_dict(cls, d: dict) -> "Manifest":
        files = tuple(FileEntry(f["path"], int(f["size"]), f.get("sha256"), f.get("blob_id")) for f in d["files"])
        return cls(d["repo"], d["revision"], d.get("ref") or "main", files)


def repo_folder(repo: str) -> str:
    """The Hub cache's directory name for a model repository."""
    return "models--" + repo.replace("/", "--")


def _is_weight(path: str) -> bool:
    return path.endswith(WEIGHT_SUFFIXES)


def needed_files(paths: list[str], index: dict | None, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> list[str]:
    """The files an engine reads, from a repository's file list.

    Top-level files that are not weights (config, tokenizer, generation config, chat template,
    remote code), then the weights: the shards the safetensors index names, else a single
    model.safetensors, else the PyTorch ``*.bin`` files when there is no safetensors at all.
    Subdirectories (``original/``, ``onnx/``, ...) and GGUF files are left out. ``include``
    adds files by glob, ``exclude`` removes them; both match the repository path."""
    have = set(paths)
    out = [p for p in paths if "/" not in p and not _is_weight(p)]
    if index is not None:
        shards = sorted(set((index.get("weight_map") or {}).values()))
        missing = [s for s in shards if s not in have]
        if missing:
            raise InkctlError(f"{SAFETENSORS_INDEX} names shards the repository does not have: {', '.join(missing[:5])}",
                              hint="the repository is broken at this revision: pin another one (model.revision)")
        out += shards
    elif "model.safetensors" in have:
        out.append("model.safetensors")
    elif not any(p.endswith(".safetensors") for p in have):
        out += [p for p in paths if "/" not in p and p.endswith(".bin")]
    else:  # safetensors without an index: every top-level shard
        out += [p for p in paths if "/" not in p and p.endswith(".safetensors")]
    out += [p for p in paths if any(fnmatch.fnmatchcase(p, g) for g in include)]
    out = [p for p in dict.fromkeys(out) if not any(fnmatch.fnmatchcase(p, g) for g in exclude)]
    return sorted(out)


def container_hub_cache(env: dict[str, str]) -> str:
    """Where the engine in the container looks for the Hub cache (huggingface_hub's rules)."""
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"].rstrip("/")
    if env.get("HUGGINGFACE_HUB_CACHE"):
        return env["HUGGINGFACE_HUB_CACHE"].rstrip("/")
    return (env.get("HF_HOME") or CONTAINER_HF_HOME).rstrip("/") + "/hub"


def host_cache_template(recipe) -> str | None:
    """The host path (with ${VARS}) of the Hub cache the containers read; None when the
    recipe does not put it on a host path (then inkctl does not manage the weights)."""
    w = recipe.model.weights
    if w.cache:
        return w.cache.rstrip("/")
    inside = container_hub_cache(dict(recipe.container.env))
    best = None
    for m in recipe.container.mounts:
        t = m.target.rstrip("/") or "/"
        if inside == t or inside.startswith(t.rstrip("/") + "/"):
            if best is None or len(t) > len(best.target.rstrip("/")):
                best = m
    if best is None:
        return None
    rest = inside[len(best.target.rstrip("/")):]
    return posixpath.normpath(best.source.rstrip("/") + rest) if rest else best.source.rstrip("/")


def managed(recipe) -> bool:
    """inkctl pins and distributes the weights: the recipe wants it and the cache is on the hosts.
    A local model directory is pinned (``inkctl lock``) but not distributed through the Hub cache."""
    return recipe.model.weights.manage and not recipe.model.local and host_cache_template(recipe) is not None


def read_manifest(loaded) -> Manifest | None:
    """The model pinned in the lock file, if any."""
    from inkctl.recipe.lockfile import read_lock

    doc = read_lock(loaded)
    model = (doc or {}).get("model")
    if not model:
        return None
    m = Manifest.from_dict(model)
    if m.repo != loaded.recipe.model.repo:
        raise InkctlError(f"the lock file pins model {m.repo}, but the recipe serves {loaded.recipe.model.repo}",
                          hint=f"run {lock_command(loaded.path)} to pin the recipe's model", exit_code=2)
    rev = loaded.recipe.model.revision
    if rev and rev not in (m.revision, m.ref):
        raise InkctlError(f"the lock file pins {m.repo} at {m.revision} ({m.ref}), but the recipe asks for revision {rev}",
                          hint=f"run {lock_command(loaded.path)} to pin that revision", exit_code=2)
    return m
