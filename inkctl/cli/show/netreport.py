"""``doctor --network``: what the measurement (``inkctl.api.observe.network``) found, as text."""

from __future__ import annotations

from inkctl.api.observe.network import NetReport


def render(rep: NetReport) -> str:
    lines = [f"network: NCCL all-reduce in {rep.image}"]
    first = next((p.probe.start for p in rep.pairs if p.probe.start), None)
    if first:
        lines[0] += f" (torch {first.get('torch')}, NCCL {first.get('nccl')})"
    lines.append(f"{'pair':<20}{'transport':<18}{'busbw':>8}{'link':>8}{'expect':>8}  verdict")
    for p in rep.pairs:
        lines += _pair(p)
    lines.append("(busbw and expect in GB/s; expect: network.bandwidth_floor of the link's line rate)")
    lines += _rails(rep)
    lines += [_perf(x) for x in rep.perfs]
    for h, why in rep.skipped.items():
        lines += _wrap(f"{h}: not measured: {why}", "")
    return "\n".join(ln for line in lines for ln in (_wrap(line, "") if len(line) > 80 else [line]))


def _pair(p) -> list[str]:
    """One host pair's all-reduce: its row, why it fell short, each host's problems and fixes."""
    d0 = p.diagnoses[p.hosts[0]]
    bw = f"{p.busbw_gbs:.1f}" if p.busbw_gbs is not None else "-"
    link = f"{p.link[1]:g}G" if p.link else "?"
    exp = f"{p.expected:.1f}" if p.expected is not None else "-"
    out = [f"{' <-> '.join(p.hosts)[:19]:<20}{d0.transport[:17]:<18}{bw:>8}{link:>8}{exp:>8}  {p.verdict}"]
    why = p.error or (p.probe.error or {}).get("detail", "")
    if (p.probe.error or {}).get("reason") == "no-torch":
        why = "the image has no torch: " + why
    if why:
        out += _wrap(why, "  ")
    for h, d in p.diagnoses.items():
        for what, fix in d.problems:
            out += _wrap(f"{h}: {what}", "  ")
            if fix:
                out += _wrap(f"fix: {fix}", "    ")
    return out


def _perf(x) -> str:
    """One host's nccl-tests all_reduce_perf across its own GPUs."""
    if x.perf is None and not x.error:
        return f"{x.host}: all_reduce_perf is not in the image (nccl-tests): intra-host not measured"
    if x.error:
        return f"{x.host}: all_reduce_perf failed: {x.error}"
    best = max((s.busbw_gbs for s in x.perf.sizes), default=0.0)
    return (f"{x.host}: all_reduce_perf over {x.gpus} GPU(s): busbw up to {best:.1f} GB/s"
            + (f", average {x.perf.avg_busbw_gbs:g}" if x.perf.avg_busbw_gbs is not None else ""))


def _rails(rep: NetReport) -> list[str]:
    """ib_write_bw per rail: Gb/s against the link's rate and the floor."""
    if not rep.rails:
        return []
    out = ["RDMA per rail: ib_write_bw (Gb/s)", f"{'rail':<40}{'Gb/s':>8}{'link':>7}{'floor':>7}  verdict"]
    for x in rep.rails:
        name = f"{x.client.host}:{x.client.device} -> {x.server.host}:{x.server.device}"
        bw = f"{x.gbps:.1f}" if x.gbps is not None else "-"
        link = f"{x.expected:g}" if x.expected else "?"
        floor = f"{x.floor:.0f}" if x.floor is not None else "-"
        out.append(f"{name[:39]:<40}{bw:>8}{link:>7}{floor:>7}  {x.verdict}")
        if x.error:
            out += _wrap(x.error, "  ")
        elif x.verdict == "not measured":
            out += _wrap("no ib_write_bw (perftest) on the hosts or in the image", "  ")
    return out


def _wrap(text: str, indent: str) -> list[str]:
    import textwrap

    return textwrap.wrap(text, 80, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_long_words=True, break_on_hyphens=False) or [indent]
