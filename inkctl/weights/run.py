"""``inkctl weights`` end to end: connect, scan every host, then verify, repair or distribute."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from inkctl.weights.distribute import Site, WeightsPhase, prepare, scan, to_write, wanted
from inkctl.weights.relay import distribute
from inkctl.recipe.manifest import Manifest, host_cache_template


@dataclass
class Report:
    model: str
    revision: str
    total_bytes: int
    hosts: list[str]
    source: str
    verify: bool = False
    bad: dict[str, dict[str, str]] = field(default_factory=dict)  # verify: host -> path -> state
    moved: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    hub_bytes: int = 0
    seconds: float = 0.0
    hub_refused: str = ""
    reattached: list = field(default_factory=list)  # (host, dead host)
    rate: dict[str, float] = field(default_factory=dict)
    bottleneck: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"model": self.model, "revision": self.revision, "bytes": self.total_bytes, "hosts": self.hosts,
                "source": self.source, "verify": self.verify, "bad": self.bad, "moved": self.moved,
                "failed": self.failed, "hub_bytes": self.hub_bytes, "seconds": round(self.seconds, 3),
                "rate": self.rate, "bottleneck": self.bottleneck,
                "reattached": [{"host": h, "dead": d} for h, d in self.reattached], "hub_refused": self.hub_refused,
                "ok": not self.failed and not self.bad}

    def lines(self) -> list[str]:
        out = [f"{self.model}@{self.revision[:12]}: {len(self.hosts)} hosts, {_size(self.total_bytes)} each"]
        for h in self.hosts:
            if h in self.failed:
                out.append(f"  {h}: FAILED: {self.failed[h]}")
            elif h in self.bad:
                out.append(f"  {h}: " + ", ".join(f"{p} {st}" for p, st in sorted(self.bad[h].items())))
            elif h in self.moved:
                how = f", {_size(int(self.rate[h]))}/s, limit: {self.bottleneck[h]}" if self.bottleneck.get(h) else ""
                out.append(f"  {h}: complete, {_size(self.moved[h])} written{how}")
            else:
                out.append(f"  {h}: complete, nothing to do" if not self.verify else f"  {h}: every file verified")
        for h, dead in self.reattached:
            out.append(f"  {h}: {dead} went away mid-copy; {h} resumed from the host before it")
        if self.hub_bytes:
            out.append(f"  from the Hub: {_size(self.hub_bytes)} (once, on {self.source}); {self.seconds:.1f} s in all")
        elif self.moved:
            out.append(f"  {self.seconds:.1f} s in all")
        return out

    def failure_text(self) -> str:
        if self.verify and self.bad and not self.failed:
            n = sum(len(v) for v in self.bad.values())
            return f"{n} file(s) of {self.model} are missing or wrong on {', '.join(sorted(self.bad))}"
        done = [h for h in self.hosts if h not in self.failed]
        return (f"the weights did not reach {', '.join(self.failed)}:\n" +
                "\n".join(f"  {h}: {why}" for h, why in self.failed.items()) +
                (f"\ncomplete on {', '.join(done)}" if done else ""))

    def hint(self, recipe, hosts, token_how: str = "") -> str:
        where = f" --hosts {hosts}" if hosts else ""
        if self.hub_refused:
            return f"{token_how}, then run `inkctl weights {recipe}{where}` again"
        if self.verify and self.bad and not self.failed:
            return f"fix exactly those files: inkctl weights {recipe}{where} --verify --repair"
        return f"fix what is named, then run `inkctl weights {recipe}{where}` again: only what is still missing moves"


def sites_for(loaded, plan, image, transports) -> list[Site]:
    from inkctl.execute.deploy.preflight import host_image
    from inkctl.plan.hostvars import HostContext

    template = host_cache_template(loaded.recipe)
    assert template is not None  # `weights` refuses a recipe whose cache is not on a host path first
    hosts = list(loaded.hosts)
    out = []
    for rank, h in enumerate(hosts):
        ctx = HostContext(host=h, rank=rank, head=hosts[0], placeholder=False)
        ph = plan.host(h.name)
        out.append(Site(h.name, transports[h.name], ph.runtime, host_image(loaded.recipe, plan, image),
                        ctx.expand(template, "model.weights.cache"), f"{ph.state_dir}/weights", h.rank_address,
                        tuple(loaded.recipe.container.security_opt)))
    return out


def run_weights(loaded, plan, image, manifest: Manifest, sink, *, source: str, verify: bool, repair: bool,
                accept_new: bool, hub_url: str, hub_env: dict[str, str], interrupt: threading.Event,
                bwlimit: float | None = None) -> Report:
    from inkctl.execute.hosts.connect import close_all, connect_all

    report = Report(manifest.repo, manifest.revision, manifest.total_bytes, [h.name for h in plan.hosts], source, verify)
    transports = connect_all(list(loaded.hosts), accept_new=accept_new)
    try:
        sites = sites_for(loaded, plan, image, transports)
        for s in sites:
            s.stop = interrupt
            sink.emit(WeightsPhase(s.name, "connected"))
        if verify:  # the re-hash runs onhost.py; the quick scan needs nothing there first
            prepare(sites)
        scan(manifest, sites, rehash=verify, sink=sink)
        if verify:
            report.bad = {s.name: {p: s.scan["files"][p]["state"] for p in wanted(s)} for s in sites if s.scan and wanted(s)}
            report.failed = {s.name: s.error for s in sites if s.error}
            if not repair or not report.bad:
                return report
            report.bad = {}
        src = next(s for s in sites if s.name == source)
        out = distribute(manifest, sites, src, hub_url=hub_url, hub_env=hub_env, sink=sink, bwlimit=bwlimit)
        report.moved, report.failed, report.hub_bytes, report.seconds = out.moved, out.failed, out.hub_bytes, out.seconds
        report.hub_refused, report.reattached, report.rate, report.bottleneck = (out.hub_refused, out.reattached,
                                                                                 out.rate, out.bottleneck)
        return report
    finally:
        close_all(transports)


def _size(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n / (1 << k):.1f} {unit}"
    return f"{n} B"


__all__ = ["Report", "run_weights", "sites_for", "to_write"]
