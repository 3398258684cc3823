"""Replacing a running deployment whose recipe changed (another recipe hash on its containers).

``up`` first says what changes: the plan record each host kept at the last launch
(``<deployment dir>/plan.json``, ``inkctl.plan.record``) against the new plan's argv, per rank,
flag by flag. Then the old containers and files are removed on every host (the GPUs cannot
hold both versions), and the new version is launched with the usual all-or-nothing rollback.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from inkctl.errors import InkctlError
from inkctl.execute.state.deployed import ContainerState
from inkctl.execute.hosts.fanout import on_hosts
from inkctl.execute.deploy.takedown import remove_from_host
from inkctl.plan.removal import removal
from inkctl.execute.hosts.transport import HostError
from inkctl.plan.record import Record, argv_by_rank, diff_plans, parse_record, record_path
from inkctl.plan.step import Plan


# said of a single deployment being replaced (a rolling update's replica is out of its router meanwhile)
DOWN_WHILE_BOOTING = "does not serve while its new version boots"


@dataclass
class Replacement:
    """What ``up`` found of another version of the deployment, and what it will do about it."""

    plan: Plan
    found: list[ContainerState]
    records: dict[str, Record] = field(default_factory=dict)  # host -> its plan record
    missing: dict[str, str] = field(default_factory=dict)  # host -> why there is no record

    @property
    def old_hashes(self) -> list[str]:
        seen: list[str] = []
        for f in self.found:
            if f.recipe_hash not in seen:
                seen.append(f.recipe_hash or "?")
        return seen

    def read_records(self, transports: dict) -> "Replacement":
        hosts = sorted({f.host for f in self.found}, key=self._order)

        def one(host: str) -> Record:
            path = record_path(self.plan.host(host).state_dir)
            res = transports[host].run(("cat", "--", path), timeout=30)
            if not res.ok:
                raise HostError(host, "command", f"no plan record ({path})")
            try:
                return parse_record(res.text())
            except (ValueError, KeyError, TypeError):
                raise HostError(host, "command", f"an unreadable plan record ({path})") from None

        res = on_hosts(one, hosts, name="replace")
        self.records.update(res.ok)
        self.missing.update({h: e.reason for h, e in res.failed.items()})
        return self

    def describe(self) -> list[str]:
        """The lines ``up`` shows before replacing: the hashes, then what changes per rank."""
        old = ", ".join(self.old_hashes)
        lines = [f"{self.plan.deployment} is running another version of the recipe (recipe hash {old} -> "
                 f"{self.plan.recipe_hash}); replacing it"]
        listing = ", ".join(f"{f.host}: {f.name} ({f.state})" for f in sorted(self.found, key=lambda f: self._order(f.host)))
        lines.append(f"  old containers: {listing}")
        if self.missing:
            for host, why in self.missing.items():
                lines.append(f"  {host}: {why}; the recipe hashes differ, what changes is unknown there")
        old_argv: dict[int, tuple] = {}
        for rec in self.records.values():
            old_argv.update(rec.argv_by_rank)
        if old_argv:
            new_argv = argv_by_rank(self.plan.stages)
            recorded_hosts = set(self.records)
            new_argv = {r: a for r, a in new_argv.items() if self._host_of(r) in recorded_hosts or r in old_argv}
            where = {c.rank: c.host for c in self.plan.containers}
            lines.append("  what changes (- old, + new):")
            lines += ["  " + x for x in diff_plans(old_argv, new_argv, where)]
        return lines

    def remove(self, transports: dict) -> tuple[list[str], dict[str, str]]:
        """Remove the old containers and the deployment's files on every host where they are.
        Returns (hosts cleaned, host -> why not)."""
        by_host: dict[str, list[str]] = {}
        for f in self.found:
            by_host.setdefault(f.host, []).append(f.name)
        hosts = sorted(set(by_host) | {h.name for h in self.plan.hosts}, key=self._order)

        def one(host: str) -> None:
            h = self.plan.host(host)
            remove_from_host(transports[host], removal(host, h.runtime, by_host.get(host, []), h.state_dir))

        res = on_hosts(one, hosts, name="replace")
        return list(res.ok), {h: e.reason for h, e in res.failed.items()}

    def _order(self, host: str) -> int:
        return next((h.rank for h in self.plan.hosts if h.name == host), 1 << 30)

    def _host_of(self, rank: int) -> str | None:
        return next((c.host for c in self.plan.containers if c.rank == rank), None)


def replace_old(replacement: Replacement, transports: dict, sink) -> None:
    """Show what changes, then remove the old version; raises when a host could not be cleaned
    (nothing new is started then)."""
    from inkctl.execute.events import Info, StepFinished, StepStarted

    replacement.read_records(transports)
    sink.emit(Info(text="\n".join(replacement.describe())))
    sink.emit(Info(text=f"{replacement.plan.deployment} {DOWN_WHILE_BOOTING}: the old version is removed first "
                        "(a fleet of 2 or more replicas behind a router is replaced one replica at a time and keeps serving)",
                   level="warning"))
    t0 = time.monotonic()
    for h in sorted({f.host for f in replacement.found}, key=replacement._order):
        sink.emit(StepStarted(host=h, rank=None, kind="run", purpose="remove the old version"))
    cleaned, failed = replacement.remove(transports)
    for h in cleaned:
        if any(f.host == h for f in replacement.found):
            sink.emit(StepFinished(host=h, rank=None, kind="run", purpose="remove the old version",
                                   seconds=round(time.monotonic() - t0, 3)))
    if failed:
        lines = "\n".join(f"  {h}: {why}" for h, why in failed.items())
        raise InkctlError(f"could not remove the old version of {replacement.plan.deployment}; nothing new was started:\n{lines}",
                          hint="fix the host and run up again, or remove it: inkctl down RECIPE (with the same --hosts)")
