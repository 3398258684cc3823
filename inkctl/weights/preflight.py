"""Before ``up`` (and in ``doctor``): does every host have the pinned files? Names and sizes
only, one ``stat`` round trip per host, no container: fast enough to run before every launch.
(``inkctl weights --verify`` re-hashes them.)"""

from __future__ import annotations

from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import HostError
from inkctl.recipe.manifest import Manifest, host_cache_template, read_manifest, repo_folder

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


def weights_check(loaded) -> WeightsCheck | None:
    """The check when the lock pins the model and inkctl manages its files; else None."""
    if (loaded.hosts is None or host_cache_template(loaded.recipe) is None or not loaded.recipe.model.weights.manage
            or loaded.recipe.model.local):  # a local directory: pinned, but not kept in the Hub cache
        return None
    manifest = read_manifest(loaded)
    return WeightsCheck(loaded, manifest) if manifest is not None else None
