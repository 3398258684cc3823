"""``inkctl import``: read another tool's recipe, convert it, validate the result where it lands.

Every refusal names the input file and line (the key, or the place in the command, at fault);
so does each problem of the imported recipe (the line of the input that says what is at fault,
with the imported recipe's field path): never a temporary file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from inkctl.errors import EXIT_INVALID, InkctlError, Problem


@dataclass
class ImportResult:
    kind: str
    text: str  # the inkctl recipe, YAML
    unmapped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def import_recipe(file: Path, *, out: Path | None = None, name: str | None = None, model: str | None = None,
                  accelerator: str | None = None, gpus_per_host: int | None = None, nodes: int | None = None,
                  image: str | None = None, variant: str | None = None) -> ImportResult:
    import yaml

    from inkctl.recipe.foreign.convert import Options, convert, finish
    from inkctl.recipe.foreign.sparkrun import Refused

    try:
        source = file.read_text()
    except OSError as e:
        raise InkctlError(f"{file}: {e.strerror or e}", exit_code=EXIT_INVALID) from None
    try:
        doc = yaml.safe_load(source)
    except yaml.YAMLError as e:
        raise InkctlError(f"{file}: not YAML: {str(e).splitlines()[0]}", exit_code=EXIT_INVALID) from None
    opts = Options(name=name or file.stem, model=model, accelerator=accelerator, gpus_per_host=gpus_per_host,
                   nodes=nodes, image=image, variant=variant)
    try:
        imp = finish(convert(doc, opts))
    except Refused as e:
        where = f"{file}:{_line_of(source, e.key, e.text)}"
        raise InkctlError(f"{where}: {e} ({e.key})", hint=e.hint, exit_code=EXIT_INVALID) from None
    except InkctlError as e:
        raise InkctlError(f"{file}: {e}", hint=e.hint, exit_code=e.exit_code or EXIT_INVALID) from None
    header = (f"# Imported by `inkctl import` from {file.name} ({imp.kind}).\n"
              "# yaml-language-server: $schema=https://inkctl.invalid/recipe.schema.json\n")
    text = header + yaml.safe_dump(imp.doc, sort_keys=False, allow_unicode=True, width=100)
    problems = [_in_source(p, source, file, imp.doc) for p in _validate(text, out or file)]
    return ImportResult(imp.kind, text, imp.unmapped, imp.notes, problems)


def _line_of(source: str, key: str, text: str | None) -> int:
    """The line of a top-level key, or of TEXT within its value when given."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"{key}:")), None)
    if start is None:
        return 1
    if text:
        for i in range(start, len(lines)):
            if text in lines[i]:
                return i + 1
    return start + 1


def _validate(text: str, where: Path) -> list[Problem]:
    """The imported document through the same loader and rules as any recipe."""
    from inkctl.errors import RecipeInvalid
    from inkctl.recipe.reading.load import load_model
    from inkctl.recipe.model import Recipe

    try:
        _, problems = load_model(Recipe, where, text=text)
    except RecipeInvalid as e:
        problems = list(e.problems)
    return list(problems)


def _in_source(p: Problem, source: str, file: Path, doc: dict) -> Problem:
    """A problem of the imported recipe, located where the input file says the thing at fault
    (its field path stays the imported recipe's)."""
    import dataclasses

    line = None
    for needle in _needles(p.path or "", doc):
        line = next((i + 1 for i, text in enumerate(source.splitlines()) if needle in text), None)
        if line:
            break
    return dataclasses.replace(p, file=str(file), line=line, col=None)


def _needles(path: str, doc: dict) -> list[str]:
    """What to look for in the input, most telling first, for a field of the imported recipe."""
    from inkctl.recipe.foreign.flags import ARGS

    head, _, rest = path.partition(".")
    if path.startswith("engine.args.extra["):
        i = int(path.split("[", 1)[1].split("]", 1)[0])
        extra = doc["engine"]["args"].get("extra") or []
        return [extra[i].split("=", 1)[0]] if i < len(extra) else []
    if path.startswith("engine.args."):
        name = path.split(".")[2].split("[")[0]
        flags = [f for f, k in ARGS.items() if k == name or (name, k) in (("data_parallel", "dp"), ("expert", "ep_size"))]
        return [f + " " for f in flags] + [name + ":"]
    if head == "hardware":
        return ["min_nodes:", "-tp ", "--tensor-parallel-size", "--tp", "command:"]
    if head == "container" and rest.startswith("env."):
        return [rest[4:] + ":", rest[4:] + "="]
    return {"model": ["model:", "model_id:"], "engine": ["container:", "docker_image:", "min_vllm_version:"],
            "speculative": ["--speculative"]}.get(head, [])
