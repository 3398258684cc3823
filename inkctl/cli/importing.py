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
    file: Path = typer.Argument(..., help="A sparkrun recipe (model, container, command...) or a vLLM recipes config (flat vllm serve options)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the inkctl recipe here (default: print it)."),
    model: Optional[str] = typer.Option(None, "--model", help="The model repository (required for a vLLM recipes config)."),
    accelerator: Optional[str] = typer.Option(None, "--accelerator", help="The accelerator (default for sparkrun: dgx-spark-gb10)."),
    gpus_per_host: Optional[int] = typer.Option(None, "--gpus-per-host", min=1, help="GPUs per host (default for sparkrun: 1)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", min=1, help="Hosts (default: the recipe's min_nodes, else 1)."),
    image: Optional[str] = typer.Option(None, "--image", help="The container image (default: the recipe's container)."),
    name: Optional[str] = typer.Option(None, "--name", help="The deployment name (default: from the file name)."),
) -> None:
    """Turn another tool's recipe into an inkctl recipe, validate it, and list what did not map."""
    import yaml

    from inkctl.cli.errors_view import print_problems
    from inkctl.cli.terminal import console
    from inkctl.recipe.foreign import convert, finish

    try:
        doc = yaml.safe_load(file.read_text())
    except OSError as e:
        raise InkctlError(f"{file}: {e.strerror or e}", exit_code=EXIT_INVALID) from None
    except yaml.YAMLError as e:
        raise InkctlError(f"{file}: not YAML: {str(e).splitlines()[0]}", exit_code=EXIT_INVALID) from None
    imp = finish(convert(doc, name=name or file.stem, model=model, accelerator=accelerator,
                         gpus_per_host=gpus_per_host, nodes=nodes, image=image))
    header = (f"# Imported by `inkctl import` from {file.name} ({imp.kind}).\n"
              "# yaml-language-server: $schema=https://inkctl.invalid/recipe.schema.json\n")
    text = header + yaml.safe_dump(imp.doc, sort_keys=False, allow_unicode=True, width=100)
    err = console(stderr=True)
    problems = _validate(text, out or Path(f"{file.stem}.inkctl.yaml"))
    if out is not None:
        out.write_text(text)
        err.print(f"wrote {out} (from a {imp.kind} recipe)", markup=False)
    else:
        sys.stdout.write(text)
    for line in imp.unmapped:
        err.print(f"not mapped: {line}", markup=False)
    if problems:
        print_problems(problems, strict=False, stream=sys.stderr)
        if any(p.severity == "error" for p in problems):
            raise InkctlError("the imported recipe does not validate: fix what is listed",
                              hint="edit the written file, then run inkctl validate on it", exit_code=EXIT_INVALID)


def _validate(text: str, where: Path) -> list:
    """The imported document through the same loader and rules as any recipe."""
    import tempfile

    from inkctl.recipe.source import load_recipe

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / where.name
        p.write_text(text)
        try:
            loaded = load_recipe(p)
        except InkctlError as e:
            problems = getattr(e, "problems", None)
            if problems:
                return list(problems)
            raise
        return list(loaded.warnings)
