"""``inkctl top`` below the command line: every replica's engine and the router scraped
(Prometheus ``/metrics``) at once, and what changed since the scrape before: one row per group."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inkctl.client.prometheus import Scrape
    from inkctl.plan.replicas.fleet import FleetPlan

# the router's count of requests routed: sglang-router 0.3 (smg_*), earlier sglang-router
# releases (sgl_router_*), vllm-router (vllm_router_*)
ROUTER_REQUESTS = ("smg_router_requests_total", "sgl_router_requests_total", "vllm_router_requests_total")


def scrape(url: str, timeout: float = 3.0, api_key: str | None = None) -> tuple[Scrape | None, str]:
    """GET url (a /metrics endpoint) -> (Scrape | None, error text), with the recipe's API key. The same HTTP client and
    settings as ``watch``'s scrape of the head's /metrics (httpx, the environment's proxies not
    used, one TLS context), so a fleet's endpoints answer ``top`` as they answer ``watch``."""
    import httpx

    from inkctl.client.prometheus import MetricsError, parse
    from inkctl.execute.supervise.health import tls_context

    try:
        r = httpx.get(url, timeout=timeout, trust_env=False, verify=tls_context(),
                      headers={"Authorization": f"Bearer {api_key}"} if api_key else None)
    except httpx.HTTPError as e:
        return None, (str(e) or type(e).__name__)[:60]
    if r.status_code != 200:
        return None, f"HTTP {r.status_code} {r.reason_phrase}"[:60]
    try:
        return parse(r.text), ""
    except MetricsError as e:
        return None, str(e)[:60]


def metrics_targets(fleet: FleetPlan) -> list[tuple[str, str, str]]:
    """(group, kind, metrics URL) for every replica's engine head and the router's exporter."""
    from inkctl.recipe.engine_registry import spec_of

    out: list[tuple[str, str, str]] = [(rep.label, rep.recipe.engine.kind,
                                        rep.url + spec_of(rep.recipe.engine.kind).metrics.path) for rep in fleet.replicas]
    host = fleet.router.hosts[0].address
    out.append(("gateway" if fleet.gateway else "router", "router",
                f"http://{host}:{fleet.router_spec.prometheus_port}/metrics"))
    return out


def top_rows(targets: list[tuple[str, str, str]], before: dict, now: dict, seconds: float) -> list[dict]:
    """One row per target from its scrape ``now`` and the one ``before``, ``seconds`` apart:
    an engine's load (running, waiting, KV cache, tokens/s, TTFT p50), the router's requests;
    a target that did not answer: why."""
    from inkctl.client.prometheus import engine_load
    from inkctl.recipe.engine_registry import spec_of

    rows = []
    for group, kind, url in targets:
        cur, err = now.get(url, (None, "no answer"))
        if cur is None:
            rows.append({"group": group, "kind": kind, "url": url, "error": err})
            continue
        if kind == "router":
            reqs = cur.total(ROUTER_REQUESTS)
            prev = before.get(url, (None, ""))[0]
            pre = prev.total(ROUTER_REQUESTS) if prev else None
            rows.append({"group": group, "kind": kind, "url": url, "requests": reqs,
                         "healthy_replicas": cur.total(("smg_worker_health",)),
                         "requests_per_s": (reqs - pre) / seconds if reqs is not None and pre is not None and seconds > 0 else None})
            continue
        load = engine_load(spec_of(kind).metrics, cur, before.get(url, (None, ""))[0], seconds)
        rows.append({"group": group, "kind": kind, "url": url, **load.__dict__})
    return rows


class Sampler:
    """Scrapes a fleet's targets again and again; each ``rows()`` compares with the scrape before."""

    def __init__(self, fleet: FleetPlan, api_key: str | None = None):
        self.api_key = api_key
        self.targets = metrics_targets(fleet)
        self.urls = [u for _, _, u in self.targets]
        self.before: dict[str, Any] = {}
        self.t_before: float | None = None

    def rows(self) -> list[dict]:
        from inkctl.execute.hosts.fanout import each

        t_now = time.monotonic()
        now = dict(zip(self.urls, each(lambda u: scrape(u, api_key=self.api_key), self.urls, name="top")))
        rows = top_rows(self.targets, self.before, now, (t_now - self.t_before) if self.t_before else 0.0)
        self.before, self.t_before = now, t_now
        return rows

    def wait(self, interval: float) -> None:
        """Sleep until ``interval`` seconds after the last scrape began."""
        t = self.t_before if self.t_before is not None else time.monotonic()
        time.sleep(max(0.0, interval - (time.monotonic() - t)))


def sampler(loaded: Any, fleet: FleetPlan) -> Sampler:
    """A Sampler for what ``load_any`` loaded, sending the recipe's API key (a gateway file: none)."""
    recipe = getattr(loaded, "recipe", None)
    if recipe is None:
        return Sampler(fleet)
    from inkctl.api.measure.serving import recipe_api_key

    return Sampler(fleet, recipe_api_key(recipe))
