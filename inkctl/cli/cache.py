"""``cache``: the engines' compile caches on the hosts (``compile_cache`` in the recipe).
Thin: load -> plan (where each host keeps this recipe's cache) -> execute.cachesync (read,
hash, pin) and weights.cachecopy (host to host, on the weights' relay) -> print."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import AcceptOpt, HostsOpt, OutputOpt, RecipeArg, SetOpt, load_target, output_format
from inkctl.errors import InkctlError, UsageError


def cache_dirs(plan) -> dict[str, str]:
    """Host -> its cache directory for this recipe, as the plan makes it (the compile-cache stage)."""
    for st in plan.stages:
        if st.name == "compile-cache":
            return {s.host: s.argv[-1] for s in st.steps}
    return {}


@app.command()
def cache(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    from_: Optional[str] = typer.Option(None, "--from", help="Host whose cache the others get (default: the one holding the pinned cache, else the one with the most files)."),
    verify: bool = typer.Option(False, "--verify", help="Hash every host's cache and hold it against the lock file's pin; change nothing."),
    lock: bool = typer.Option(False, "--lock", help="Pin the source host's cache (sha256 of its file manifest) in RECIPE.lock.json."),
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
) -> None:
    """Copy the recipe's compile cache (torch.compile, Triton, FlashInfer/DeepGEMM JIT) from one
    host to the others of the same GPU architecture, host to host over the cluster network
    (hashed as it arrives), pin it by hash (--lock), or check it (--verify). A warm cache turns
    the next boot's compile phase into a load."""
    fmt = output_format(output)
    if verify and lock:
        raise UsageError("--verify changes nothing and --lock pins: run them one after the other")
    loaded, plan, image = load_target(recipe, hosts, set_, "cache")
    if not loaded.recipe.compile_cache.enabled:
        raise UsageError("compile_cache.enabled is false in the recipe: there is no cache to manage",
                         hint="set compile_cache: {enabled: true} (and its path) in the recipe")
    dirs = cache_dirs(plan)
    names = list(dirs)
    if from_ is not None and from_ not in names:
        raise UsageError(f"--from {from_}: not a host of the inventory ({', '.join(names)})")
    from inkctl.execute.deploy import cachesync
    from inkctl.execute.hosts.connect import close_all, connect_all
    from inkctl.recipe.lockfile import read_lock

    key = Path(next(iter(dirs.values()))).name
    pin_key = cachesync.PIN_PREFIX + key
    doc = read_lock(loaded)
    pin = (doc or {}).get("pins", {}).get(pin_key)
    transports = connect_all(list(loaded.hosts), accept_new=accept_new_host_keys)
    try:
        states = cachesync.scan(transports, dirs)
        broken = {h: s.error for h, s in states.items() if s.error}
        if broken:
            raise InkctlError("could not read the compile cache on " + "; ".join(f"{h}: {e}" for h, e in broken.items()))
        if verify:
            _verify(states, pin, pin_key, fmt, loaded)
            return
        source = _source(states, from_, pin)
        if lock:
            _lock(loaded, doc, pin_key, source, fmt)
            return
        from inkctl.weights.cachecopy import site_maker

        _copy(transports, states, source, pin, fmt, site_maker(loaded, plan, image, transports))
    finally:
        close_all(transports)


def _source(states, from_, pin):
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


def _lock(loaded, doc, pin_key, source, fmt) -> None:
    from inkctl.files import replace_text
    from inkctl.recipe.lockfile import FORMAT, HEADER, editing, lock_path, read_lock, render

    with editing(loaded):  # read again under the lock: a pin written meanwhile by another command stays
        doc = read_lock(loaded) or {"//": HEADER, "format": FORMAT, "recipe": loaded.recipe.name,
                                    "recipe_file": loaded.path.name, "pins": {}, "hosts": {}}
        old = doc["pins"].get(pin_key)
        doc["pins"][pin_key] = source.digest
        doc["pins"] = dict(sorted(doc["pins"].items()))
        path = lock_path(loaded)
        replace_text(path, render(doc))
    if fmt == "json":
        print(json.dumps({"lock": str(path), "pin": pin_key, "sha256": source.digest, "from": source.host,
                          "files": len(source.files), "previous": old}, indent=2))
        return
    print(f"pinned {pin_key} = {source.digest[:16]}... ({len(source.files)} files on {source.host}) in {path}")


def _verify(states, pin, pin_key, fmt, loaded) -> None:
    good = next((s for s in states.values() if pin and s.digest == pin), None)
    rows, bad = [], []
    for s in states.values():
        if not s.present or not s.files:
            status, detail = "absent", f"no cache at {s.dir} (the next boot there compiles)"
        elif pin is None:
            status, detail = "unpinned", f"{len(s.files)} files, sha256 {s.digest[:16]}"
        elif s.digest == pin:
            status, detail = "ok", f"{len(s.files)} files match the pin"
        else:
            from inkctl.execute.deploy.cachesync import differing

            diff = differing(good.files, s.files) if good is not None else []
            status = "corrupt"
            detail = f"sha256 {(s.digest or '')[:16]} is not the pinned {pin[:16]}"
            if good is not None and diff:
                detail += (f"; differs from {good.host} in {len(diff)} file(s): " + ", ".join(diff[:4])
                           + (" ..." if len(diff) > 4 else ""))
            bad.append(s.host)
        rows.append({"host": s.host, "dir": s.dir, "status": status, "detail": detail, "arch": s.arch,
                     "sha256": s.digest})
    if fmt == "json":
        print(json.dumps({"pin": pin_key, "sha256": pin, "hosts": rows}, indent=2))
    else:
        for r in rows:
            print(f"{r['host']}: {r['status']}: {r['detail']}")
    if bad:
        raise InkctlError(f"compile cache corrupt on {', '.join(bad)}: it does not match {pin_key} in the lock file",
                          hint=f"copy a good one over it: inkctl cache {loaded.path} --hosts FILE"
                               + (f" --from {good.host}" if good is not None else ""))


def _copy(transports, states, source, pin, fmt, site_for) -> None:
    """Without a pin: every host of the source's GPU architecture gets the union of their caches
    (each boot leaves its own ranks' artefacts). With one: hosts not holding it get the pinned one.
    Host to host over the cluster network (``weights.cachecopy``), hashed as it arrives."""
    import threading

    from inkctl.api.signals import on_signals, restore
    from inkctl.weights import cachecopy

    rows: dict[str, tuple[str, str]] = {}
    same = [s for s in states.values() if s.arch == source.arch]
    for s in states.values():
        if s.arch != source.arch:
            rows[s.host] = ("skipped", f"GPU arch {s.arch}, {source.host}'s is {source.arch}: compiled kernels "
                                       "do not carry over")
    if pin and source.digest != pin:
        raise InkctlError(f"{source.host}'s compile cache does not match the pin in the lock file "
                          f"({source.digest[:16]} vs {pin[:16]}): not copying it",
                          hint="choose another host with --from, or re-pin on purpose with --lock")
    before = {s.host: s.digest for s in same}
    interrupt = threading.Event()
    previous = on_signals(interrupt, KeyboardInterrupt)
    try:
        done = cachecopy.copy(transports, states, source, [s for s in same if s is not source], union=not pin,
                              site_for=site_for, interrupt=interrupt)
    finally:
        restore(previous)
    for s in same:
        got, net = done.received.get(s.host, 0), done.relayed.get(s.host, 0)
        if s.host in done.failed:
            rows[s.host] = ("failed", done.failed[s.host])
        elif pin:
            rows[s.host] = (("copied", f"the pinned cache from {source.host} ({done.files} files), {net} host "
                                       "to host") if before[s.host] != pin else ("ok", "holds the pinned cache"))
        else:
            rows[s.host] = ("copied", f"{got} of {done.files} files ({net} host to host)") if got else \
                ("ok", f"has all {done.files} files")
    out = [(h, *rows[h]) for h in states]
    if fmt == "json":
        print(json.dumps({"source": source.host, "files": done.files, "seconds": round(done.seconds, 3),
                          "hosts": [{"host": h, "status": st, "detail": d, "bytes": done.moved.get(h, 0)}
                                    for h, st, d in out]}, indent=2))
    else:
        for h, st, d in out:
            print(f"{h}: {st}: {d}")
    if done.failed:
        raise InkctlError("the copy failed on " + ", ".join(done.failed),
                          hint="fix what is named and run it again: only what is missing or wrong moves")
