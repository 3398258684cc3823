"""``doctor`` below the command line: the preflight ``up`` runs, alone (ssh, runtime, GPUs,
image, paths, ports, memory, names, weights), on every host in parallel; with ``network`` the
bus bandwidth of every pair of hosts too (``api/observe/network.py``). Nothing is started."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from inkctl.api.observe.reach import OnAccept, close, connect
from inkctl.api.target import Target, load_target
from inkctl.errors import InkctlError

if TYPE_CHECKING:
    from inkctl.api.observe.network import NetReport
    from inkctl.plan.step import Plan


@dataclass
class Diagnosis:
    plan: Plan
    results: list  # preflight.CheckResult, host by host
    ok: bool  # every check passed (warnings allowed)
    net: Optional[NetReport] = None  # with network: what the measurement found

    def failure(self) -> InkctlError | None:
        """The error to end with: the network's first, then the preflight's (None: all passed)."""
        if self.net is not None and not self.net.ok:
            return InkctlError(self.net.failure(), hint=self.net.hint())
        if not self.ok:
            where = ", ".join(f"{r.host} ({r.check})" for r in self.results if r.status == "fail")
            return InkctlError(f"preflight failed on {where}: up would launch nothing",
                               hint="fix what FAILed, or waive a check knowingly with --skip-check NAME")
        return None


def doctor(target: Target, *, skip: Iterable[str] = (), network: bool = False, port: int = 29580,
           accept_new: bool = False, on_accept: OnAccept | None = None) -> Diagnosis:
    """Run the preflight (``skip``: checks waived by name; a typo fails before any connection)
    and, with ``network``, the NCCL measurement on the rendezvous ``port``."""
    from inkctl.execute.deploy.preflight import PreflightFailed, check_names, run_preflight
    from inkctl.recipe.lockfile import read_proofs
    from inkctl.weights.preflight import weights_check

    skipped = check_names(list(skip))  # a typo fails before any connection
    loaded, plan, image = load_target(target, "doctor")
    assert loaded.hosts is not None
    secrets = secrets_check(loaded, plan)
    transports = connect(loaded.hosts, accept_new, on_accept)
    net = None
    try:
        try:
            results, ok = run_preflight(loaded.recipe, plan, transports, skip=skipped, image=image,
                                        weights=weights_check(loaded), proof_pins=read_proofs(loaded)), True
        except PreflightFailed as e:
            results, ok = e.results, False
        if network:
            from inkctl.api.observe.network import measure

            net = measure(loaded, plan, transports, results, port)
    finally:
        close(transports)
    if secrets is not None:
        results, ok = [secrets, *results], ok and not secrets.failed
    return Diagnosis(plan, results, ok, net)


def secrets_check(loaded, plan: Plan):
    """The secrets ``up`` reads on this machine, read the same way (a CheckResult, host ``local``;
    None when the recipe has none): ``up`` would stop on the first missing one before any host."""
    from inkctl.api.secured import secrets_for
    from inkctl.execute.deploy.preflight import FAIL, OK, CheckResult

    if not loaded.recipe.secrets:
        return None
    try:
        got = secrets_for(loaded, [plan])
    except InkctlError as e:
        lines = [ln.strip() for ln in e.message.splitlines()[1:]] or [e.message]
        return CheckResult("local", None, "secrets", FAIL, "; ".join(lines), e.hint)
    key = f"; the API key {loaded.recipe.api_key} is a bearer token" if loaded.recipe.api_key else ""
    return CheckResult("local", None, "secrets", OK, f"{len(got)} read on this machine ({', '.join(got)}){key}")
