"""``lock`` below the command line: every sha256 the recipe trusts (hotfixes, patch files,
images, in-image originals, the model's revision and files) observed and pinned in
RECIPE.lock.json. The Hub first (a refused token fails before any host is touched), then the
hosts' (or the local daemon's) images (``execute.image.pinning``), then the file, written under
its lock."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from inkctl.api.target import Target, load
from inkctl.errors import UsageError


@dataclass
class Locked:
    path: Path  # the lock file written
    pins: dict[str, str]
    changed: list[str] = field(default_factory=list)  # what differs from the file before
    first: bool = True  # there was no lock file (or no pin in it) before


def lock(target: Target, *, local: bool = False, accept_new: bool = False) -> Locked:
    from inkctl.bundled import installed_copy, lock_command
    from inkctl.execute.image.pinning import changes, observe
    from inkctl.recipe.lockfile import editing, read_pins, write_lock
    from inkctl.weights.pin import pin_draft, pin_model

    loaded = load(target, "lock", need_hosts=False)
    if installed_copy(loaded.path):
        raise UsageError(f"{loaded.path.stem} is a recipe installed with inkctl: its lock file would go inside the "
                         "installation", hint=f"run {lock_command(loaded.path)}")
    if not local and loaded.hosts is None:  # the arguments first, then the Hub, then the hosts
        raise UsageError("lock needs hosts: pass --hosts FILE, list hosts: in the recipe, or use --local")
    old = read_pins(loaded)
    model = pin_model(loaded)  # the Hub first: a refused token fails before any host is touched
    draft = pin_draft(loaded)
    pins, per_host = _observed(loaded, local, accept_new, observe)
    if model is not None:
        pins[f"model:{model.repo}"] = model.revision
    if draft is not None:
        pins[f"model:{draft.repo}"] = draft.revision
    with editing(loaded):  # `build --push` and `cache --lock` pins are not observed here: kept as the file has them now
        pins.update({k: v for k, v in read_pins(loaded).items() if k.startswith(("push:", "compile-cache:"))})
        path = write_lock(loaded, pins, per_host, model=model.as_dict() if model else None,
                          models={"draft": draft.as_dict()} if draft else None)
    return Locked(path, pins, changes(old, pins) if old else [], first=not old)


def _observed(loaded, local: bool, accept_new: bool, observe):
    """(pins, per host) of the images, read on every host (or the local daemon)."""
    from inkctl.execute.hosts.connect import close_all

    transports: dict = {}
    if local:
        from inkctl.execute.image.local_daemon import LocalDaemon

        stores: dict[str, object] = {"local": LocalDaemon()}  # HostImages or LocalDaemon (pinning.observe)
    else:
        from inkctl.execute.hosts.connect import connect_all
        from inkctl.execute.state.images import HostImages
        from inkctl.plan.deploy import build_plan

        hosts_in_use = loaded.hosts or []  # checked above, before the Hub
        plan = build_plan(loaded.recipe, hosts_in_use)
        transports = connect_all(list(hosts_in_use), accept_new=accept_new)
        stores = {h.name: HostImages(transports[h.name], h.runtime) for h in plan.hosts}
    try:
        return observe(loaded, stores)
    finally:
        close_all(transports)
