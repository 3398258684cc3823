"""Prometheus scrape targets and a Grafana dashboard for a deployment or a fleet. Pure.

Targets: every replica's engine head (``/metrics`` on its API port: vLLM and SGLang serve it
there), the router's exporter, and every host's node_exporter (``:9100``, which the user runs).
The dashboard's queries use the names the engines export (``vllm:*``, ``sglang:*``) and the
router's (``smg_*``, sglang-router 0.3).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

NODE_EXPORTER_PORT = 9100

_ROUTER_PANELS = [
    ("Router requests/s", 'sum by (model) (rate(smg_router_requests_total{job="inkctl-router"}[1m]))', "reqps"),
    ("Router: healthy replicas", 'sum(smg_worker_health{job="inkctl-router"})', "short"),
    ("Router: in flight per replica", 'sum by (worker) (smg_worker_requests_active{job="inkctl-router"})', "short"),
]
_HOST_PANELS = [
    ("Host memory available", 'node_memory_MemAvailable_bytes{job="inkctl-hosts"}', "bytes"),
]


def _host_port(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0]


def _path_label(kind: str) -> dict[str, str]:
    """An engine that serves its metrics elsewhere than the job's path says so per target."""
    from inkctl.recipe.engine_registry import spec_of

    path = spec_of(kind).metrics.path
    return {} if path == "/metrics" else {"__metrics_path__": path}


def scrape_config(name: str, engines: Sequence[tuple[str, str, str]], router: str | None, hosts: Sequence[str],
                  interval_s: float = 5.0) -> dict:
    """prometheus.yml: ``engines`` (replica label, kind, base URL), the router's exporter
    (host:port), the hosts' node_exporter addresses."""
    jobs = [{"job_name": "inkctl-engines", "scrape_interval": f"{interval_s:g}s", "metrics_path": "/metrics",
             "static_configs": [{"targets": [_host_port(url)],
                                 "labels": {"deployment": name, "replica": replica, "engine": kind, **_path_label(kind)}}
                                for replica, kind, url in engines]}]
    if router:
        jobs.append({"job_name": "inkctl-router", "scrape_interval": f"{interval_s:g}s",
                     "static_configs": [{"targets": [router], "labels": {"deployment": name}}]})
    jobs.append({"job_name": "inkctl-hosts", "scrape_interval": f"{interval_s * 3:g}s",
                 "static_configs": [{"targets": [f"{h}:{NODE_EXPORTER_PORT}" for h in hosts],
                                     "labels": {"deployment": name}}]})
    return {"global": {"scrape_interval": f"{interval_s:g}s"}, "scrape_configs": jobs}


def dashboard(name: str, kind: str, with_router: bool) -> dict:
    """A Grafana dashboard (schemaVersion 39) over a Prometheus data source chosen at import."""
    panels = []
    from inkctl.recipe.engine_registry import spec_of

    # the engine's own panels: (panel title, PromQL over the engine job, unit)
    rows = list(spec_of(kind).metrics.panels) + (_ROUTER_PANELS if with_router else []) + _HOST_PANELS
    for i, (title, expr, unit) in enumerate(rows):
        panels.append({
            "id": i + 1, "type": "timeseries", "title": title,
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"refId": "A", "expr": expr, "legendFormat": "{{replica}}" if "replica" in expr else ""}],
        })
    return {
        "title": f"inkctl {name}", "uid": f"inkctl-{name}"[:40], "schemaVersion": 39, "version": 1,
        "tags": ["inkctl", kind], "time": {"from": "now-1h", "to": "now"}, "refresh": "10s",
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                 "label": "Prometheus"}]},
        "panels": panels,
    }


def dashboard_json(name: str, kind: str, with_router: bool) -> str:
    return json.dumps(dashboard(name, kind, with_router), indent=2) + "\n"
