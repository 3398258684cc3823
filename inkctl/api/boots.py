"""A boot's record: saved beside the deployment's earlier boots (``inkctl.bootlog``) and compared
with the last one (``execute.supervise.bootphases``). ``up`` and ``up --slurm`` keep theirs."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def keep(results_dir: Path, deployment: str, record: dict, recipe_hash: str) -> tuple[dict, tuple[str, ...], str, str]:
    """A boot saved under ``results_dir`` (``inkctl.bootlog``) and compared with the deployment's
    previous one: (the record, with its path once saved; the phases slower than before; the
    previous boot's id or ""; why it could not be read or saved, or ""). The record is a
    by-product of a boot that went well: nothing wrong with the records beside it fails an up."""
    from inkctl import bootlog as boots
    from inkctl.execute.supervise.bootphases import slower_than

    record = dict(record)
    problems = []
    try:  # another up of the recipe may be writing its record at this moment, a file may be cut short
        before = boots.previous(results_dir, deployment)
        slower = tuple(slower_than(record, before[1])) if before else ()
    except (OSError, ValueError, TypeError, AttributeError) as e:
        before, slower = None, ()
        problems.append(f"could not read the previous boot record under {results_dir}: {e}")
    try:
        record["path"] = str(boots.save(results_dir, deployment, {**record, "recipe_hash": recipe_hash}))
    except (OSError, ValueError, TypeError) as e:
        problems.append(f"could not save the boot record under {results_dir}: {e}")
    return record, slower, before[0] if before else "", "; ".join(problems)


def record_launches(results_dir: Path, plans: list[Any], sink: Any = None) -> None:
    """Keep what was launched of each deployment on this machine (``inkctl.launchlog``), for
    ``plan`` to diff the next version against. A by-product: a failure to write is a warning."""
    from inkctl import launchlog
    from inkctl.plan.record import launch_record

    for plan in plans:
        try:
            launchlog.save(results_dir, plan.deployment, launch_record(plan))
        except (OSError, ValueError, TypeError) as e:
            if sink is not None:
                from inkctl.execute.events import Info

                sink.emit(Info(text=f"could not save the launch record of {plan.deployment} under {results_dir}: {e}",
                               level="warning"))
