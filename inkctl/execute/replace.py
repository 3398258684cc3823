"""Replacing a running deployment whose recipe changed (another recipe hash on its containers).

``up`` first says what changes: the plan record each host kept at the last launch
(``<deployment dir>/plan.json``, ``inkctl.plan.record``) against the new plan's argv, per rank,
flag by flag. Then the old containers and files are removed on every host (the GPUs cannot
hold both versions), and the new version is launched with the usual all-or-nothing rollback.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from inkctl.errors import InkctlError
from inkctl.execute.deployed import Found
from inkctl.execute.transport import HostError
from inkctl.plan.record import Record, argv_by_rank, diff_plans, parse_record, record_path
from inkctl.plan.step import Plan

REMOVE_TIMEOUT_S = 120.0


@dataclass
class Replacement:
    """What ``up`` found of another version of the deployment, and what it will do about it."""

    plan: Plan
    found: list[Found]
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

        def one(host: str):
            path = record_path(self.plan.host(host).state_dir)
            try:
                res = transports[host].run(("cat", "--", path), timeout=30)
            except HostError as e:
                return host, None, e.message
            if not res.ok:
                return host, None, f"no plan record ({path})"
            try:
                return host, parse_record(res.text()), None
            except (ValueError, KeyError, TypeError):
                return host, None, f"an unreadable plan record ({path})"

        for host, rec, why in _parallel(one, hosts):
            if rec is not None:
                self.records[host] = rec
            else:
                self.missing[host] = why
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

        def one(host: str):
            runtime = self.plan.host(host).runtime
            tr = transports[host]
            try:
                names = by_host.get(host, [])
                if names:
                    res = tr.run((runtime, "rm", "--force", *names), timeout=REMOVE_TIMEOUT_S)
                    if not res.ok:
                        return host, f"{runtime} rm failed with exit code {res.exit_code}: {res.err_text().strip()[-300:]}"
                res = tr.run(("rm", "-rf", "--", self.plan.host(host).state_dir), timeout=60)
                if not res.ok:
                    return host, f"cannot remove {self.plan.host(host).state_dir}: {res.err_text().strip()[-300:]}"
            except HostError as e:
                return host, e.message
            return host, None

        cleaned, failed = [], {}
        for host, why in _parallel(one, hosts):
            if why is None:
                cleaned.append(host)
            else:
                failed[host] = why
        return cleaned, failed

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


def _parallel(fn, items: list) -> list:
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(64, len(items)), thread_name_prefix="replace") as pool:
        return list(pool.map(fn, items))
