"""``inkctl build --push REGISTRY``: put the built, content-addressed image in a registry and pin
the digest the registry answered, so that runners that pull (Kubernetes) run exactly it.

The image is pushed from where it was built: the local daemon (``--local``) or the first host.
The pin goes into the lock file as ``push:<tag>`` -> ``REGISTRY/REPO@sha256:...``; ``inkctl export
k8s`` reads it from there.
"""

from __future__ import annotations

import json
import re

from inkctl.errors import InkctlError
from inkctl.execute.hosts.transport import HostError
from inkctl import runtimes
from inkctl.recipe.lockfile import editing, read_lock, write_lock
from inkctl.recipe.reading.source import Loaded

REGISTRY_RE = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$")
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")


def push_key(tag: str) -> str:
    return f"push:{tag}"


def registry_ref(tag: str, registry: str) -> str:
    """``inkctl-fake-engine:inkctl-ab12`` in ``10.0.0.1:5000`` -> ``10.0.0.1:5000/inkctl-fake-engine:inkctl-ab12``."""
    if not REGISTRY_RE.match(registry):
        raise InkctlError(f"--push {registry!r} is not a registry (HOST[:PORT][/PATH])", exit_code=2)
    return f"{registry.rstrip('/')}/{tag}"


def _by_digest(ref: str, repo_digests: list[str]) -> str:
    name = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
    found = [d for d in repo_digests if d.startswith(name + "@") and DIGEST_RE.search(d)]
    if not found:
        raise InkctlError(f"pushed {ref}, but the registry's digest is not among the image's digests {repo_digests}")
    return found[0]


def push_from_host(store, tag: str, registry: str) -> str:
    """Tag and push with the host's runtime; returns REPO@sha256:... as the registry stores it."""
    ref = registry_ref(tag, registry)
    t, rt = store.transport, store.runtime
    for argv, what in ((runtimes.get(rt).tag(tag, ref), "tag"), (runtimes.get(rt).push(ref), "push")):
        res = t.run(argv, timeout=3600)
        if not res.ok:
            raise HostError(t.name, "command", f"{rt} {what} {ref} failed: {(res.err_text() or res.text()).strip()[-400:]}",
                            hint=f"is {registry} reachable from {t.name}, and trusted by its {rt} (an insecure registry needs "
                                 "dockerd's --insecure-registry or registries.conf)?")
    res = t.run(runtimes.get(rt).image_inspect(ref, format="{{json .RepoDigests}}"), timeout=60)
    if not res.ok:
        raise HostError(t.name, "command", f"{rt} image inspect {ref} failed: {res.err_text().strip()}")
    return _by_digest(ref, json.loads(res.text() or "[]") or [])


def push_from_daemon(daemon, tag: str, registry: str) -> str:
    """The same through the local daemon (docker SDK)."""
    ref = registry_ref(tag, registry)
    repo, _, version = ref.rpartition(":")
    api = daemon.client.api
    api.tag(tag, repo, tag=version)
    for item in api.push(repo, tag=version, stream=True, decode=True):
        if "error" in item:
            raise InkctlError(f"docker push {ref} failed: {item['error']}",
                              hint=f"is {registry} reachable from this machine, and trusted by its dockerd?")
    info = daemon.inspect(ref)
    return _by_digest(ref, list(info.repo_digests) if info else [])


def record(loaded: Loaded, tag: str, pushed: str) -> None:
    """Pin the pushed digest in the lock file, keeping every other pin."""
    with editing(loaded):  # another command's pin written meanwhile stays
        doc = read_lock(loaded) or {}
        pins = {str(k): str(v) for k, v in (doc.get("pins") or {}).items()}
        pins[push_key(tag)] = pushed
        write_lock(loaded, pins, doc.get("hosts") or {}, model=doc.get("model"), models=doc.get("models"))
