"""``weights``: the pinned model on every host. Thin: flags -> ``inkctl.api.weights`` (load,
check, relay along a chain) -> the live view or JSON, the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import AcceptOpt, HostsOpt, OutputOpt, SetOpt, output_format
from inkctl.errors import UsageError


@app.command()
def weights(
    recipe: Path = typer.Argument(..., metavar="RECIPE", help="A recipe file or a bundled recipe's name (its model pinned by `inkctl lock`)."),
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    from_: Optional[str] = typer.Option(None, "--from", help="Host that downloads from the Hub and sends to the others (default: the head, rank 0)."),
    verify: bool = typer.Option(False, "--verify", help="Re-hash every pinned file on every host and report what is missing, truncated or altered; change nothing."),
    repair: bool = typer.Option(False, "--repair", help="With --verify: then fix exactly the files found wrong."),
    bwlimit: Optional[float] = typer.Option(None, "--bwlimit", min=0.01, help="Cap each host-to-host copy stream at this many MB/s (leave room for other traffic)."),
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
    partition: Optional[str] = typer.Option(None, "--partition", help="Every node of this Slurm partition (sinfo), in Slurm's order; --hosts FILE then gives per-node settings by node name."),
    slurm_job: Optional[str] = typer.Option(None, "--slurm-job", metavar="JOBID", help="Every node of this running Slurm job's allocation (scontrol show job), in Slurm's order; --hosts FILE as with --partition. Inside an allocation ($SLURM_JOB_NODELIST) without this or --partition: the allocation's nodes."),
) -> None:
    """Put the pinned model on every host: what a host lacks comes ONCE (to the head, or --from
    HOST: from a host that has it, the Hub last) and is relayed host to host along a chain over
    the cluster network, each host writing and forwarding at once. Only missing or wrong files
    move; partial files resume; every byte is hashed as it arrives; a relay host that dies is
    named and the next one resumes from the host before it."""
    fmt = output_format(output)
    if repair and not verify:
        raise UsageError("--repair goes with --verify (without --verify, weights already fixes what a quick scan finds)")
    from inkctl.api.target import Target
    from inkctl.api.weights import WeightsOptions
    from inkctl.api.weights import weights as api_weights

    options = WeightsOptions(source=from_, verify=verify, repair=repair, bwlimit=bwlimit,
                             accept_new=accept_new_host_keys)
    from inkctl.cli.common.signals import cancel_token
    from inkctl.errors import Cancelled

    with cancel_token(lambda: Cancelled(started=True)) as cancel:  # a second Ctrl-C abandons the copies
        api_weights(Target.of(recipe, hosts, set_), options, lambda manifest: _display(fmt, manifest),
                    on_report=lambda report: _said(fmt, report),
                    nodes=_slurm_nodes(recipe, set_, hosts, partition, slurm_job), cancel=cancel)


def _slurm_nodes(recipe: Path, set_, hosts: Optional[Path], partition: Optional[str], job: Optional[str]):
    """With --partition, --slurm-job or inside an allocation: what loads the recipe on Slurm's
    nodes (``api/slurm.slurm_target``); None: the inventory's hosts."""
    import os

    nodelist = os.environ.get("SLURM_JOB_NODELIST") if not (partition or job) else None
    if partition and job:
        raise UsageError("--partition and --slurm-job both name the nodes: choose one")
    if not (partition or job or nodelist):
        return None

    def nodes():
        from inkctl.api.slurm import slurm_target
        from inkctl.api.target import Target

        return slurm_target(Target.of(recipe, hosts, set_), "weights", partition=partition, job=job,
                            nodelist=nodelist)

    return nodes


def _display(fmt: str, manifest):
    if fmt == "json":
        from inkctl.execute.events import JsonLines

        return JsonLines()
    from inkctl.cli.show.weights_view import WeightsView

    return WeightsView(manifest)


def _said(fmt: str, report) -> None:
    if fmt == "json":
        print(json.dumps({"event": "weights", **report.as_dict()}))
        return
    from inkctl.cli.show.terminal import console

    out = console()
    for line in report.lines():
        out.print(line, markup=False)
