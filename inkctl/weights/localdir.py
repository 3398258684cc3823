"""A model directory on this machine (not on the Hub), pinned by hashing its files where they live.

The same files as for a Hub repository (``needed_files``: config, tokenizer and generation
files, the shards the safetensors index names; never ``original/``, ``*.bin`` next to
safetensors, ``*.gguf``), each hashed by streaming it. The manifest has the Hub's shape
(path, size, sha256); its revision is a hash of the manifest itself, so a changed byte in
any pinned file gives another revision.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor

from inkctl.errors import InkctlError
from inkctl.recipe.manifest import SAFETENSORS_INDEX, FileEntry, Manifest, needed_files

CHUNK = 8 << 20
LOCAL_REF = "local"


class LocalModelError(InkctlError):
    exit_code = 2


def _listing(root: str) -> list[str]:
    """Every regular file under root (symlinks to files followed, as in a Hub snapshot), '/'-separated."""
    out = []
    for top, dirs, names in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(top, root)
        for n in names:
            full = os.path.join(top, n)
            if os.path.isfile(full):
                out.append(n if rel == "." else f"{rel.replace(os.sep, '/')}/{n}")
    return sorted(out)


def file_sha256(path: str) -> tuple[int, str]:
    """(size, sha256) of a file, read in chunks: never the whole file in memory."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def manifest_revision(files: tuple[FileEntry, ...]) -> str:
    """The content hash of a manifest: its paths, sizes and sha256s, in order."""
    doc = json.dumps([[f.path, f.size, f.sha256] for f in files], separators=(",", ":"))
    return "local-sha256:" + hashlib.sha256(doc.encode()).hexdigest()


def pin_local(recipe) -> Manifest:
    """The manifest of the files the engine needs from the local model directory model.repo."""
    root = recipe.model.repo
    fix = "set model.repo to the model directory (config.json, the safetensors shards and their index) on this machine"
    if not os.path.isdir(root):
        what = "is not a directory" if os.path.exists(root) else "does not exist on this machine"
        raise LocalModelError(f"model.repo: local model directory {root} {what}",
                              hint=f"{fix}, or to a Hugging Face repository id (org/name)")
    paths = _listing(root)
    index = None
    if SAFETENSORS_INDEX in paths:
        try:
            with open(os.path.join(root, SAFETENSORS_INDEX), "rb") as f:
                index = json.load(f)
        except (ValueError, UnicodeDecodeError) as e:
            raise LocalModelError(f"{os.path.join(root, SAFETENSORS_INDEX)} is not JSON: {e}",
                                  hint="repair or re-export the model directory") from None
        if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
            raise LocalModelError(f"{os.path.join(root, SAFETENSORS_INDEX)} has no weight_map object",
                                  hint="repair or re-export the model directory")
    elif not any("/" not in p and p.endswith(".safetensors") for p in paths):
        raise LocalModelError(f"model.repo: {root} has no {SAFETENSORS_INDEX} and no *.safetensors file at its top level",
                              hint=f"{fix}; convert other formats (*.bin, *.gguf) to safetensors first")
    w = recipe.model.weights
    try:
        names = needed_files(paths, index, w.include, w.exclude)
    except InkctlError as e:
        raise LocalModelError(f"{root}: {e.message}", hint="the directory is incomplete: copy the missing shards into it") from None
    with ThreadPoolExecutor(max_workers=max(1, min(4, len(names))), thread_name_prefix="inkctl-hash") as pool:
        hashed = list(pool.map(lambda n: file_sha256(os.path.join(root, n)), names))
    files = tuple(FileEntry(n, size, sha) for n, (size, sha) in zip(names, hashed))
    return Manifest(root, manifest_revision(files), LOCAL_REF, files)
