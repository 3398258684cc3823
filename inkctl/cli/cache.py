"""``cache``: the engines' compile caches on the hosts (``compile_cache`` in the recipe).
Thin: flags -> ``inkctl.api.cache`` (load, plan, read and hash every host's cache, verify, pin
or copy it host to host) -> print what it found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import AcceptOpt, HostsOpt, OutputOpt, RecipeArg, SetOpt, output_format
from inkctl.errors import UsageError


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
    from inkctl.api import cache as api
    from inkctl.api.target import Target

    from inkctl.cli.common.signals import cancel_token

    with cancel_token() as cancel:
        done = api.cache(Target.of(recipe, hosts, set_),
                         api.CacheOptions(source=from_, verify=verify, lock=lock, accept_new=accept_new_host_keys),
                         cancel=cancel)
    if isinstance(done, api.Pinned):
        _pinned(done, fmt)
        return
    if isinstance(done, api.Verified):
        _verified(done, fmt)
    else:
        _copied(done, fmt)
    failure = done.failure()
    if failure is not None:
        raise failure


def _pinned(done, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps({"lock": str(done.path), "pin": done.pin_key, "sha256": done.sha256, "from": done.host,
                          "files": done.files, "previous": done.previous}, indent=2))
        return
    print(f"pinned {done.pin_key} = {done.sha256[:16]}... ({done.files} files on {done.host}) in {done.path}")


def _verified(done, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps({"pin": done.pin_key, "sha256": done.pin, "hosts": done.rows}, indent=2))
        return
    for r in done.rows:
        print(f"{r['host']}: {r['status']}: {r['detail']}")


def _copied(done, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps({"source": done.source, "files": done.files, "seconds": round(done.seconds, 3),
                          "hosts": done.hosts}, indent=2))
        return
    for r in done.hosts:
        print(f"{r['host']}: {r['status']}: {r['detail']}")
