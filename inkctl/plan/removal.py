"""Removing a deployment from one host: its containers, then its files. The one recipe for it.

The plan's ``teardown`` (what ``up`` rolls back, shown by ``inkctl plan``) lists these steps
for the containers it starts; ``down`` and a replacement run the same steps for the
containers they find on a host (by label). ``execute.deploy.takedown.remove_from_host``
executes them.
"""

from __future__ import annotations

from inkctl import runtimes
from inkctl.plan.step import Run


def removal(host: str, rt: str, containers: list[str] | tuple[str, ...], state_dir: str, *,
            rank: int | None = None, missing_ok: bool = False) -> tuple[Run, ...]:
    """Remove ``containers`` (running or not) with ``rt``, then ``state_dir``. ``missing_ok``: a
    container that is not there is no failure (a rollback removes what it may have started)."""
    steps = []
    if containers:
        what = "the container" if len(containers) == 1 else "the containers"
        steps.append(Run(host=host, rank=rank, purpose=f"remove {what}", argv=runtimes.get(rt).remove(*containers),
                         ok_codes=(0, 1) if missing_ok else (0,)))
    steps.append(Run(host=host, rank=rank, purpose="remove inkctl's files for this deployment",
                     argv=("rm", "-rf", "--", state_dir)))
    return tuple(steps)
