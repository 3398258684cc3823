"""``cache`` below the command line: the engines' compile caches on the hosts. Load, plan (where
each host keeps this recipe's cache), read and hash every host's cache
(``execute.deploy.cachesync``), then check it against the lock file's pin (``Verified``), pin
the source host's (``Pinned``) or copy it host to host on the weights' relay
(``weights.cachecopy``: ``Copied``). What failed on a host is in the result (``failure()``);
what cannot start is raised."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inkctl.api.target import Target, load_target
from inkctl.errors import InkctlError, UsageError

if TYPE_CHECKING:
    from inkctl.execute.deploy.cachesync import HostCache
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded


@dataclass(frozen=True)
class CacheOptions:
    source: str | None = None  # --from: the host whose cache the others get
    verify: bool = False  # hash every host's cache against the pin; change nothing
    lock: bool = False  # pin the source host's cache in the lock file
    accept_new: bool = False


@dataclass
class Verified:
    """``--verify``: each host's cache held against the pin (``rows``: host, dir, status, detail,
    arch, sha256)."""

    pin_key: str
    pin: str | None
    rows: list[dict[str, Any]]
    bad: list[str]  # hosts whose cache does not match the pin
    good: str | None  # a host that holds the pinned cache
    recipe: Path

    def failure(self) -> InkctlError | None:
        if not self.bad:
            return None
        return InkctlError(f"compile cache corrupt on {', '.join(self.bad)}: it does not match {self.pin_key} in the lock file",
                           hint=f"copy a good one over it: inkctl cache {self.recipe} --hosts FILE"
                                + (f" --from {self.good}" if self.good is not None else ""))


@dataclass
class Pinned:
    """``--lock``: the source host's cache pinned in the lock file."""

    path: Path  # the lock file
    pin_key: str
    sha256: str
    host: str
    files: int
    previous: str | None


@dataclass
class Copied:
    """The cache copied host to host (``hosts``: host, status, detail, bytes)."""

    source: str
    files: int
    seconds: float
    hosts: list[dict[str, Any]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def failure(self) -> InkctlError | None:
        if not self.failed:
            return None
        return InkctlError("the copy failed on " + ", ".join(self.failed),
                           hint="fix what is named and run it again: only what is missing or wrong moves")


def cache_dirs(plan: Plan) -> dict[str, str]:
    """Host -> its cache directory for this recipe, as the plan makes it (the compile-cache stage)."""
    from inkctl.plan.step import Run

    for st in plan.stages:
        if st.name == "compile-cache":
            return {s.host: s.argv[-1] for s in st.steps if isinstance(s, Run)}  # mkdir -p -- DIR
    return {}


def cache(target: Target, options: CacheOptions, *, cancel: Any = None) -> Verified | Pinned | Copied:
    """Verify, pin or copy the recipe's compile cache, as ``options`` say; ``cancel`` (a
    ``threading.Event``) set stops a copy."""
    from inkctl.execute.deploy import cachesync
    from inkctl.execute.hosts.connect import close_all, connect_all
    from inkctl.recipe.lockfile import read_lock

    loaded, plan, image = load_target(target, "cache")
    if not loaded.recipe.compile_cache.enabled:
        raise UsageError("compile_cache.enabled is false in the recipe: there is no cache to manage",
                         hint="set compile_cache: {enabled: true} (and its path) in the recipe")
    dirs = cache_dirs(plan)
    names = list(dirs)
    if options.source is not None and options.source not in names:
        raise UsageError(f"--from {options.source}: not a host of the inventory ({', '.join(names)})")
    pin_key = cachesync.PIN_PREFIX + Path(next(iter(dirs.values()))).name
    pin = (read_lock(loaded) or {}).get("pins", {}).get(pin_key)
    assert loaded.hosts is not None  # load_target
    transports = connect_all(list(loaded.hosts), accept_new=options.accept_new)
    try:
        states = cachesync.scan(transports, dirs)
        broken = {h: s.error for h, s in states.items() if s.error}
        if broken:
            raise InkctlError("could not read the compile cache on " + "; ".join(f"{h}: {e}" for h, e in broken.items()))
        if options.verify:
            return verify(states, pin, pin_key, loaded)
        source = _source(states, options.source, pin)
        if options.lock:
            return pin_cache(loaded, pin_key, source)
        from inkctl.weights.cachecopy import site_maker

        return copy(transports, states, source, pin, site_maker(loaded, plan, image, transports), cancel)
    finally:
        close_all(transports)


def _source(states: dict[str, HostCache], from_: str | None, pin: str | None) -> HostCache:
    if from_ is not None:
        src = states[from_]
        if not src.present or not src.files:
            raise InkctlError(f"--from {from_}: it has no compile cache at {src.dir}",
                              hint="boot the recipe there once (inkctl up) to build it")
        return src
    full = [s for s in states.values() if s.present and s.files]
    if not full:
        raise InkctlError("no host has this recipe's compile cache yet: " + ", ".join(f"{s.host} ({s.dir})" for s in states.values()),
                          hint="boot the recipe once (inkctl up): the first boot compiles and fills it")
    pinned = [s for s in full if pin and s.digest == pin]
    return pinned[0] if pinned else max(full, key=lambda s: len(s.files))


def pin_cache(loaded: Loaded, pin_key: str, source: Any) -> Pinned:
    """``source``'s digest pinned as ``pin_key`` in the lock file, read and written under the
    lock file's lock: a pin written meanwhile by another command stays."""
    from inkctl.files import replace_text
    from inkctl.recipe.lockfile import FORMAT, HEADER, editing, lock_path, read_lock, render

    with editing(loaded):
        doc = read_lock(loaded) or {"//": HEADER, "format": FORMAT, "recipe": loaded.recipe.name,
                                    "recipe_file": loaded.path.name, "pins": {}, "hosts": {}}
        old = doc["pins"].get(pin_key)
        doc["pins"][pin_key] = source.digest
        doc["pins"] = dict(sorted(doc["pins"].items()))
        path = lock_path(loaded)
        replace_text(path, render(doc))
    return Pinned(path, pin_key, source.digest, source.host, len(source.files), old)


def verify(states: dict[str, HostCache], pin: str | None, pin_key: str, loaded: Loaded) -> Verified:
    good = next((s for s in states.values() if pin and s.digest == pin), None)
    rows, bad = [], []
    for s in states.values():
        status, detail = _verdict(s, pin, good)
        if status == "corrupt":
            bad.append(s.host)
        rows.append({"host": s.host, "dir": s.dir, "status": status, "detail": detail, "arch": s.arch,
                     "sha256": s.digest})
    return Verified(pin_key, pin, rows, bad, good.host if good is not None else None, loaded.path)


def _verdict(s: HostCache, pin: str | None, good: HostCache | None) -> tuple[str, str]:
    if not s.present or not s.files:
        return "absent", f"no cache at {s.dir} (the next boot there compiles)"
    if pin is None:
        return "unpinned", f"{len(s.files)} files, sha256 {(s.digest or '')[:16]}"
    if s.digest == pin:
        return "ok", f"{len(s.files)} files match the pin"
    from inkctl.execute.deploy.cachesync import differing

    diff = differing(good.files, s.files) if good is not None else []
    detail = f"sha256 {(s.digest or '')[:16]} is not the pinned {pin[:16]}"
    if good is not None and diff:
        detail += (f"; differs from {good.host} in {len(diff)} file(s): " + ", ".join(diff[:4])
                   + (" ..." if len(diff) > 4 else ""))
    return "corrupt", detail


def copy(transports: dict, states: dict[str, HostCache], source: HostCache, pin: str | None, site_for: Any,
         cancel: Any = None) -> Copied:
    """Without a pin: every host of the source's GPU architecture gets the union of their caches
    (each boot leaves its own ranks' artefacts). With one: hosts not holding it get the pinned one.
    Host to host over the cluster network (``weights.cachecopy``), hashed as it arrives; Ctrl-C
    stops it (set by Ctrl-C on the command line)."""
    import threading

    from inkctl.weights import cachecopy

    rows: dict[str, tuple[str, str]] = {}
    same = [s for s in states.values() if s.arch == source.arch]
    for s in states.values():
        if s.arch != source.arch:
            rows[s.host] = ("skipped", f"GPU arch {s.arch}, {source.host}'s is {source.arch}: compiled kernels "
                                       "do not carry over")
    if pin and source.digest != pin:
        raise InkctlError(f"{source.host}'s compile cache does not match the pin in the lock file "
                          f"({(source.digest or '')[:16]} vs {pin[:16]}): not copying it",
                          hint="choose another host with --from, or re-pin on purpose with --lock")
    before = {s.host: s.digest for s in same}
    done = cachecopy.copy(transports, states, source, [s for s in same if s is not source], union=not pin,
                          site_for=site_for, interrupt=cancel or threading.Event())
    for s in same:
        rows[s.host] = _copied(s.host, done, source.host, pin, before[s.host])
    return Copied(source.host, done.files, done.seconds,
                  [{"host": h, "status": rows[h][0], "detail": rows[h][1], "bytes": done.moved.get(h, 0)} for h in states],
                  list(done.failed))


def _copied(host: str, done: Any, source: str, pin: str | None, before: str | None) -> tuple[str, str]:
    got, net = done.received.get(host, 0), done.relayed.get(host, 0)
    if host in done.failed:
        return "failed", done.failed[host]
    if pin:
        return (("copied", f"the pinned cache from {source} ({done.files} files), {net} host "
                           "to host") if before != pin else ("ok", "holds the pinned cache"))
    return ("copied", f"{got} of {done.files} files ({net} host to host)") if got else \
        ("ok", f"has all {done.files} files")
