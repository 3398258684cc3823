"""A gateway file that drops a model and puts another in its place (its GPUs, its port): the
dropped groups' slots freed before the new groups start. ``up`` used to remove a dropped group
only once the new ones were up, so a model put on a dropped one's GPUs and port failed
preflight (the port in use).

Before any group of the file comes up: every engine the running gateway lists whose (URL,
model) the file no longer has is taken off its list (``DELETE /workers/<url>``) and drained
(its requests in flight end: its /metrics, at most ``fleet.rollout.drain_timeout_s``); then the
groups the file no longer lists are removed from every host by the one removal (``retire``:
found by the gateway's label, under each one's lease).
"""

from __future__ import annotations

from inkctl.errors import InkctlError


def free_dropped(fleet, sink, *, accept_new: bool, drain_timeout_s: float, retire) -> dict[str, list[str]]:
    """Drain and remove the groups a gateway file no longer lists, first; deployment -> the hosts
    it was removed from. ``retire``: ``fleet.retire``, the one removal of such groups (passed in:
    that module imports this one)."""
    if not fleet.gateway or not fleet.hosts:
        return {}
    _drain_dropped(fleet, sink, drain_timeout_s)
    return retire(fleet, sink, accept_new=accept_new)


def _drain_dropped(fleet, sink, timeout_s: float) -> None:
    """Off the running gateway's list and drained: the engines whose (URL, model) the file no
    longer has. A gateway that does not answer routes nothing: nothing to drain."""
    import httpx
    from urllib.parse import quote

    from inkctl.client.drain import drain
    from inkctl.client.workers import registered
    from inkctl.execute.events import Info
    from inkctl.execute.supervise.health import check_once

    if not fleet.router.health_url or not check_once(fleet.router.health_url)[0]:
        return
    workers = f"{fleet.url}/workers"
    try:
        have = registered(workers)
    except InkctlError:
        return
    want = {(g.url.rstrip("/"), g.model) for g in fleet.replicas}
    from inkctl.client.drain import reader
    from inkctl.recipe.engine_registry import spec_of, specs

    # a dropped model's engine kind is not in the file any more: every engine's names are read
    kinds = {g.recipe.engine.kind for g in fleet.replicas}
    names = [spec_of(k).metrics for k in sorted(kinds)] or [s.metrics for s in specs()]
    running = tuple(n for m in names for n in m.running)
    waiting = tuple(n for m in names for n in m.waiting)
    read = reader(running, waiting)
    for url, model in sorted(have.items()):
        if (url, model) in want:
            continue
        sink.emit(Info(text=f"{model} at {url} is no longer in the gateway file: off the gateway, draining, "
                            "then removed before the new models start"))
        try:
            httpx.delete(f"{workers}/{quote(url, safe='')}", timeout=30, trust_env=False)
        except httpx.HTTPError as e:
            sink.emit(Info(text=f"{url}: could not take it off the gateway: {e}", level="warning"))
        d = drain(url, timeout_s, read)
        if not d.ok and d.left is not None:
            sink.emit(Info(text=f"{url}: {d.left:g} requests still in flight after {d.seconds:.1f} s; removing it "
                                "anyway", level="warning"))
