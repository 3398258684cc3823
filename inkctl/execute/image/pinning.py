"""What ``inkctl lock`` observes: every sha256 the recipe trusts, read where it lives.

Files here (hotfixes, patch sources), images there (per host: image id and repo digests of the
image the plan runs and of the build base), and for build patches the original file inside
the base image, read without running it (create/cp/rm). Every value the recipe already states
(a full sha256 or a prefix a source gave, as in the RTX PRO 6000 registry record) must agree with what is observed, or
nothing is written.
"""

from __future__ import annotations

import hashlib

from inkctl.execute.hosts.fanout import each
from inkctl.errors import InkctlError
from inkctl.execute.state.images import ImageInfo
from inkctl.plan.image.build import ABSENT, image_tag, split_digest
from inkctl.plan.image.patch_apply import PatchError, apply_diff, apply_edits, parse_diff
from inkctl.recipe.lockfile import base_key, declared, local_observations
from inkctl.recipe.patch import DiffPatch, ReplaceFile
from inkctl.recipe.reading.source import Loaded


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


class Refused(InkctlError):
    exit_code = 2


def _each(stores: dict, fn) -> dict:
    return dict(zip(stores, each(fn, stores.values(), name="lock")))


def _common(ref: str, infos: dict[str, ImageInfo], digest: str | None) -> str:
    """One pin for an image across hosts: the recipe's digest (checked), else the image id if
    all hosts agree (the exact image; podman's self-made repo digests of loaded images differ
    from docker's none), else a repo digest all hosts share (one multi-arch image pulled by
    digest, whose per-arch ids differ)."""
    if digest:
        bad = [f"{h} has {i.id}" for h, i in infos.items() if not i.matches(digest)]
        if bad:
            raise Refused(f"{ref}: the recipe pins {digest}, but " + "; ".join(bad),
                          hint="load the pinned image there, or fix the digest in the recipe")
        return digest
    ids = {i.id for i in infos.values()}
    if len(ids) == 1:
        return ids.pop()
    shared = set.intersection(*(i.digests for i in infos.values())) if infos else set()
    if len(shared) == 1:
        return shared.pop()
    raise Refused(f"{ref} differs between hosts: " + ", ".join(f"{h} {i.id}" for h, i in infos.items()),
                  hint="pin it by digest in the recipe (@sha256:...) and put that image on every host")


def _inspect_all(stores: dict, ref: str, required: bool) -> dict[str, ImageInfo]:
    found = _each(stores, lambda s: s.inspect(ref))
    missing = [h for h, i in found.items() if i is None]
    if missing and required:
        raise Refused(f"{ref} is not on {', '.join(missing)}: nothing to observe",
                      hint="pull or load it there first, then run `inkctl lock` again")
    return {h: i for h, i in found.items() if i is not None}


def _check(key: str, observed: str, full: str | None, prefix: str | None, what: str) -> None:
    if full and full != observed:
        raise Refused(f"{key}: {what} has sha256 {observed}, but the recipe pins {full}",
                      hint="the base or the patch is not what the recipe was written for")
    if prefix and not observed.startswith(prefix):
        raise Refused(f"{key}: {what} has sha256 {observed}, which does not start with {prefix} as the recipe pins it",
                      hint="this is not the file the recipe was written against: check the base image and the path")


def _originals(stores: dict, base: dict[str, ImageInfo], paths: list[str]) -> dict[str, bytes | None]:
    """Each path's content in the base on every host; hosts must agree."""
    per_host = _each(stores, lambda s: s.read_files(base[s.host].raw_id, paths))
    out: dict[str, bytes | None] = {}
    for p in paths:
        seen = {h: (None if files[p] is None else _sha(files[p])) for h, files in per_host.items()}
        if len(set(seen.values())) > 1:
            raise Refused(f"{p} differs in the base image between hosts: " + ", ".join(f"{h} {v}" for h, v in seen.items()))
        out[p] = next(iter(per_host.values()))[p]
    return out


def _patch_pins(loaded: Loaded, originals: dict[str, bytes | None]) -> dict[str, str]:
    pins: dict[str, str] = {}
    for i, f in enumerate(loaded.recipe.patches.files):
        key = f"patch:{i}"
        src = loaded.patch_dir / f.source if isinstance(f, (ReplaceFile, DiffPatch)) and f.source else None
        if src is not None and not src.is_file():
            raise Refused(f"patches.files[{i}].source: {src} is missing", hint="put it there, then lock")
        if f.kind == "diff":
            files: dict[str, bytes] = {}
            for j, t in enumerate(f.files):
                data = originals.get(t.path)
                before = ABSENT if data is None else _sha(data)
                _check(f"{key}:{j}:before", before, t.sha256_before, None, f"{t.path} in the base image")
                pins[f"{key}:{j}:before"] = before
                if data is not None:
                    files[t.path] = data
            assert src is not None  # a diff names its file (a required field)
            try:
                apply_diff(f.root, parse_diff(src.read_bytes()), files.__getitem__, files.__setitem__, files.pop)
            except (PatchError, KeyError) as e:
                raise Refused(f"patches.files[{i}]: {f.source} does not apply to the base image: {e}") from None
            for j, t in enumerate(f.files):
                after = _sha(files[t.path]) if t.path in files else ABSENT
                _check(f"{key}:{j}:after", after, t.sha256_after, None, f"{t.path} after the diff")
                pins[f"{key}:{j}:after"] = after
            continue
        if not f.path:
            raise Refused(f"patches.files[{i}].path: unknown; lock cannot read the original", hint="set the path inside the image")
        data = originals.get(f.path)
        if data is None:
            raise Refused(f"patches.files[{i}]: {f.path} is not in the base image {loaded.recipe.patches.base}",
                          hint="check the path inside the image")
        before = _sha(data)
        _check(f"{key}:before", before, f.sha256_before, f.sha256_before_prefix, f"{f.path} in the base image")
        if f.kind == "replace":
            assert src is not None  # a replacement names its file (a required field)
            after = _sha(src.read_bytes())
        else:
            try:
                after = _sha(apply_edits(f.path, data, [(e.old, e.new) for e in f.edits]))
            except PatchError as e:
                raise Refused(f"patches.files[{i}]: {e}") from None
        _check(f"{key}:after", after, f.sha256_after, f.sha256_after_prefix, f"{f.path} after patching")
        pins[f"{key}:before"], pins[f"{key}:after"] = before, after
    return pins


def observe(loaded: Loaded, stores: dict) -> tuple[dict[str, str], dict[str, dict]]:
    """(pins, per-host record) for the lock file. ``stores``: host name -> HostImages or LocalDaemon."""
    r = loaded.recipe
    pins = local_observations(loaded)
    missing = [k for k, v in pins.items() if v == "missing"]
    if missing:
        raise Refused("cannot lock files that are not here: " + ", ".join(missing),
                      hint=f"put them in {loaded.patch_dir}")
    for k, v in declared(loaded).items():
        if k.startswith("hotfix:") and pins.get(k) != v:
            raise Refused(f"{k}: the file has sha256 {pins[k]}, but the recipe pins {v}",
                          hint="restore the hotfix file, or change the pin in the recipe on purpose")
    hosts: dict[str, dict] = {h: {"runtime": s.runtime, "images": {}} for h, s in stores.items()}
    if r.patches.mode == "build":
        base = r.patches.base or ""
        infos = _inspect_all(stores, split_digest(base)[0], required=True)
        pins[base_key(base)] = _common(base, infos, split_digest(base)[1])
        for h, i in infos.items():
            hosts[h]["images"][base] = i.as_lock()
        paths = [t.path for f in r.patches.files for t in (f.files if f.kind == "diff" else [f]) if t.path]
        pins.update(_patch_pins(loaded, _originals(stores, infos, sorted(set(paths)))))
        run_ref, required = image_tag(loaded, pins), False
    else:
        run_ref, required = r.engine.image.ref, True
    infos = _inspect_all(stores, run_ref, required)
    for h, i in infos.items():
        hosts[h]["images"][run_ref] = i.as_lock()
    if not required:
        # A built tag is recorded, not pinned: its content is pinned by the tag itself (the hash
        # of base and patches, checked against the image's inkctl.content label) and verified
        # by the build; a rebuild of the same content gets a new image id, which is not drift.
        return pins, hosts
    for h, i in infos.items():
        pins[f"image:{run_ref}@{h}"] = i.id
    if len(infos) == len(stores):
        try:
            pins[f"image:{run_ref}"] = _common(run_ref, infos, r.engine.image.digest)
        except Refused:
            if r.engine.image.digest:
                raise
    return pins, hosts


def changes(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """What re-locking changes, for the person running it."""
    out = [f"{k}: {old[k]} -> {new[k]}" for k in sorted(new) if k in old and old[k] != new[k]]
    out += [f"{k}: (new) {new[k]}" for k in sorted(new) if k not in old]
    out += [f"{k}: {old[k]} -> (gone)" for k in sorted(old) if k not in new]
    return out

