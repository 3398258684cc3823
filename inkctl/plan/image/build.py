"""A patched image (as in the Local AI Registry record for two RTX PRO 6000): its build context and its content-addressed tag. Pure.

The context is a Dockerfile, the patch files and two small scripts (``verify.sh`` and the
Python applier). Each patch is one exec-form RUN step that checks the original's sha256,
applies the patch and checks the result's sha256; a mismatch fails the build with a line
``inkctl-build: patch N (kind): PATH: sha256 mismatch ...: expected X, actual Y``.

The tag is ``<repository of engine.image.ref>:inkctl-<hash12>``, the hash taken over the base
(ref and pinned digest) and every patch (kind, path, hashes, content): the same inputs give
the same tag, so an image that is already on a host is a cache hit.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

from inkctl.bundled import lock_command
from inkctl.errors import InkctlError
from inkctl.plan.image.build_files import VERIFY_SH, WORKDIR, applier_source
from inkctl.runtimes.spec import repository
from inkctl.recipe.lockfile import read_pins
from inkctl.recipe.reading.source import Loaded

FORMAT = 1  # bump when the context's meaning changes: every tag changes with it
TAG_PREFIX = "inkctl-"
ABSENT = "absent"  # a patched file that does not exist (before or after the patch)


@dataclass(frozen=True)
class Target:
    """One file a patch changes, with the hashes it must have (None: not pinned)."""

    key: str  # pin name prefix: "patch:0" (replace/edit) or "patch:2:1" (file 1 of diff 2)
    path: str
    before: str | None
    after: str | None


@dataclass(frozen=True)
class PlannedPatch:
    index: int
    kind: str  # replace | edit | diff
    targets: tuple[Target, ...]
    source: str | None = None  # file under the patches directory (replace, diff)
    content: bytes | None = None  # its bytes; None when the file is missing
    edits: tuple[tuple[str, str], ...] = ()
    root: str = "/"


@dataclass(frozen=True)
class BuildContext:
    recipe: str
    tag: str
    content_hash: str
    base: str  # the recipe's patches.base
    base_pin: str | None  # digest the base must have (recipe's @sha256, else the lock's)
    files: tuple[tuple[str, bytes, int], ...]  # (name in the context, content, mode)
    labels: tuple[tuple[str, str], ...]

    @property
    def dockerfile(self) -> str:
        return self.file("Dockerfile").decode()

    def file(self, name: str) -> bytes:
        return next(c for n, c, _ in self.files if n == name)

    @property
    def size(self) -> int:
        """Bytes of the files in the context (without tar framing)."""
        return sum(len(c) for _, c, _ in self.files)

    def tar(self) -> bytes:
        """The context as a reproducible tar: sorted names, zero times, root owner."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
            for name, content, mode in sorted(self.files):
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(content), mode, 0
                t.addfile(info, io.BytesIO(content))
        return buf.getvalue()

    def write(self, directory: Path) -> list[Path]:
        out = []
        for name, content, mode in self.files:
            p = directory / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(content)
            p.chmod(mode)
            out.append(p)
        return out


def split_digest(ref: str) -> tuple[str, str | None]:
    name, _, digest = ref.partition("@")
    return name, digest or None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def base_pin(loaded: Loaded, pins: dict[str, str]) -> str | None:
    base = loaded.recipe.patches.base or ""
    from inkctl.recipe.lockfile import base_key

    return split_digest(base)[1] or pins.get(base_key(base))


def planned_patches(loaded: Loaded, pins: dict[str, str]) -> list[PlannedPatch]:
    """Each file patch with its effective hashes: the recipe's, else the lock's."""
    out = []
    for i, f in enumerate(loaded.recipe.patches.files):
        def pin(key: str, side: str, declared: str | None) -> str | None:
            return declared or pins.get(f"{key}:{side}")

        content = None
        source = getattr(f, "source", None)  # an edit has no file of its own
        if source:
            src = loaded.patch_dir / source
            content = src.read_bytes() if src.is_file() else None
        key = f"patch:{i}"
        if f.kind == "diff":
            targets = tuple(Target(f"{key}:{j}", t.path, pin(f"{key}:{j}", "before", t.sha256_before),
                                   pin(f"{key}:{j}", "after", t.sha256_after)) for j, t in enumerate(f.files))
            out.append(PlannedPatch(i, "diff", targets, f.source, content, root=f.root))
            continue
        after = pin(key, "after", f.sha256_after)
        if f.kind == "replace" and after is None and content is not None:
            after = _sha(content)  # a replaced file hashes to its replacement
        target = Target(key, f.path or "", pin(key, "before", f.sha256_before), after)
        edits = tuple((e.old, e.new) for e in f.edits) if f.kind == "edit" else ()
        out.append(PlannedPatch(i, f.kind, (target,), getattr(f, "source", None), content, edits))
    return out


def _identity(loaded: Loaded, patches: list[PlannedPatch], pin: str | None) -> dict:
    return {
        "format": FORMAT,
        "base": loaded.recipe.patches.base,
        "base_pin": pin,
        "patches": [{
            "kind": p.kind, "root": p.root,
            "targets": [[t.path, t.before, t.after] for t in p.targets],
            "content": _sha(p.content) if p.content is not None else None,
            "edits": [list(e) for e in p.edits],
        } for p in patches],
    }


def content_hash(loaded: Loaded, pins: dict[str, str] | None = None) -> str:
    pins = read_pins(loaded) if pins is None else pins
    ident = _identity(loaded, planned_patches(loaded, pins), base_pin(loaded, pins))
    return _sha(json.dumps(ident, sort_keys=True, separators=(",", ":")).encode())


def image_tag(loaded: Loaded, pins: dict[str, str] | None = None) -> str:
    """The content-addressed tag of the recipe's built image (never fails: unpinned parts hash as null)."""
    return f"{repository(loaded.recipe.engine.image.ref)}:{TAG_PREFIX}{content_hash(loaded, pins)[:12]}"


def build_context(loaded: Loaded, pins: dict[str, str] | None = None) -> BuildContext:
    """The context to build; raises when anything is unpinned, missing or inconsistent."""
    r = loaded.recipe
    pins = read_pins(loaded) if pins is None else pins
    if r.patches.mode != "build":
        raise InkctlError(f"{loaded.path}: patches.mode is {r.patches.mode!r}: there is nothing to build",
                          hint="set patches.mode: build with a base and files", exit_code=2)
    patches = planned_patches(loaded, pins)
    pin = base_pin(loaded, pins)
    _require_complete(loaded, patches)
    chash = content_hash(loaded, pins)
    tag = f"{repository(r.engine.image.ref)}:{TAG_PREFIX}{chash[:12]}"
    base = r.patches.base or ""
    labels = (
        ("inkctl.recipe", r.name),
        ("inkctl.base", base if split_digest(base)[1] or not pin else f"{base}@{pin}"),
        ("inkctl.patches", json.dumps([[t.path, t.before, t.after] for p in patches for t in p.targets], separators=(",", ":"))),
        ("inkctl.content", chash),
    )
    files: list[tuple[str, bytes, int]] = [
        ("inkctl/verify.sh", VERIFY_SH.encode(), 0o755),
        ("inkctl/patch_apply.py", applier_source(), 0o644),
    ]
    for p in patches:
        if p.kind == "replace":
            files.append((f"patches/{p.index}/replacement", p.content or b"", 0o644))
        elif p.kind == "edit":
            doc = json.dumps([{"old": o, "new": n} for o, n in p.edits], indent=1, ensure_ascii=False) + "\n"
            files.append((f"patches/{p.index}/edits.json", doc.encode(), 0o644))
        else:
            files.append((f"patches/{p.index}/patch.diff", p.content or b"", 0o644))
    files.insert(0, ("Dockerfile", dockerfile(loaded, patches, pin, labels).encode(), 0o644))
    return BuildContext(r.name, tag, chash, base, pin, tuple(files), labels)


def dockerfile(loaded: Loaded, patches: list[PlannedPatch], pin: str | None, labels) -> str:
    r = loaded.recipe
    base = r.patches.base or ""
    if split_digest(base)[1]:
        how = "pinned by digest in the recipe"
    elif pin:
        how = f"pinned by {lock_name(loaded)}: {pin}"
    else:
        how = "NOT pinned: run `inkctl lock` to pin it"
    lines = [
        f"# Generated by `inkctl build` for recipe {r.name}: review it, do not edit it.",
        f"# Base: {how}. inkctl passes INKCTL_BASE as the image found on the host after checking",
        "# it against that pin, so nothing is pulled during the build.",
        f"ARG INKCTL_BASE={base}",
        "FROM ${INKCTL_BASE}",
        "ARG INKCTL_USER=0",
        "USER 0",
        f"COPY inkctl/ {WORKDIR}/",
    ]
    verify = f"{WORKDIR}/verify.sh"
    for p in patches:
        src = f" ({p.source})" if p.source else ""
        t = p.targets[0]
        if p.kind == "replace":
            lines.append(f"# patch {p.index}: replace {t.path} with {p.source}")
            argv = [verify, str(p.index), "replace", t.path, t.before, t.after, f"{WORKDIR}/{p.index}/replacement"]
        elif p.kind == "edit":
            lines.append(f"# patch {p.index}: {len(p.edits)} exact-text edit(s) of {t.path}")
            argv = [verify, str(p.index), "edit", t.path, t.before, t.after, f"{WORKDIR}/{p.index}/edits.json"]
        else:
            lines.append(f"# patch {p.index}: unified diff{src} under {p.root}: " + ", ".join(x.path for x in p.targets))
            argv = [verify, str(p.index), "diff", p.root, f"{WORKDIR}/{p.index}/patch.diff"]
            for x in p.targets:
                argv += [x.path, x.before, x.after]
        lines.append(f"COPY patches/{p.index}/ {WORKDIR}/{p.index}/")
        lines.append("RUN " + json.dumps(["/bin/sh", *argv]))
    lines.append("RUN " + json.dumps(["rm", "-rf", WORKDIR]))
    lines.append("USER ${INKCTL_USER}")
    lines.append("LABEL " + " ".join(f"{k}={json.dumps(v)}" for k, v in labels))
    return "\n".join(lines) + "\n"


def lock_name(loaded: Loaded) -> str:
    return loaded.path.stem + ".lock.json"


def _require_complete(loaded: Loaded, patches: list[PlannedPatch]) -> None:
    """Everything a trustworthy build needs: files present, every hash pinned, diffs consistent."""
    from inkctl.plan.image.patch_apply import PatchError, diff_targets

    missing, unpinned = [], []
    for p in patches:
        where = f"patches.files[{p.index}]"
        if p.source is not None and p.content is None:
            missing.append(f"{where}.source: {loaded.patch_dir / p.source} is not there")
        if p.kind != "diff" and not p.targets[0].path:
            missing.append(f"{where}.path: the file's path inside the image is not known")
        for t in p.targets:
            for side in ("before", "after"):
                if getattr(t, side) is None:
                    unpinned.append(f"{t.key}:{side} ({t.path or '?'})")
        if p.kind == "replace" and p.content is not None and p.targets[0].after not in (None, _sha(p.content)):
            raise InkctlError(f"{where}: {loaded.patch_dir / (p.source or '')} has sha256 {_sha(p.content)}, but sha256_after pins {p.targets[0].after}",
                              hint="the replacement file changed: restore it, or update the pin", exit_code=2)
        if p.kind == "diff" and p.content is not None:
            try:
                changed = diff_targets(p.content, p.root)
            except PatchError as e:
                raise InkctlError(f"{where}.source: {p.source}: {e}", exit_code=2) from None
            listed = [t.path for t in p.targets]
            if sorted(changed) != sorted(listed):
                raise InkctlError(f"{where}: {p.source} changes {', '.join(changed)}, but files lists {', '.join(listed)}",
                                  hint="list every file the diff touches, each with its hashes", exit_code=2)
    if missing:
        raise InkctlError("cannot build: " + "; ".join(missing), hint="put the files in place and set the paths", exit_code=2)
    if unpinned:
        raise InkctlError("cannot build: not pinned: " + ", ".join(unpinned),
                          hint=f"run {lock_command(loaded.path)} to pin what the base image has (trust on first use), "
                               "or set the sha256 in the recipe", exit_code=2)
