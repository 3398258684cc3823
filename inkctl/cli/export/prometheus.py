"""``inkctl export prometheus``: scrape targets for every engine, router and host, and a
Grafana dashboard over the names the engines export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.common.options import HostsOpt, RecipeArg, SetOpt, output_format, overrides


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
    from inkctl.api.export import prometheus as scrape
    from inkctl.api.target import Target

    fmt = output_format(output)
    _write(scrape(Target.of(recipe, hosts, overrides(set_)), interval), out_dir, fmt)


def _write(scrape, out_dir: Optional[Path], fmt: str) -> None:
    import yaml

    if out_dir is not None:
        scrape.write(out_dir)
    if fmt == "json":
        print(json.dumps({"prometheus": yaml.safe_load(scrape.config), "dashboard": json.loads(scrape.board),
                          "files": [str(out_dir / f) for f in ("prometheus.yml", "grafana-dashboard.json")] if out_dir else []}, indent=2))
    elif out_dir is not None:
        print(f"wrote {out_dir / 'prometheus.yml'} ({scrape.engines} engine(s), "
              f"{'a router, ' if scrape.router else ''}{scrape.hosts} host(s))")
        print(f"wrote {out_dir / 'grafana-dashboard.json'} (import it in Grafana)")
    else:
        print("# prometheus.yml")
        print(scrape.config, end="")
