"""``doctor --network``: run the measurement (``execute.netcheck``) and say what it found."""

from __future__ import annotations

from dataclasses import dataclass, field

# a host whose probe could not connect, run the runtime or find the image is left out
_NEEDED = ("ssh", "runtime", "image")


@dataclass
class NetReport:
    image: str
    pairs: list = field(default_factory=list)  # netcheck.PairResult
    perfs: list = field(default_factory=list)  # netcheck.HostPerf
    skipped: dict = field(default_factory=dict)  # host -> why

    @property
    def ok(self) -> bool:
        return not self.skipped and all(p.verdict == "ok" for p in self.pairs) and not any(x.error for x in self.perfs)

    def failure(self) -> str:
        bad = [" <-> ".join(p.hosts) + f": {p.verdict}" for p in self.pairs if p.verdict != "ok"]
        bad += [f"{h}: not measured ({why})" for h, why in self.skipped.items()]
        bad += [f"{x.host}: all_reduce_perf failed: {x.error}" for x in self.perfs if x.error]
        return "network check failed: " + "; ".join(bad)

    def hint(self) -> str:
        fixes = [f for p in self.pairs for d in p.diagnoses.values() for _, f in d.problems if f]
        if any((p.probe.error or {}).get("reason") == "no-torch" for p in self.pairs):
            from inkctl.execute.deploy.netcheck import NO_TORCH_HINT

            fixes.append(NO_TORCH_HINT)
        if any(p.verdict == "slow" for p in self.pairs):
            fixes.append("a slow pair: check the link's MTU, its PFC/ECN settings (RoCE) and that NCCL uses the "
                         "RDMA port that is cabled, not another one (NCCL_IB_HCA)")
        return "; ".join(dict.fromkeys(fixes)) or "see the table above"

    def as_dict(self) -> dict:
        return {"image": self.image, "ok": self.ok, "pairs": [p.as_dict() for p in self.pairs],
                "hosts": [{"host": x.host, "gpus": x.gpus, "nccl_tests": x.perf is not None, "error": x.error,
                           "busbw_gbs": max((s.busbw_gbs for s in x.perf.sizes), default=None) if x.perf else None,
                           "avg_busbw_gbs": x.perf.avg_busbw_gbs if x.perf else None} for x in self.perfs],
                "skipped": self.skipped}


def measure(loaded, plan, transports, results, port: int) -> NetReport:
    from inkctl.execute.deploy import netcheck
    from inkctl.execute.deploy.preflight import planned_image

    failed = {}
    for r in results:
        if r.check in _NEEDED and r.status == "fail" and r.host not in failed:
            failed[r.host] = f"{r.check}: {r.detail}"
    rep = NetReport(image=planned_image(plan) or loaded.recipe.engine.image.ref, skipped=failed)
    hosts = [h.name for h in plan.hosts if h.name not in failed and h.name in transports]
    addresses = {h.name: h.rank_address for h in loaded.hosts}
    rdma = loaded.recipe.network.rdma
    for pair in netcheck.pairs(hosts) if hosts else []:
        rep.pairs.append(netcheck.run_pair(plan, transports, addresses, pair, port=port, rdma=rdma))
    for h in hosts:
        rep.perfs.append(netcheck.run_nccl_tests(plan, transports, h, loaded.recipe.hardware.gpus_per_host))
    return rep


def render(rep: NetReport) -> str:
    lines = [f"network: NCCL all-reduce in {rep.image}"]
    first = next((p.probe.start for p in rep.pairs if p.probe.start), None)
    if first:
        lines[0] += f" (torch {first.get('torch')}, NCCL {first.get('nccl')})"
    lines.append(f"{'pair':<20}{'transport':<18}{'busbw':>8}{'link':>8}{'expect':>8}  verdict")
    for p in rep.pairs:
        d0 = p.diagnoses[p.hosts[0]]
        bw = f"{p.busbw_gbs:.1f}" if p.busbw_gbs is not None else "-"
        link = f"{p.link[1]:g}G" if p.link else "?"
        exp = f"{p.expected:.1f}" if p.expected is not None else "-"
        lines.append(f"{' <-> '.join(p.hosts)[:19]:<20}{d0.transport[:17]:<18}{bw:>8}{link:>8}{exp:>8}  {p.verdict}")
        why = p.error or (p.probe.error or {}).get("detail", "")
        if (p.probe.error or {}).get("reason") == "no-torch":
            why = "the image has no torch: " + why
        if why:
            lines += _wrap(why, "  ")
        for h, d in p.diagnoses.items():
            for what, fix in d.problems:
                lines += _wrap(f"{h}: {what}", "  ")
                if fix:
                    lines += _wrap(f"fix: {fix}", "    ")
    lines.append("(busbw and expect in GB/s; expect: 80 % of the link's line rate)")
    for x in rep.perfs:
        if x.perf is None and not x.error:
            lines.append(f"{x.host}: all_reduce_perf is not in the image (nccl-tests): intra-host not measured")
        elif x.error:
            lines.append(f"{x.host}: all_reduce_perf failed: {x.error}")
        else:
            best = max((s.busbw_gbs for s in x.perf.sizes), default=0.0)
            lines.append(f"{x.host}: all_reduce_perf over {x.gpus} GPU(s): busbw up to {best:.1f} GB/s"
                         + (f", average {x.perf.avg_busbw_gbs:g}" if x.perf.avg_busbw_gbs is not None else ""))
    for h, why in rep.skipped.items():
        lines += _wrap(f"{h}: not measured: {why}", "")
    return "\n".join(ln for line in lines for ln in (_wrap(line, "") if len(line) > 80 else [line]))


def _wrap(text: str, indent: str) -> list[str]:
    import textwrap

    return textwrap.wrap(text, 80, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=True, break_on_hyphens=False) or [indent]
