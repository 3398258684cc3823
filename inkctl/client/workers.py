"""A multi-model router's worker list (vllm-router with --enable-igw): ``GET /workers``,
``POST /workers`` ({"url", "model_id"}), ``DELETE /workers/<url>``.

The list lives in the router's memory only: a restarted router has none, so registering is
made to be run again: it adds what is missing and removes what is not wanted."""

from __future__ import annotations

from urllib.parse import quote

from inkctl.errors import InkctlError


def _fail(what: str, url: str, r=None, e: Exception | None = None) -> InkctlError:
    said = f"HTTP {r.status_code}: {r.text.strip()[:200]}" if r is not None else f"{type(e).__name__}: {e}"
    return InkctlError(f"the router at {url}: {what}: {said}",
                       hint="inkctl logs GATEWAY-FILE shows the router's log; inkctl up registers again")


def registered(url: str, *, timeout_s: float = 10.0) -> dict[str, str]:
    """engine URL -> model, as the router lists them."""
    import httpx

    try:
        r = httpx.get(url, timeout=timeout_s, trust_env=False)
    except httpx.HTTPError as e:
        raise _fail("listing its workers failed", url, e=e) from None
    if r.status_code != 200:
        raise _fail("listing its workers failed", url, r)
    try:
        return {str(w["url"]).rstrip("/"): str(w.get("model_id") or "") for w in r.json().get("workers", [])}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise _fail("its worker list is not one inkctl reads", url, r) from None


def register_workers(url: str, workers: tuple[tuple[str, str], ...] | list[tuple[str, str]], *,
                     timeout_s: float = 30.0) -> list[str]:
    """Make the router's list exactly ``workers`` ((engine URL, model) pairs); what changed, in
    words (empty: nothing to do)."""
    import httpx

    want = {u.rstrip("/"): m for u, m in workers}
    have = registered(url)
    changed = []
    for u, m in have.items():
        if want.get(u) != m:
            try:
                r = httpx.delete(f"{url}/{quote(u, safe='')}", timeout=timeout_s, trust_env=False)
            except httpx.HTTPError as e:
                raise _fail(f"removing {u} failed", url, e=e) from None
            if r.status_code >= 300 and r.status_code != 404:
                raise _fail(f"removing {u} failed", url, r)
            changed.append(f"removed {u} ({m})")
    for u, m in want.items():
        if have.get(u) == m:
            continue
        try:
            r = httpx.post(url, json={"url": u, "model_id": m}, timeout=timeout_s, trust_env=False)
        except httpx.HTTPError as e:
            raise _fail(f"registering {u} ({m}) failed", url, e=e) from None
        if r.status_code >= 300:
            raise _fail(f"registering {u} ({m}) failed", url, r)
        changed.append(f"registered {m} at {u}")
    return changed
