"""``inkctl export slurm``: the recipe's plan as one sbatch script. Thin: load -> export -> write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.common.options import (AccountOpt, ContainerOpt, GpusOpt, JobDirOpt, PartitionOpt, SetOpt, TimeOpt, output_format,
                                slurm_container)


def slurm(
    recipe: Path = typer.Argument(..., help="Recipe file."),
    hosts_file: Optional[Path] = typer.Option(None, "--hosts", help="Inventory whose host names are Slurm node names, in rank order: the job asks for exactly those nodes."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the script to FILE (default: print it)."),
    partition: Optional[str] = PartitionOpt,
    account: Optional[str] = AccountOpt,
    time: Optional[str] = TimeOpt,
    gpus_per_node: Optional[int] = GpusOpt,
    container: Optional[str] = ContainerOpt,
    job_dir: Optional[str] = JobDirOpt,
    image: Optional[str] = typer.Option(None, "--image", help="Image to run (default: the recipe's; a patched one: the pushed build, else the built tag)."),
    var: Optional[List[str]] = typer.Option(None, "--var", help="Value for a recipe ${VAR} on every node: NAME=VALUE (repeatable). Default: the job's environment."),
    set_: Optional[List[str]] = SetOpt,
    output: str = typer.Option("text", "--output", "-o", help="text or json."),
) -> None:
    """Write the deployment as an sbatch script: one task per node, --exclusive, GPUs per node,
    one srun step that starts every rank with the plan's own argv and env (`inkctl plan`).

    The head is the first host of $SLURM_JOB_NODELIST, a rank is $SLURM_NODEID. Secrets are never
    in the script: each rank reads them when the job runs (the header names them). Check it with
    `sbatch --test-only FILE`; `inkctl up RECIPE --slurm` submits and follows it.
    """
    from inkctl.api.export import slurm as export

    fmt = output_format(output)
    container, sets = slurm_container(container, set_, recipe)
    job = export(recipe, sets, dict(partition=partition, account=account, time=time, gpus_per_node=gpus_per_node,
                                     container=container, job_dir=job_dir),
                 hosts_file=hosts_file, image=image, var=var)
    if out is not None:
        out.write_text(job.script)
        out.chmod(0o755)
    if fmt == "json":
        print(json.dumps({"name": job.name, "file": str(out) if out else None, "script": None if out else job.script,
                          "secrets": list(job.secrets), "env_vars": list(job.env_vars), "notes": list(job.notes)},
                         indent=2))
        return
    _text(job, out)


def _text(job, out: Optional[Path]) -> None:
    import sys

    if out is None:
        print(job.script, end="")
    err = sys.stderr if out is None else sys.stdout
    if out is not None:
        print(f"wrote {out}: sbatch {out}", file=err)
    if job.secrets:
        print(f"secrets read when the job runs: {', '.join(job.secrets)}", file=err)
    if job.env_vars:
        print(f"read from the job's environment: {', '.join(job.env_vars)}", file=err)
    for n in job.notes:
        print(f"note: {n}", file=err)
