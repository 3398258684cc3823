"""A boot's record: saved beside the deployment's earlier boots (``inkctl.bootlog``) and compared
with the last one (``execute.supervise.bootphases``). ``up`` and ``up --slurm`` keep theirs."""

from __future__ import annotations

from pathlib import Path


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
