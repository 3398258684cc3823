"""Before ``up`` (and in ``doctor``): does every host have the pinned files? Names and sizes
only, one ``stat`` round trip per host, no container: fast enough to run before every launch.
(``inkctl weights --verify`` re-hashes them.)"""

from __future__ import annotations

from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import HostError
from inkctl.recipe.manifest import Manifest, host_cache_template, read_draft_manifest, read_manifest, repo_folder

# positional arguments are the snapshot paths; one line per path: its size, or '-' when absent
STAT = 'for p in "$@"; do s=$(stat -L -c %s -- "$p" 2>/dev/null) && echo "$s" || echo -; done'
SHOWN = 4


class WeightsCheck:
    """The ``weights`` preflight check: ``check(plan, transports)`` -> host -> (status, detail, hint)."""

    def __init__(self, loaded, manifest: Manifest):
        self.loaded, self.manifest = loaded, manifest
        where = f" --hosts {loaded.hosts_source.split(' ', 1)[1]}" if (loaded.hosts_source or "").startswith("--hosts ") else ""
        self.fix = f"inkctl weights {loaded.path}{where}"

    def paths(self, rank: int) -> list[str]:
        from inkctl.plan.hostvars import HostContext

        hosts = self.loaded.hosts
        template = host_cache_template(self.loaded.recipe)
        assert template is not None  # weights_check makes a check only for a cache on a host path
        cache = HostContext(host=hosts[rank], rank=rank, head=hosts[0], placeholder=False).expand(
            template, "model.weights.cache")
        base = f"{cache}/{repo_folder(self.manifest.repo)}/snapshots/{self.manifest.revision}"
        return [f"{base}/{f.path}" for f in self.manifest.files]

    def one(self, rank: int, transport) -> tuple[str, str, str | None]:
        m = self.manifest
        try:
            r = transport.run(["sh", "-c", STAT, "sh", *self.paths(rank)], timeout=60)
        except HostError as e:
            return "fail", e.message, None
        sizes = r.text().split()
        if not r.ok or len(sizes) != len(m.files):
            return "fail", f"cannot read the Hub cache: {r.err_text().strip()[:200]}", None
        found: list[tuple[int, str]] = []  # (size, what): the biggest first, the shards that keep a boot from starting
        for f, got in zip(m.files, sizes):
            if got == "-":
                found.append((f.size, f"{f.path} missing"))
            elif int(got) != f.size:
                found.append((f.size, f"{f.path} {'truncated' if int(got) < f.size else 'altered'} ({got} of {f.size} bytes)"))
        bad = [what for _, what in sorted(found, key=lambda b: -b[0])]
        if bad:
            more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
            return ("fail", f"{len(bad)} of {len(m.files)} pinned files of {m.repo}@{m.revision[:12]} are not right: "
                    + ", ".join(bad[:SHOWN]) + more, f"put them there: {self.fix}")
        return "ok", f"{m.repo}@{m.revision[:12]}: {len(m.files)} files, {m.total_bytes} bytes", None

    def check(self, plan, transports) -> dict[str, tuple[str, str, str | None]]:
        hosts = [(h.rank, h.name) for h in plan.hosts if transports.get(h.name) is not None]
        found = each(lambda rn: self.one(rn[0], transports[rn[1]]), hosts, name="weights-check")
        return dict(zip((n for _, n in hosts), found))


class Checks:
    """Several models' checks as one (the served model, then a speculative draft): a host passes
    when every model is right there; the details are joined."""

    def __init__(self, checks: list[WeightsCheck]):
        self.checks = checks

    def check(self, plan, transports) -> dict[str, tuple[str, str, str | None]]:
        results = [c.check(plan, transports) for c in self.checks]
        out = {}
        for host in results[0]:
            rows = [r[host] for r in results if host in r]
            failed = [row for row in rows if row[0] != "ok"]
            pick = failed or rows
            out[host] = (pick[0][0], "; ".join(row[1] for row in (failed or rows)), next((row[2] for row in pick if row[2]), None))
        return out


def weights_check(loaded) -> WeightsCheck | Checks | None:
    """The check when the lock pins the model (and a draft) and inkctl manages its files; else None."""
    if (loaded.hosts is None or host_cache_template(loaded.recipe) is None or not loaded.recipe.model.weights.manage
            or loaded.recipe.model.local):  # a local directory: pinned, but not kept in the Hub cache
        return None
    manifest = read_manifest(loaded)
    checks = [WeightsCheck(loaded, manifest)] if manifest is not None else []
    draft = read_draft_manifest(loaded)
    if draft is not None:
        from dataclasses import replace

        from inkctl.recipe.draft import draft_view

        checks.append(WeightsCheck(replace(loaded, recipe=draft_view(loaded.recipe)), draft))
    if not checks:
        return None
    return checks[0] if len(checks) == 1 else Checks(checks)
