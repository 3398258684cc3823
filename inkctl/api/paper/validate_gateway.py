"""``inkctl validate`` of a gateway file: its own fields, each recipe it lists (their problems
located in the recipe), then the checks its plan makes (GPUs shared, ports used twice, names
and served models twice, hosts), located in the gateway file.

Without ``--hosts`` the models are placed on the hosts they name, as the inventory would give
them with no ``gpus:`` of its own (all of a host's GPUs); with it, on the inventory itself.
"""

from __future__ import annotations

from pathlib import Path

from inkctl.errors import InkctlError, Problem, RecipeInvalid


def validate_gateway(path: Path, hosts_file: Path | None) -> tuple[list[Problem], list[Problem]]:
    """(errors, warnings) of the gateway file ``path`` and every recipe it lists."""
    from inkctl.codes import code
    from inkctl.plan.replicas.gateway import GatewayConflict, build_gateway
    from inkctl.recipe.gateway import GatewayFile, LoadedGateway, gateway_positions
    from inkctl.recipe.hosts import Host
    from inkctl.recipe.reading.load import load_model
    from inkctl.recipe.reading.source import load_inventory, load_recipe

    spec, warnings = load_model(GatewayFile, path)  # RecipeInvalid: the caller reports it
    warnings = list(warnings)
    lg = LoadedGateway(spec=spec, path=path, hosts=[], groups=[], positions=gateway_positions(path, spec))
    problems: list[Problem] = []
    for i, m in enumerate(spec.models):
        try:
            g = load_recipe(path.parent / m.recipe)
        except RecipeInvalid as e:
            problems += [p for p in e.problems if p.severity == "error"]
            warnings += [p for p in e.problems if p.severity != "error"]
            problems.append(lg.problem(("models", i, "recipe"), f"{m.recipe} is not a valid recipe "
                                       "(its problems are listed above)", None))
            continue
        except InkctlError as e:
            p = lg.problem(("models", i, "recipe"), f"{m.recipe}: {e.message}", e.hint or "check the path "
                           "(relative to the gateway file)")
            problems.append(Problem(p.message, path=p.path, file=p.file, line=p.line, col=p.col, hint=p.hint,
                                    code=code("cannot-load")))
            continue
        warnings += g.warnings
        lg.groups.append(g)
    if problems:
        return problems, warnings
    if hosts_file is not None:
        lg.hosts = load_inventory(hosts_file)
    else:  # each host the models name, with all its GPUs
        names = list(dict.fromkeys([*(n for m in spec.models for n in m.hosts),
                                    *([spec.gateway.host] if spec.gateway.host else [])]))
        lg.hosts = [Host(name=n) for n in names]
    try:
        build_gateway(lg)
    except GatewayConflict as e:
        problems.append(e.problem)
    return problems, warnings
