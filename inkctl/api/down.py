"""``down`` below the command line: load, plan, take down (``execute.deploy.takedown``), record.

Each host is asked what the deployment has there (by label) and exactly that is removed, with
its state directory; a host that cannot be cleaned is reported, never guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from inkctl.api.target import Target, one_group, plan_for
from inkctl.errors import InkctlError, counted

if TYPE_CHECKING:
    from inkctl.execute.deploy.takedown import TakeDown
    from inkctl.plan.step import Plan


@dataclass
class DownResult:
    plan: Plan
    report: TakeDown  # host -> containers removed; host -> why it could not be cleaned

    def failure(self) -> InkctlError | None:
        """The error to end with when a host could not be cleaned (None: every host was)."""
        failed = self.report.failed
        if not failed:
            return None
        lines = "\n".join(f"  {h}: {why}" for h, why in failed.items())
        return InkctlError(f"{self.plan.deployment}: could not clean {len(failed)} host(s); what is there is unknown or left:\n{lines}",
                           hint="fix the host (or its network) and run inkctl down again; it only removes what is left")

    def summary(self) -> str:
        return f"{self.plan.deployment} is down on {counted(len(self.plan.hosts), 'host')}"


def down(target: Target, *, accept_new: bool = False) -> DownResult:
    """Remove one deployment's containers and state directory on every host it can reach (a
    fleet or a gateway file: ``api.backend.down``). The report says what was removed and what
    failed (``DownResult.failure``); it is in the run's record."""
    from inkctl import runlog
    from inkctl.execute.deploy.takedown import take_down

    loaded = one_group(target, "down", "a fleet or a gateway file: its groups and router go down through the "
                                       "fleet's take-down (inkctl down RECIPE)")
    plan, _ = plan_for(loaded, target)
    assert loaded.hosts is not None
    report = take_down(plan, loaded.hosts, accept_new=accept_new)
    runlog.event("down", deployment=plan.deployment, ok=report.ok, removed=report.removed, failed=report.failed,
                 notices=list(report.notices))
    return DownResult(plan, report)
