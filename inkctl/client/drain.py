"""Taking one replica out of a router and back in, and waiting for its requests in flight to end.

The routers in front of a fleet (default mode: the replicas given by ``--worker-urls``) keep
their worker list in memory and change it over HTTP; both list it at ``GET /workers``.
vllm-router 0.1: ``POST /remove_worker?url=U`` stops sending U new requests, ``POST
/add_worker?url=U`` puts it back (once U answers ``/health``). sglang-router 0.3:
``DELETE /workers/<id>`` and ``POST /workers {"url": U}``, both queued (202): inkctl waits
until the list shows the change; in its P/D mode the same, the POST also naming the worker's
``worker_type`` and a prefill's ``bootstrap_port``. A removed worker's requests already sent go on to their end; how many are
left is the engine's own ``/metrics``: running + waiting (``client.prometheus``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from inkctl.errors import InkctlError


def _fail(what: str, router: str, r=None, e: Exception | None = None) -> InkctlError:
    said = f"HTTP {r.status_code}: {r.text.strip()[:200]}" if r is not None else f"{type(e).__name__}: {e}"
    return InkctlError(f"the router at {router}: {what}: {said}",
                       hint="inkctl logs RECIPE shows the router's log; inkctl status RECIPE its replicas")


def workers(router: str, *, timeout_s: float = 10.0) -> dict[str, dict]:
    """worker URL -> its entry (``GET /workers``: both routers list ``url``, ``is_healthy``;
    sglang-router also an ``id``)."""
    import httpx

    try:
        r = httpx.get(f"{router}/workers", timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as e:
        raise _fail("listing its replicas failed", router, e=e) from None
    if r.status_code != 200:
        raise _fail("listing its replicas failed", router, r)
    try:
        return {str(w["url"]).rstrip("/"): w for w in r.json().get("workers", [])}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _fail("its replica list is not one inkctl reads", router, r) from None


def listed(router: str, *, timeout_s: float = 10.0) -> list[str]:
    """The worker URLs the router sends requests to."""
    return list(workers(router, timeout_s=timeout_s))


def _send(method: str, url: str, router: str, what: str, timeout_s: float, body: dict | None = None) -> None:
    import httpx

    try:
        r = httpx.request(method, url, json=body, timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as e:
        raise _fail(what, router, e=e) from None
    if r.status_code >= 300:
        raise _fail(what, router, r)


def _until(router: str, worker: str, listed_: bool, timeout_s: float, what: str) -> None:
    """sglang-router queues a change (202): wait until its list says it happened."""
    t0 = time.monotonic()
    while True:
        w = workers(router).get(worker)
        if (w is not None and w.get("is_healthy", True)) if listed_ else w is None:
            return
        if time.monotonic() - t0 > timeout_s:
            raise InkctlError(f"the router at {router}: {what}: not done after {timeout_s:g} s",
                              hint="inkctl logs RECIPE shows the router's log")
        time.sleep(0.2)


def take_out(router: str, worker: str, *, queued: bool = False, timeout_s: float = 30.0) -> bool:
    """Stop the router sending ``worker`` new requests (vllm-router: ``POST /remove_worker?url=``;
    sglang-router: ``DELETE /workers/<id>``, queued: waited for). False: it was not listed."""
    worker = worker.rstrip("/")
    w = workers(router).get(worker)
    if w is None:
        return False
    what = f"taking {worker} out failed"
    if queued and w.get("id"):
        _send("DELETE", f"{router}/workers/{quote(str(w['id']), safe='')}", router, what, timeout_s)
    else:
        _send("POST", f"{router}/remove_worker?url={quote(worker, safe='')}", router, what, timeout_s)
    _until(router, worker, False, timeout_s, what)
    return True


def put_back(router: str, worker: str, *, queued: bool = False, timeout_s: float = 180.0,
             entry: dict | None = None) -> bool:
    """Put ``worker`` back in the router's list, healthy (vllm-router: ``POST /add_worker?url=``,
    which waits for its health; sglang-router: ``POST /workers``, queued: waited for). ``entry``:
    what else sglang-router is told of it (in its P/D mode: ``worker_type`` and a prefill's
    ``bootstrap_port``). False: it was there already."""
    worker = worker.rstrip("/")
    if worker in workers(router):
        return False
    what = f"putting {worker} back failed"
    if queued:
        _send("POST", f"{router}/workers", router, what, timeout_s, {"url": worker, **(entry or {})})
    else:
        _send("POST", f"{router}/add_worker?url={quote(worker, safe='')}", router, what, timeout_s)
    _until(router, worker, True, timeout_s, what)
    return True


def in_flight(engine: str, running: tuple[str, ...], waiting: tuple[str, ...], *,
              timeout_s: float = 5.0) -> float | None:
    """Requests the engine is running or holds waiting (its /metrics, under the engine's own
    names: ``EngineSpec.metrics``); None: it does not say."""
    import httpx

    from inkctl.client.prometheus import parse

    try:
        r = httpx.get(f"{engine}/metrics", timeout=timeout_s, trust_env=False)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    scrape = parse(r.text)
    now_running, now_waiting = scrape.total(running), scrape.total(waiting)
    if now_running is None and now_waiting is None:
        return None
    return (now_running or 0.0) + (now_waiting or 0.0)


def reader(running: tuple[str, ...], waiting: tuple[str, ...]) -> Callable[[str], float | None]:
    """``drain``'s read of one engine under its metric names (``EngineSpec.metrics``)."""
    return lambda engine: in_flight(engine, running, waiting)


@dataclass(frozen=True)
class Drained:
    ok: bool  # nothing left in flight (False: the timeout came first, or the engine never said)
    seconds: float
    left: float | None  # what was still in flight at the end (None: the engine's /metrics did not say)


def drain(engine: str, timeout_s: float, read: Callable[[str], float | None], *, interval_s: float = 0.25,
          stop: Callable[[], bool] = lambda: False) -> Drained:
    """Wait until ``engine`` has nothing in flight, twice in a row (a request the router had just
    sent when it took the engine out shows up a moment later), at most ``timeout_s``. ``read``:
    what is in flight (``reader(names)``), None when the engine does not say."""
    t0 = time.monotonic()
    zeros = 0
    left: float | None = None
    while True:
        left = read(engine)
        zeros = zeros + 1 if left == 0 else 0
        if zeros >= 2:
            return Drained(True, time.monotonic() - t0, 0.0)
        if time.monotonic() - t0 >= timeout_s or stop():
            return Drained(False, time.monotonic() - t0, left)
        time.sleep(interval_s)
