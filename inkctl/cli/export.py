"""inkctl export: the same plan, written out for another runner (Kubernetes, systemd).

Each target lives in its own module (``export_<target>.py``) that adds one command to
``export_app``; they are imported at the bottom of this file.
"""

from __future__ import annotations

import typer

from inkctl.cli.app import app

export_app = typer.Typer(
    help="Write a deployment out for another runner (Kubernetes manifests, a systemd unit).",
    no_args_is_help=True,
)
app.add_typer(export_app, name="export")

import inkctl.cli.export_k8s  # noqa: E402,F401  (registers `export k8s`)
import inkctl.cli.export_prometheus  # noqa: E402,F401  (registers `export prometheus`)
import inkctl.cli.export_systemd  # noqa: E402,F401  (registers `export systemd`)
