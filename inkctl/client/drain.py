"""Taking one replica out of a router and back in, and waiting for its requests in flight to end.

The routers in front of a fleet (sglang-router and vllm-router, default mode: the replicas given
by ``--worker-urls``) keep their worker list in memory and change it over HTTP:
``POST /remove_worker?url=U`` stops sending U new requests, ``POST /add_worker?url=U`` puts it
back (the router waits for U's ``/health`` first), ``GET /list_workers`` lists them
(``{"urls": [...]}``). A removed worker's requests already sent go on to their end; how many are
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


def listed(router: str, *, timeout_s: float = 10.0) -> list[str]:
    """The worker URLs the router sends requests to."""
    import httpx

    try:
        r = httpx.get(f"{router}/list_workers", timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as e:
        raise _fail("listing its replicas failed", router, e=e) from None
    if r.status_code != 200:
        raise _fail("listing its replicas failed", router, r)
    try:
        return [str(u).rstrip("/") for u in r.json().get("urls", [])]
    except (ValueError, TypeError, AttributeError):
        raise _fail("its replica list is not one inkctl reads", router, r) from None


def take_out(router: str, worker: str, *, timeout_s: float = 30.0) -> bool:
    """Stop the router sending ``worker`` new requests. False: it was not in the list."""
    import httpx

    if worker.rstrip("/") not in listed(router):
        return False
    try:
        r = httpx.post(f"{router}/remove_worker?url={quote(worker, safe='')}", timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as e:
        raise _fail(f"taking {worker} out failed", router, e=e) from None
    if r.status_code >= 300:
        raise _fail(f"taking {worker} out failed", router, r)
    return True


def put_back(router: str, worker: str, *, timeout_s: float = 180.0) -> bool:
    """Put ``worker`` back in the router's list (it answers ``/health`` by then). False: it was
    there already."""
    import httpx

    if worker.rstrip("/") in listed(router):
        return False
    try:
        r = httpx.post(f"{router}/add_worker?url={quote(worker, safe='')}", timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as e:
        raise _fail(f"putting {worker} back failed", router, e=e) from None
    if r.status_code >= 300:
        raise _fail(f"putting {worker} back failed", router, r)
    return True


def in_flight(engine: str, *, timeout_s: float = 5.0) -> float | None:
    """Requests the engine is running or holds waiting (its /metrics); None: it does not say."""
    import httpx

    from inkctl.client.prometheus import RUNNING, WAITING, parse

    try:
        r = httpx.get(f"{engine}/metrics", timeout=timeout_s, trust_env=False)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    scrape = parse(r.text)
    running, waiting = scrape.total(RUNNING), scrape.total(WAITING)
    if running is None and waiting is None:
        return None
    return (running or 0.0) + (waiting or 0.0)


@dataclass(frozen=True)
class Drained:
    ok: bool  # nothing left in flight (False: the timeout came first, or the engine never said)
    seconds: float
    left: float | None  # what was still in flight at the end (None: the engine's /metrics did not say)


def drain(engine: str, timeout_s: float, *, interval_s: float = 0.25, stop: Callable[[], bool] = lambda: False,
          read: Callable[[str], float | None] = in_flight) -> Drained:
    """Wait until ``engine`` has nothing in flight, twice in a row (a request the router had just
    sent when it took the engine out shows up a moment later), at most ``timeout_s``."""
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
