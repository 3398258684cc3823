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
    proofs: list[dict] = field(default_factory=list)  # the engine's verdicts on each rank's argv, pinned


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
    pins, per_host, proofs = _observed(loaded, local, accept_new, observe)
    if model is not None:
        pins[f"model:{model.repo}"] = model.revision
    if draft is not None:
        pins[f"model:{draft.repo}"] = draft.revision
    with editing(loaded):  # `build --push` and `cache --lock` pins are not observed here: kept as the file has them now
        pins.update({k: v for k, v in read_pins(loaded).items() if k.startswith(("push:", "compile-cache:"))})
        path = write_lock(loaded, pins, per_host, model=model.as_dict() if model else None,
                          models={"draft": draft.as_dict()} if draft else None, proofs=proofs)
    return Locked(path, pins, changes(old, pins) if old else [], first=not old, proofs=list(proofs.values()))


def _observed(loaded, local: bool, accept_new: bool, observe):
    """(pins, per host) of the images, read on every host (or the local daemon)."""
    from inkctl.execute.hosts.connect import close_all

    transports: dict = {}
    plan = None
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
        pins, per_host = observe(loaded, stores)
        proofs = _proofs(loaded, plan, transports, per_host) if not local else {}
        return pins, per_host, proofs
    finally:
        close_all(transports)


def _proofs(loaded, plan, transports, per_host: dict[str, dict]) -> dict[str, dict]:
    """The engine's own word on every rank's argv in the image each host has, pinned with it:
    a refusal stops the lock (the recipe would not start), an unchecked argv is recorded as such."""
    from inkctl.errors import InkctlError
    from inkctl.execute.deploy.proof import prove_host
    from inkctl.execute.hosts.fanout import each

    from inkctl.execute.deploy.preflight import host_image

    ref = host_image(loaded.recipe, plan)

    def one(host: str):
        image = per_host.get(host, {}).get("images", {}).get(ref) or {}
        if not image.get("id"):
            return None
        return prove_host(loaded.recipe, plan, host, transports[host], image["id"], {})

    found = [f for f in each(one, [h.name for h in plan.hosts], name="proof") if f is not None]
    refused = [f for f in found if f.status == "fail"]
    if refused:
        f = refused[0]
        raise InkctlError(f"{f.verdicts[0].host}: {f.detail}", hint=f.hint, exit_code=1)
    return {v.key: v.record() for f in found for v in f.verdicts if v.key and v.verdict != "unchecked"}
