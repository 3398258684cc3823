"""``doctor --network``, rail by rail: perftest's ``ib_write_bw`` between each pair of hosts on
every rail NCCL gets (the rails of the port that carries each host's cluster address, or the
pinned NCCL_IB_HCA), the i-th rail of one host against the i-th of the other, each on its own
RoCE v2 GID and address. Run on the hosts where they have ``ib_write_bw``, else in the engine
image (the ranks' container: /dev/infiniband, host network), else said to be unmeasured.

What a rail gives is held against what its link should: ``network.rail_gbps``, else the rate its
port reports; below ``network.bandwidth_floor`` of that (80 % unless the recipe says) it fails.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from inkctl.execute.state import fabric as fab

PERFTEST = 'command -v ib_write_bw >/dev/null 2>&1 || { echo "@@no-perftest"; exit 0; }; exec ib_write_bw "$@"'
PORT = 18515  # perftest's default port
DURATION_S = 5
READY = "Waiting for client to connect"


@dataclass(frozen=True)
class Rail:
    """One side of a rail test: the host, the device, its RoCE v2 GID index and IPv4 address."""

    host: str
    device: str
    gid: int
    address: str
    link_gbps: float | None


@dataclass
class RailResult:
    client: Rail
    server: Rail
    gbps: float | None = None  # BW average[Gb/sec]
    expected: float | None = None  # the link's rate (or network.rail_gbps)
    floor: float | None = None
    where: str = ""  # "host" or "image"
    error: str = ""

    @property
    def verdict(self) -> str:
        if self.error:
            return "failed"
        if self.gbps is None:
            return "not measured"
        if self.floor is not None and self.gbps < self.floor:
            return "slow"
        return "ok"

    def as_dict(self) -> dict:
        return {"client": self.client.__dict__, "server": self.server.__dict__, "gbps": self.gbps, "expected_gbps": self.expected,
                "floor_gbps": self.floor, "where": self.where, "verdict": self.verdict, "error": self.error}


def parse_bw(text: str) -> float | None:
    """The BW average[Gb/sec] of the last result row under perftest's header."""
    found, header = None, False
    for line in text.splitlines():
        if "BW average[Gb/sec]" in line:
            header = True
            continue
        f = line.split()
        if header and len(f) >= 4 and f[0].isdigit() and f[1].isdigit():
            try:
                found = float(f[3])
            except ValueError:
                continue
    return found


def rails_of(host: str, f: fab.Fabric, address: str, pinned: list[str]) -> list[Rail]:
    """The rails NCCL gets on this host, each with its RoCE v2 IPv4 GID."""
    d = fab.derive(f, address)
    names = pinned or (list(d.hcas) if d else [])
    out = []
    for n in names:
        r = f.rail(n)
        g = next((g for g in (r.gids if r else ()) if g.roce_v2 and g.ipv4), None)
        if r is not None and g is not None and g.ipv4:
            out.append(Rail(host, n, g.index, g.ipv4, r.gbps))
    return out


def _args(rail: Rail, port: int) -> list[str]:
    return ["-d", rail.device, "-i", "1", "-x", str(rail.gid), "-F", "--report_gbits", "-D", str(DURATION_S), "-p", str(port)]


def _argv(plan, host: str, where: str, args: list[str], name: str) -> tuple[str, ...]:
    if where == "host":
        return ("sh", "-c", PERFTEST, "inkctl-perftest", *args)
    from inkctl.execute.deploy.netcheck import check_spec
    from inkctl import runtimes

    spec = check_spec(plan, host, name=name, env={}, entrypoint="sh", command=("-c", PERFTEST, "inkctl-perftest", *args))
    return tuple(runtimes.get(plan.host(host).runtime).run_once(spec))


def where_perftest(transports, hosts: tuple[str, ...]) -> str:
    """"host" when every host of the pair has ib_write_bw, else "image" (tried in the container)."""
    for h in hosts:
        res = transports[h].run(("sh", "-c", "command -v ib_write_bw"), timeout=30)
        if not res.ok:
            return "image"
    return "host"


def run_rail(plan, transports, client: Rail, server: Rail, where: str, *, expected: float | None, share: float,
             port: int = PORT, timeout: float = 60) -> RailResult:
    """The server on one host, then the client on the other once the server waits for it."""
    from inkctl.execute.hosts.transport import HostError

    out = RailResult(client, server, expected=expected, floor=expected * share if expected else None, where=where)
    ready, lines = threading.Event(), []
    stop = threading.Event()

    def on_line(line: str) -> None:
        lines.append(line)
        if READY in line or "@@no-perftest" in line:
            ready.set()

    def serve() -> None:
        try:
            transports[server.host].stream(_argv(plan, server.host, where, _args(server, port), "inkctl-railbw-s"),
                                           on_line, stop)
        except HostError as e:
            lines.append(f"@@error {e.reason}")
        ready.set()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    waited = ready.wait(timeout)
    if not waited or any("@@no-perftest" in x or x.startswith("@@error") for x in lines):
        stop.set()
        th.join(5)
        why = next((x[8:] for x in lines if x.startswith("@@error")), "" if waited else
                   f"ib_write_bw did not wait for a client within {timeout:g} s: " + (lines[-1] if lines else "no output"))
        out.error = why and f"{server.host}: {why}"
        return out  # without an error: no ib_write_bw there, not measured
    try:
        res = transports[client.host].run(_argv(plan, client.host, where, [*_args(client, port), server.address],
                                                "inkctl-railbw-c"), timeout=timeout)
        text = res.text() + res.err_text()
        out.gbps = parse_bw(text)
        if out.gbps is None:
            out.error = f"{client.host}: exit {res.exit_code}: " + (text.strip().splitlines() or ["no output"])[-1][-200:]
    except HostError as e:
        out.error = f"{client.host}: {e.reason}"
    finally:
        th.join(15)  # the server ends once it has reported too; stopped only if it does not
        stop.set()
        th.join(5)
    return out


def measure_pair(plan, transports, pair: tuple[str, ...], rails: dict[str, list[Rail]], *, rated: float | None,
                 share: float) -> list[RailResult]:
    """Every rail of ``pair``: the i-th rail of the first host writing to the i-th of the second."""
    a, b = pair[0], pair[-1]
    where = where_perftest(transports, pair)
    out = []
    for ra, rb in zip(rails.get(a, []), rails.get(b, [])):
        links = [x for x in (ra.link_gbps, rb.link_gbps) if x]
        expected = rated or (min(links) if links else None)
        out.append(run_rail(plan, transports, ra, rb, where, expected=expected, share=share))
    return out
