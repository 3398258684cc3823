"""``inkctl export prometheus``: scrape targets for every engine, router and host, and a
Grafana dashboard over the names the engines export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.options import HostsOpt, RecipeArg, SetOpt, output_format, overrides


def prometheus(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Write prometheus.yml and grafana-dashboard.json into DIR (default: print them)."),
    interval: float = typer.Option(5.0, "--interval", min=1, help="Scrape interval in seconds."),
    output: str = typer.Option("text", "--output", "-o", help="text or json."),
) -> None:
    """Prometheus scrape targets (every replica's engine, the router, each host's node_exporter
    on :9100) and a Grafana dashboard JSON using vllm:* / sglang:* and the router's metric names."""
    import yaml

    from inkctl.export.prometheus import dashboard_json, scrape_config
    from inkctl.recipe.source import load_recipe

    fmt = output_format(output)
    from inkctl.api.fleet import is_gateway

    if is_gateway(recipe):  # every model's engine and the one router in front
        _gateway(recipe, hosts, out_dir, interval, fmt)
        return
    loaded = load_recipe(recipe, overrides(set_), hosts)
    r = loaded.recipe
    if r.fleet is not None:
        from inkctl.api.fleet import fleet_of

        fleet = fleet_of(loaded)
        engines = [(rep.name, r.engine.kind, rep.url) for rep in fleet.replicas]
        router = f"{fleet.router.hosts[0].address}:{r.fleet.router.prometheus_port}"
        host_addrs = list(dict.fromkeys(h.address for rep in fleet.replicas for h in rep.plan.hosts))
    else:
        from inkctl.plan.deploy import build_plan

        plan = build_plan(r, loaded.hosts)
        base = plan.health_url.rsplit("/", 1)[0] if plan.health_url else ""
        engines, router = [(r.name, r.engine.kind, base)], None
        host_addrs = [h.address for h in plan.hosts]
    config = yaml.safe_dump(scrape_config(r.name, engines, router, host_addrs, interval), sort_keys=False)
    board = dashboard_json(r.name, r.engine.kind, router is not None)
    _write(config, board, out_dir, fmt, len(engines), router, len(host_addrs))


def _gateway(path: Path, hosts: Optional[Path], out_dir: Optional[Path], interval: float, fmt: str) -> None:
    """A gateway file: each model's engine, the gateway's exporter, every host of its groups."""
    import yaml

    from inkctl.api.fleet import load_gateway_fleet
    from inkctl.api.target import Target
    from inkctl.export.prometheus import dashboard_json, scrape_config

    lg, fleet = load_gateway_fleet(Target.of(path, hosts), "export prometheus")
    engines = [(rep.name, rep.recipe.engine.kind, rep.url) for rep in fleet.replicas]
    router = f"{fleet.router.hosts[0].address}:{fleet.router_spec.prometheus_port}"
    host_addrs = list(dict.fromkeys(h.address for rep in fleet.replicas for h in rep.plan.hosts))
    config = yaml.safe_dump(scrape_config(fleet.name, engines, router, host_addrs, interval), sort_keys=False)
    board = dashboard_json(fleet.name, engines[0][1], True)
    _write(config, board, out_dir, fmt, len(engines), router, len(host_addrs))


def _write(config: str, board: str, out_dir: Optional[Path], fmt: str, engines: int, router: Optional[str],
           hosts: int) -> None:
    import yaml

    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "prometheus.yml").write_text(config)
        (out_dir / "grafana-dashboard.json").write_text(board)
    if fmt == "json":
        print(json.dumps({"prometheus": yaml.safe_load(config), "dashboard": json.loads(board),
                          "files": [str(out_dir / f) for f in ("prometheus.yml", "grafana-dashboard.json")] if out_dir else []}, indent=2))
    elif out_dir is not None:
        print(f"wrote {out_dir / 'prometheus.yml'} ({engines} engine(s), "
              f"{'a router, ' if router else ''}{hosts} host(s))")
        print(f"wrote {out_dir / 'grafana-dashboard.json'} (import it in Grafana)")
    else:
        print("# prometheus.yml")
        print(config, end="")
