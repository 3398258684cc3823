"""Local inputs a plan depends on besides the recipe: patch files on disk and lock-file pins.

Reading local files is loading input, not touching hosts: the plan stays a pure function of
(recipe, hosts, these inputs).
"""

from __future__ import annotations

import hashlib

from inkctl.bundled import lock_command
from inkctl.recipe.reading.source import Loaded


def hotfix_inputs(loaded: Loaded) -> tuple[dict[str, str], dict[str, bytes]]:
    """Hotfix name -> pinned sha256 (recipe first, then lock file) and -> file bytes (if present)."""
    pins: dict[str, str] = {}
    files: dict[str, bytes] = {}
    from inkctl.recipe.lockfile import read_pins

    lock = read_pins(loaded)
    for h in loaded.recipe.patches.hotfixes:
        path = loaded.patch_dir / h.source
        if path.is_file():
            files[h.name] = path.read_bytes()
        pin = h.sha256 or lock.get(f"hotfix:{h.name}")
        if pin:
            pins[h.name] = pin
    return pins, files


def built_image(loaded: Loaded) -> str | None:
    if loaded.recipe.patches.mode != "build":
        return None
    from inkctl.plan.image.build import image_tag

    return image_tag(loaded)


def weights_pinned(loaded: Loaded) -> bool:
    """The lock file pins the model's files and inkctl manages them on the hosts."""
    from inkctl.errors import InkctlError
    from inkctl.recipe.manifest import managed, read_manifest

    if not managed(loaded.recipe):
        return False
    try:
        return read_manifest(loaded) is not None
    except InkctlError:
        return False


def plan_inputs(loaded: Loaded) -> dict:
    pins, files = hotfix_inputs(loaded)
    return {"image": built_image(loaded), "hotfix_pins": pins, "hotfix_files": files,
            "weights_pinned": weights_pinned(loaded)}


def require_trusted(loaded: Loaded, *, patches: bool = True) -> None:
    """What ``up`` (and ``build``) refuse before starting anything: a lock that disagrees with
    the files here, hotfixes that are missing, unpinned or not what their pin says, and (mode
    ``build``) patch files that are missing, unpinned or not what their pins say.
    (The at-start wrapper and the build's verify steps refuse the same on the host; this says it
    before any host is touched: no connection, no deploy lock.) ``patches=False``: not the patch
    files (``export k8s`` runs an image pushed earlier, not one built from them now)."""
    from inkctl.errors import InkctlError
    from inkctl.recipe.lockfile import require_no_drift

    require_no_drift(loaded)
    if patches and loaded.recipe.patches.mode == "build":
        from inkctl.plan.image.build import build_context

        build_context(loaded)  # pure: raises naming the file and both hashes
    pins, files = hotfix_inputs(loaded)
    bad = []
    for h in loaded.recipe.patches.hotfixes if loaded.recipe.patches.mode == "at_start" else ():
        if h.name not in files:
            bad.append(f"{h.name}: {loaded.patch_dir / h.source} is missing")
        elif h.name not in pins:
            bad.append(f"{h.name}: not pinned (no sha256 in the recipe or the lock file)")
        elif sha256_hex(files[h.name]) != pins[h.name]:
            bad.append(f"{h.name}: sha256 is {sha256_hex(files[h.name])}, but the recipe pins {pins[h.name]}")
    if bad:
        raise InkctlError("refusing to start: " + "; ".join(bad), exit_code=2,
                          hint=f"put the hotfix files in place and pin them: {lock_command(loaded.path)} (trust on first use) or sha256: in the recipe")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
