"""A stand-in for perftest's ``ib_write_bw`` on a test host: the same arguments, the same output
(perftest 4.5's RDMA_Write BW Test report with --report_gbits and -D, as published runs show it:
the "Waiting for client to connect..." banner, the parameter block, the local and remote
address lines with IPv4-mapped GIDs, then ``#bytes #iterations BW peak[Gb/sec] BW
average[Gb/sec] MsgRate[Mpps]`` and one row).

The test hosts have no RDMA fabric: server and client meet through files in a directory all hosts
share (``{rendezvous}``, keyed by the server's address and port), and each side's rate comes from
``ib_write_bw.gbps`` beside the script (one number per device, ``DEVICE GBPS`` lines; default
184.0). The client reports the lower of its rail and the server's.

``install(bin_dir, rendezvous, rates)`` writes it; ``SCRIPT`` is the program.
"""

from __future__ import annotations

import os
from pathlib import Path

SCRIPT = r'''#!/usr/bin/python3
import os, sys, time
RDV = {rendezvous!r}
HERE = os.path.dirname(os.path.abspath(__file__))
a = sys.argv[1:]
opt, pos, i = {{}}, [], 0
while i < len(a):
    if a[i] in ("-d", "-i", "-x", "-p", "-D", "-s", "-q", "-m"):
        opt[a[i]] = a[i + 1]; i += 2
    elif a[i].startswith("-"):
        i += 1
    else:
        pos.append(a[i]); i += 1
dev, gid, port = opt.get("-d", "mlx5_0"), opt.get("-x", "0"), opt.get("-p", "18515")
rates = {{}}
try:
    for line in open(os.path.join(HERE, "ib_write_bw.gbps")):
        if line.split():
            rates[line.split()[0]] = float(line.split()[1])
except OSError:
    pass
mine = rates.get(dev, 184.0)
LINE = "-" * 87
def block(local, remote):
    print(LINE)
    print("                    RDMA_Write BW Test")
    print(" Dual-port       : OFF\t\tDevice         : " + dev)
    print(" Number of qps   : 1\t\tTransport type : IB")
    print(" Connection type : RC\t\tUsing SRQ      : OFF")
    print(" PCIe relax order: ON")
    print(" ibv_wr* API     : ON")
    print(" CQ Moderation   : 1")
    print(" Mtu             : 4096[B]")
    print(" Link type       : Ethernet")
    print(" GID index       : " + gid)
    print(" Max inline data : 0[B]")
    print(" rdma_cm QPs\t : OFF")
    print(" Data ex. method : Ethernet")
    print(LINE)
    print(" local address: LID 0000 QPN 0x008a PSN 0xfffb6d RKey 0x238f86 VAddr 0x007dd5a3cfd000")
    print(" GID: " + local)
    print(" remote address: LID 0000 QPN 0x008a PSN 0xaa095c RKey 0x202129 VAddr 0x0074c6b5900000")
    print(" GID: " + remote)
    print(LINE)
def gid_text(addr):
    return "00:00:00:00:00:00:00:00:00:00:255:255:" + ":".join("%02d" % int(x) for x in addr.split("."))
if not pos:  # the server
    me = None
    for line in open(os.path.join(HERE, "ib_write_bw.addrs")) if os.path.exists(os.path.join(HERE, "ib_write_bw.addrs")) else []:
        if line.split() and line.split()[0] == dev:
            me = line.split()[1]
    key = os.path.join(RDV, "%s-%s" % (me, port))
    if os.path.exists(key + ".client"):  # left by a server stopped mid-run: not this run's client
        os.remove(key + ".client")
    with open(key + ".server", "w") as f:
        f.write("%s %s" % (mine, me))
    print("\n************************************\n* Waiting for client to connect... *\n************************************", flush=True)
    for _ in range(600):
        if os.path.exists(key + ".client"):
            break
        time.sleep(0.1)
    else:
        print("Couldn't connect to client", file=sys.stderr); sys.exit(1)
    client_rate, client_addr = open(key + ".client").read().split()
    os.remove(key + ".client"); os.remove(key + ".server")
    block(gid_text(me), gid_text(client_addr))
    rate = min(mine, float(client_rate))
else:
    server = pos[-1]
    key = os.path.join(RDV, "%s-%s" % (server, port))
    for _ in range(100):
        if os.path.exists(key + ".server"):
            break
        time.sleep(0.1)
    else:
        print(" Couldn't connect to %s:%s" % (server, port), file=sys.stderr)
        print("Unable to open file descriptor for socket connection Unable to init the socket connection", file=sys.stderr)
        sys.exit(1)
    server_rate = float(open(key + ".server").read().split()[0])
    me = "0.0.0.0"
    for line in open(os.path.join(HERE, "ib_write_bw.addrs")) if os.path.exists(os.path.join(HERE, "ib_write_bw.addrs")) else []:
        if line.split() and line.split()[0] == dev:
            me = line.split()[1]
    with open(key + ".client", "w") as f:
        f.write("%s %s" % (mine, me))
    block(gid_text(me), gid_text(server))
    rate = min(mine, server_rate)
print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
print(" 65536      %-16d 0.00               %-20.2f %.6f" % (int(rate * 1e9 / 8 / 65536 * 5), rate, rate * 1e9 / 8 / 65536 / 1e6))
print(LINE)
'''


def install(bin_dir: str, rendezvous: str, rails: dict[str, tuple[str, float]]) -> Path:
    """``ib_write_bw`` in ``bin_dir``: ``rails`` maps each device to (its IPv4 address, its Gb/s)."""
    os.makedirs(rendezvous, exist_ok=True)
    p = Path(bin_dir) / "ib_write_bw"
    p.write_text(SCRIPT.format(rendezvous=rendezvous))
    p.chmod(0o755)
    (p.parent / "ib_write_bw.gbps").write_text("".join(f"{d} {g}\n" for d, (_, g) in rails.items()))
    (p.parent / "ib_write_bw.addrs").write_text("".join(f"{d} {a}\n" for d, (a, _) in rails.items()))
    return p


def remove(bin_dir: str) -> None:
    for name in ("ib_write_bw", "ib_write_bw.gbps", "ib_write_bw.addrs"):
        (Path(bin_dir) / name).unlink(missing_ok=True)
