"""``doctor --network``: measure the network before trusting it.

For every pair of the recipe's hosts, one container per host from the engine image (its torch,
its NCCL, the ranks' NCCL environment, the ranks' GPUs and devices) runs a real NCCL all-reduce
(``allreduce_probe.py``) with NCCL_DEBUG=INFO; rank 0 prints bus bandwidth per message size,
both print which transport NCCL chose. Where the image has nccl-tests' ``all_reduce_perf``,
each host also runs it over its own GPUs (without MPI nccl-tests cannot span hosts). What is
read back is held against the link: the interface's or RDMA port's rate from /sys, about
80 % of it expected as bus bandwidth at large messages (200 Gb/s RoCE -> 20 GB/s).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from inkctl.execute.supervise.nccl import RankNet

TAG = "inkctl-allreduce"
SCRIPT = Path(__file__).with_name("allreduce_probe.py")
EFFICIENCY = 0.8  # bus bandwidth a healthy link gives at large messages, of its line rate
PORT = 29580

# nccl-tests: "  size  count  type  redop  root  time algbw busbw #wrong  time algbw busbw #wrong"
_PERF_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)")
_AVG = re.compile(r"^# Avg bus bandwidth\s*:\s*([\d.]+)")
_VIA = re.compile(r"NCCL INFO Channel \d+/\d+ : .* via (\S+)")
_QP = re.compile(r"Call to ibv_modify_qp failed with (\d+) ([^,]+), (?:on dev (\S+), )?local GID (\S+), remote GID (\S+)")
_WARN = re.compile(r"NCCL WARN (.*)")


@dataclass(frozen=True)
class Size:
    bytes: int
    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    wrong: int


@dataclass
class ProbeOutput:
    """What one run of allreduce_probe.py printed (rank 0's lines carry the numbers)."""

    start: dict | None = None
    sizes: list[Size] = field(default_factory=list)
    error: dict | None = None
    done: bool = False


def parse_probe(text: str) -> ProbeOutput:
    out = ProbeOutput()
    for line in text.splitlines():
        if not line.startswith(TAG + " "):
            continue
        try:
            d = json.loads(line[len(TAG) + 1:])
        except ValueError:
            continue
        kind = d.get("kind")
        if kind == "start":
            out.start = d
        elif kind == "size":
            out.sizes.append(Size(int(d["bytes"]), float(d["time_us"]), float(d["algbw_gbs"]), float(d["busbw_gbs"]),
                                  int(d.get("wrong", 0))))
        elif kind == "error":
            out.error = d
        elif kind == "done":
            out.done = True
    return out


@dataclass
class PerfOutput:
    """nccl-tests' all_reduce_perf table (out-of-place columns) and its summary line."""

    sizes: list[Size] = field(default_factory=list)
    avg_busbw_gbs: float | None = None
    version: str | None = None


def parse_nccl_tests(text: str) -> PerfOutput:
    out = PerfOutput()
    for line in text.splitlines():
        if line.startswith("# nccl-tests version"):
            out.version = line.split()[3]
        elif m := _AVG.match(line):
            out.avg_busbw_gbs = float(m.group(1))
        elif not line.startswith("#") and (m := _PERF_ROW.match(line)):
            wrong = m.group(9)
            out.sizes.append(Size(int(m.group(1)), float(m.group(6)), float(m.group(7)), float(m.group(8)),
                                  int(wrong) if wrong.isdigit() else 0))
    return out


@dataclass
class Diagnosis:
    """What NCCL said about the network in one rank's output, and what is wrong with it."""

    net: RankNet
    via: set = field(default_factory=set)  # channel transports: NET/IB/0, NET/Socket/0, P2P/CUMEM, SHM
    problems: list = field(default_factory=list)  # (what, fix)

    @property
    def transport(self) -> str:
        n = self.net
        if n.network == "IB":
            return f"IB {n.ib_device}" if n.ib_device else "IB"
        if n.network == "Socket":
            return f"Socket {n.interface}" if n.interface else "Socket"
        return n.network or "unknown"


def diagnose(text: str, rdma_asked: bool = False) -> Diagnosis:
    net = RankNet()
    d = Diagnosis(net)
    warns = []
    for line in text.splitlines():
        net.feed(line)
        if m := _VIA.search(line):
            d.via.add(m.group(1))
        elif m := _QP.search(line):
            dev = f" on {m.group(3)}" if m.group(3) else ""
            d.problems.append((
                f"RDMA queue pair setup failed{dev}: {m.group(1)} {m.group(2).strip()} (local GID {m.group(4)}, "
                f"remote GID {m.group(5)})",
                "the two sides use different GID types or an unrouted GID: set NCCL_IB_GID_INDEX (network.nccl_env) "
                "to the RoCE v2 GID both hosts have (show_gids lists them; often 3), or pin NCCL_IB_HCA to the "
                "ports that are cabled to each other"))
        elif m := _WARN.search(line):
            warns.append(m.group(1).strip())
    if net.no_interface:
        d.problems.append(("NCCL found no socket interface matching NCCL_SOCKET_IFNAME",
                           "set nccl_socket_ifname (inventory) or network.socket_ifname to an interface the host has "
                           "(ip -br link), one that reaches the other hosts"))
    if rdma_asked and net.network == "Socket":
        d.problems.append((f"NCCL fell back to TCP sockets{' over ' + net.interface if net.interface else ''} "
                           "where the recipe asks for RDMA" + ("; NET/IB : No device found" if net.no_ib_device else ""),
                           "check the RDMA adapters (ibv_devices), NCCL_IB_HCA and that the container gets /dev/infiniband"))
    for w in warns:
        if not any(w in p[0] for p in d.problems):
            d.problems.append((f"NCCL WARN {w}", ""))
    return d


def expected_gbs(link_gbps: float | None, efficiency: float = EFFICIENCY) -> float | None:
    """Bus bandwidth a healthy link of this line rate (Gb/s) gives at large messages, in GB/s
    (``efficiency``: the share of the line rate, network.bandwidth_floor)."""
    return None if not link_gbps else link_gbps / 8 * efficiency


# the host's link rates: each interface's speed (Mb/s), each RDMA port's rate ("200 Gb/sec (4X HDR)")
LINKS = "\n".join([
    'for d in /sys/class/net/*; do s=$(cat "$d/speed" 2>/dev/null) && echo "net ${d##*/} $s"; done',
    'for p in "${INKCTL_SYSFS_ROOT:-/sys}"/class/infiniband/*/ports/*; do [ -e "$p/rate" ] || continue; d=${p%/ports/*};'
    ' echo "ib ${d##*/}:${p##*/} $(cat "$p/rate")"; done',
    "",
])


def parse_links(text: str) -> dict[str, float]:
    """name -> Gb/s ("eth0", "mlx5_0:1"); negative or unknown speeds are left out."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        kind, name, value = parts[0], parts[1], parts[2]
        try:
            v = float(value)
        except ValueError:
            continue
        if v <= 0:
            continue
        out[name] = v / 1000 if kind == "net" else v
    return out


def link_rate(links: dict[str, float], diag: Diagnosis) -> tuple[str, float] | None:
    """The line rate of what NCCL used: its RDMA port, else its socket interface."""
    n = diag.net
    if n.network == "IB" and n.ib_device:
        dev = n.ib_device if ":" in n.ib_device else f"{n.ib_device}:1"
        if dev in links:
            return dev, links[dev]
    if n.interface and n.interface in links:
        return n.interface, links[n.interface]
    return None


@dataclass
class PairResult:
    hosts: tuple[str, ...]
    probe: ProbeOutput
    diagnoses: dict  # host -> Diagnosis
    link: tuple[str, float] | None = None
    error: str = ""
    efficiency: float = EFFICIENCY

    @property
    def busbw_gbs(self) -> float | None:
        return max((s.busbw_gbs for s in self.probe.sizes), default=None)

    @property
    def expected(self) -> float | None:
        return expected_gbs(self.link[1], self.efficiency) if self.link else None

    @property
    def verdict(self) -> str:
        if self.error or self.probe.error or not self.probe.sizes:
            return "failed"
        if any(s.wrong for s in self.probe.sizes):
            return "wrong results"
        if any(d.problems for d in self.diagnoses.values()):
            return "problem"
        if self.expected is not None and self.busbw_gbs is not None and self.busbw_gbs < self.expected:
            return "slow"
        return "ok"

    def as_dict(self) -> dict:
        return {"hosts": list(self.hosts), "verdict": self.verdict, "busbw_gbs": self.busbw_gbs,
                "expected_gbs": self.expected, "link": list(self.link) if self.link else None,
                "transport": {h: d.transport for h, d in self.diagnoses.items()},
                "via": {h: sorted(d.via) for h, d in self.diagnoses.items()},
                "problems": [{"host": h, "what": w, "fix": f} for h, d in self.diagnoses.items() for w, f in d.problems],
                "sizes": [s.__dict__ for s in self.probe.sizes], "torch": (self.probe.start or {}).get("torch"),
                "nccl": (self.probe.start or {}).get("nccl"), "error": self.error or (self.probe.error or {}).get("detail", "")}


NO_TORCH_HINT = ("the all-reduce runs on the engine image's own torch and NCCL; this image has no torch "
                 "(an engine image has it: check engine.image)")


# ------------------------------------------------------------------------------ on the hosts

def _rank_spec(plan, host: str):
    from inkctl.plan.step import Run

    for step in plan.steps():
        if isinstance(step, Run) and step.host == host and step.container is not None:
            return step.container
    raise ValueError(f"the plan starts no container on {host}")


def check_spec(plan, host: str, *, name: str, env: dict[str, str], command: tuple[str, ...], entrypoint: str):
    """The rank's container (image, GPUs, devices, NCCL environment, host network) running a
    check instead of the engine: no mounts, no env file, its own label (not the deployment's)."""
    from dataclasses import replace

    spec = _rank_spec(plan, host)
    base = [(k, v) for k, v in spec.env if k not in env]
    return replace(spec, name=name, entrypoint=entrypoint, command=command, mounts=(), env_file=None,
                   labels=(("inkctl.netcheck", plan.deployment),), ports=(),
                   env=tuple(base + sorted(env.items())))


def run_pair(plan, transports, addresses: dict[str, str], pair: tuple[str, ...], *, port: int = PORT,
             sizes: tuple[int, int] = (1 << 20, 1 << 28), iters: int = 20, timeout: float = 180,
             rdma: bool = False, efficiency: float = EFFICIENCY) -> PairResult:
    """One container per host of ``pair`` (rank 0 first), all-reduce across them; then read."""
    from inkctl.execute.hosts.fanout import each
    from inkctl.execute.hosts.transport import HostError
    from inkctl import runtimes

    script = SCRIPT.read_text()
    world = len(pair)

    def one(i_host):
        i, host = i_host
        rt = plan.host(host).runtime
        name = f"inkctl-netcheck-{plan.deployment}-{i}"
        env = {"RANK": str(i), "WORLD_SIZE": str(world), "LOCAL_RANK": "0", "MASTER_ADDR": addresses[pair[0]],
               "MASTER_PORT": str(port), "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV",
               "PYTHONUNBUFFERED": "1"}
        spec = check_spec(plan, host, name=name, env=env, entrypoint="python3",
                          command=("-c", script, str(sizes[0]), str(sizes[1]), str(iters)))
        t = transports[host]
        t.run(runtimes.get(rt).remove(name), timeout=30)  # a check left by an interrupted doctor
        try:
            res = t.run(runtimes.get(rt).run_once(spec), timeout=timeout)
            text, err = res.text() + res.err_text(), ""
            if res.exit_code not in (0, 1, 3):
                err = f"exit {res.exit_code}: " + (text.strip().splitlines() or ["no output"])[-1][-200:]
        except HostError as e:
            text, err = "", f"{e.reason} (after {timeout:g} s: NCCL may be waiting for a peer it cannot reach)"
            t.run(runtimes.get(rt).remove(name), timeout=30)
        links = parse_links(t.run(("sh", "-c", LINKS), timeout=30).text())
        return host, text, err, links

    got = each(one, list(enumerate(pair)), name="netcheck")
    texts = {h: text for h, text, _, _ in got}
    errors = [f"{h}: {e}" for h, _, e, _ in got if e]
    diags = {h: diagnose(texts[h], rdma) for h in pair}
    probe = parse_probe(texts[pair[0]])
    if probe.error is None:
        for h in pair[1:]:
            other = parse_probe(texts[h])
            if other.error is not None:
                probe.error = other.error
    links = {h: lk for h, _, _, lk in got}
    rates = [r for r in (link_rate(links[h], diags[h]) for h in pair) if r is not None]
    link = min(rates, key=lambda r: r[1]) if rates else None
    return PairResult(hosts=tuple(pair), probe=probe, diagnoses=diags, link=link, error="; ".join(errors),
                      efficiency=efficiency)


@dataclass
class HostPerf:
    host: str
    perf: PerfOutput | None  # None: the image has no all_reduce_perf
    gpus: int
    error: str = ""


NCCL_TESTS = 'command -v all_reduce_perf >/dev/null 2>&1 || { echo "@@no-nccl-tests"; exit 0; }; exec all_reduce_perf "$@"'


def run_nccl_tests(plan, transports, host: str, gpus: int, *, timeout: float = 300) -> HostPerf:
    """nccl-tests' all_reduce_perf over the host's GPUs, when the image has it."""
    from inkctl.execute.hosts.transport import HostError
    from inkctl import runtimes

    rt = plan.host(host).runtime
    name = f"inkctl-netcheck-{plan.deployment}-perf"
    spec = check_spec(plan, host, name=name, env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"},
                      entrypoint="sh", command=("-c", NCCL_TESTS, "inkctl-nccl-tests", "-b", "8M", "-e", "1G", "-f", "4",
                                                "-g", str(gpus)))
    t = transports[host]
    t.run(runtimes.get(rt).remove(name), timeout=30)
    try:
        res = t.run(runtimes.get(rt).run_once(spec), timeout=timeout)
    except HostError as e:
        t.run(runtimes.get(rt).remove(name), timeout=30)
        return HostPerf(host, None, gpus, e.reason)
    text = res.text() + res.err_text()
    if "@@no-nccl-tests" in text:
        return HostPerf(host, None, gpus)
    perf = parse_nccl_tests(text)
    err = "" if res.ok and perf.sizes else f"exit {res.exit_code}: " + (text.strip().splitlines() or ["no output"])[-1][-200:]
    return HostPerf(host, perf, gpus, err)


def pairs(hosts: list[str]) -> list[tuple[str, ...]]:
    """Every pair of hosts (rank order); one host alone is its own check."""
    if len(hosts) == 1:
        return [(hosts[0],)]
    return [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1:]]
