"""import: a recipe of another tool (sparkrun, the vLLM recipes repository) as an inkctl recipe."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from inkctl.cli.app import app
from inkctl.errors import EXIT_INVALID, InkctlError


@app.command("import")
def import_(
    file: Path = typer.Argument(..., help="A sparkrun recipe (model, container, command...), a vLLM recipes model file (models/ORG/MODEL.yaml) or a vLLM config (flat vllm serve options)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the inkctl recipe here (default: print it)."),
    model: Optional[str] = typer.Option(None, "--model", help="The model repository (required for a vLLM config)."),
    accelerator: Optional[str] = typer.Option(None, "--accelerator", help="The accelerator (default for sparkrun: dgx-spark-gb10)."),
    gpus_per_host: Optional[int] = typer.Option(None, "--gpus-per-host", min=1, help="GPUs per host (default for sparkrun: 1)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", min=1, help="Hosts (default: the recipe's min_nodes, else what its parallelism needs)."),
    image: Optional[str] = typer.Option(None, "--image", help="The container image (default: the recipe's container)."),
    name: Optional[str] = typer.Option(None, "--name", help="The deployment name (default: from the file name)."),
    variant: Optional[str] = typer.Option(None, "--variant", help="A vLLM recipes model file's variant (default: default)."),
) -> None:
    """Turn another tool's recipe into an inkctl recipe, validate it, and list what did not map."""
    from inkctl.api.paper.importing import import_recipe
    from inkctl.cli.show.errors_view import print_problems
    from inkctl.cli.show.terminal import console

    result = import_recipe(file, out=out, name=name, model=model, accelerator=accelerator,
                           gpus_per_host=gpus_per_host, nodes=nodes, image=image, variant=variant)
    err = console(stderr=True)
    if out is not None:
        out.write_text(result.text)
        err.print(f"wrote {out} (from a {result.kind} recipe)", markup=False)
    else:
        sys.stdout.write(result.text)
    for line in result.notes:
        err.print(f"note: {line}", markup=False)
    for line in result.unmapped:
        err.print(f"not mapped: {line}", markup=False)
    if result.problems:
        print_problems(result.problems, strict=False, stream=sys.stderr)
        if any(p.severity == "error" for p in result.problems):
            raise InkctlError("the imported recipe does not validate: fix what is listed",
                              hint="edit the written file, then run inkctl validate on it", exit_code=EXIT_INVALID)
