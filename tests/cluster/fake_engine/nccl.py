"""NCCL's own INFO lines (2.28 format, as captured in tests/fixtures/nccl/) for the network
the fake engine "chose", printed when NCCL_DEBUG=INFO, like the real library does at the
first collective.

Which network: FAKE_NCCL_NET=ib|socket; unset, what real NCCL would do here: InfiniBand/RoCE
only when an adapter exists (/sys/class/infiniband, and the one NCCL_IB_HCA names) and
NCCL_IB_DISABLE is not 1, else the silent fallback to TCP sockets. NCCL_SOCKET_IFNAME that
does not exist ends like real NCCL: ``Bootstrap : no socket interface found`` and a
DistBackendError.
"""

import os
import socket

IB_SYS = "/sys/class/infiniband"


def _ifaces():
    try:
        return sorted(n for n in os.listdir("/sys/class/net") if n != "lo")
    except OSError:
        return []


def _address(ifname):
    try:
        import fcntl
        import struct

        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", ifname[:15].encode()))  # SIOCGIFADDR
        return socket.inet_ntoa(packed[20:24])
    except OSError:
        return "0.0.0.0"


def _hcas():
    try:
        return sorted(os.listdir(IB_SYS))
    except OSError:
        return []


def choose():
    """(network, device or interface): what this NCCL would use."""
    forced = os.environ.get("FAKE_NCCL_NET", "").strip().lower()
    wanted = [h.split(":")[0].lstrip("^=") for h in os.environ.get("NCCL_IB_HCA", "").split(",") if h]
    hcas = [h for h in _hcas() if not wanted or h in wanted]
    if forced == "ib" or (forced != "socket" and hcas and os.environ.get("NCCL_IB_DISABLE") != "1"):
        return "IB", (hcas or wanted or ["mlx5_0"])[0]
    return "Socket", None


def say(rank, nranks, fatal):
    """Print what NCCL prints at communicator init (INIT and NET subsystems)."""
    if os.environ.get("NCCL_DEBUG", "").upper() != "INFO":
        return
    pid = os.getpid()
    head = f"{socket.gethostname()}:{pid}:{pid} [0]"

    def info(msg):
        print(f"{head} NCCL INFO {msg}", flush=True)

    info("NCCL version 2.28.9+cuda13.0")
    ifname = os.environ.get("NCCL_SOCKET_IFNAME", "")
    present = _ifaces()
    if ifname:
        info(f"NCCL_SOCKET_IFNAME set by environment to {ifname}")
        names = [n for n in ifname.lstrip("^=").split(",") if n]
        usable = [n for n in present if any(n.startswith(w) for w in names)]
        if not usable:
            print(f"{head} bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found", flush=True)
            fatal("NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3135, invalid usage "
                  "(run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9\nBootstrap : no socket interface found",
                  exc="torch.distributed.DistBackendError")
    else:
        usable = present
    iface = (usable or ["eth0"])[0]
    addr = _address(iface)
    info("NET/Plugin: Could not find: libnccl-net.so")
    network, dev = choose()
    if network == "IB":
        info(f"NET/IB : Using [0]{dev}:1/RoCE [RO]; OOB {iface}:{addr}<0>")
        info("Initialized NET plugin IB")
        info("Assigned NET plugin IB to comm")
        info("Using network IB")
    else:
        if os.environ.get("NCCL_IB_DISABLE") == "1":
            info("NCCL_IB_DISABLE set by environment to 1.")
        else:
            info("NET/IB : No device found.")
            info(f"NET/IB : Using [RO]; OOB {iface}:{addr}<0>")
        info("Failed to initialize NET plugin IB")
        info(f"NET/Socket : Using [0]{iface}:{addr}<0>")
        info("Initialized NET plugin Socket")
        info("Assigned NET plugin Socket to comm")
        info("Using network Socket")
    info(f"ncclCommInitRankConfig comm 0x22a01d80 rank {rank} nranks {nranks} cudaDev 0 nvmlDev 0 busId 60 "
         "commId 0x6dbd04bf660b163f - Init COMPLETE")
