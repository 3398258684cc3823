"""``doctor --network`` below the command line: the measurement (``execute.deploy.netcheck``)
on every pair of hosts the preflight left standing, and what it found (``NetReport``); the
report is rendered by ``cli/show/netreport.py``."""

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
    rails: list = field(default_factory=list)  # railbw.RailResult: ib_write_bw per rail and pair

    @property
    def ok(self) -> bool:
        return (not self.skipped and all(p.verdict == "ok" for p in self.pairs) and not any(x.error for x in self.perfs)
                and all(x.verdict in ("ok", "not measured") for x in self.rails))

    def failure(self) -> str:
        bad = [" <-> ".join(p.hosts) + f": {p.verdict}" for p in self.pairs if p.verdict != "ok"]
        bad += [f"rail {x.client.host}:{x.client.device} -> {x.server.host}:{x.server.device}: {x.verdict}"
                + (f" ({x.gbps:g} Gb/s, floor {x.floor:g})" if x.verdict == "slow" else f" ({x.error})")
                for x in self.rails if x.verdict in ("slow", "failed")]
        bad += [f"{h}: not measured ({why})" for h, why in self.skipped.items()]
        bad += [f"{x.host}: all_reduce_perf failed: {x.error}" for x in self.perfs if x.error]
        return "network check failed: " + "; ".join(bad)

    def hint(self) -> str:
        fixes = [f for p in self.pairs for d in p.diagnoses.values() for _, f in d.problems if f]
        if any((p.probe.error or {}).get("reason") == "no-torch" for p in self.pairs):
            from inkctl.execute.deploy.netcheck import NO_TORCH_HINT

            fixes.append(NO_TORCH_HINT)
        if any(x.verdict == "slow" for x in self.rails):
            fixes.append("a slow rail: check its cable and link (ethtool), its MTU on both hosts and the adapter's PCIe "
                         "link (lspci -vv: LnkSta against LnkCap)")
        if any(p.verdict == "slow" for p in self.pairs):
            fixes.append("a slow pair: check the link's MTU, its PFC/ECN settings (RoCE) and that NCCL uses the "
                         "RDMA port that is cabled, not another one (NCCL_IB_HCA)")
        return "; ".join(dict.fromkeys(fixes)) or "see the table above"

    def as_dict(self) -> dict:
        return {"image": self.image, "ok": self.ok, "pairs": [p.as_dict() for p in self.pairs],
                "hosts": [{"host": x.host, "gpus": x.gpus, "nccl_tests": x.perf is not None, "error": x.error,
                           "busbw_gbs": max((s.busbw_gbs for s in x.perf.sizes), default=None) if x.perf else None,
                           "avg_busbw_gbs": x.perf.avg_busbw_gbs if x.perf else None} for x in self.perfs],
                "skipped": self.skipped, "rails": [x.as_dict() for x in self.rails]}


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
    net = loaded.recipe.network
    for pair in netcheck.pairs(hosts) if hosts else []:
        rep.pairs.append(netcheck.run_pair(plan, transports, addresses, pair, port=port, rdma=net.rdma,
                                           efficiency=net.bandwidth_floor))
    if net.rdma and len(hosts) > 1:
        rep.rails = _rails(plan, transports, hosts, addresses, net)
    for h in hosts:
        rep.perfs.append(netcheck.run_nccl_tests(plan, transports, h, loaded.recipe.hardware.gpus_per_host))
    return rep


def _rails(plan, transports, hosts: list[str], addresses: dict[str, str], net) -> list:
    """ib_write_bw on every rail of every pair of hosts (one pair after the other: they share links)."""
    from inkctl.execute.deploy import netcheck, railbw
    from inkctl.execute.deploy.preflight.fabric import pinned_hcas
    from inkctl.execute.state.fabric import read_host

    rails = {}
    for h in hosts:
        f = read_host(transports[h], addresses[h])
        rails[h] = railbw.rails_of(h, f, f.address or addresses[h], pinned_hcas(plan, h))
    out = []
    for pair in netcheck.pairs(hosts):
        out += railbw.measure_pair(plan, transports, pair, rails, rated=net.rail_gbps, share=net.bandwidth_floor)
    return out
