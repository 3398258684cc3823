"""inkctl export: the same plan, written out for another runner (Kubernetes, Slurm, systemd).

Each target lives in its own module (``export_<target>.py``) with one command function;
this file registers them on ``export_app`` (they never import this file back).
"""

from __future__ import annotations

import typer

from inkctl.cli.export import k8s as export_k8s, prometheus as export_prometheus, slurm as export_slurm, systemd as export_systemd
from inkctl.cli.app import app

export_app = typer.Typer(
    help="Write a deployment out for another runner (Kubernetes manifests, a Slurm batch script, Prometheus targets, a systemd unit).",
    no_args_is_help=True,
)
export_app.command("k8s")(export_k8s.k8s)
export_app.command("prometheus")(export_prometheus.prometheus)
export_app.command("slurm")(export_slurm.slurm)
export_app.command("systemd")(export_systemd.systemd)
app.add_typer(export_app, name="export")
