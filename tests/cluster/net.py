"""The network: a bridge inkbr0 (10.231.0.1/24) on the control side, one netns per host joined
to it by a veth pair (inkv<i> on the bridge, eth0 inside at 10.231.0.(10+i))."""

import os
import re
import shutil

from .proc import run

BRIDGE = "inkbr0"
GATEWAY = "10.231.0.1"
PREFIX = 24
NETNS_DIR = "/var/run/netns"
RULE = ["FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-m", "comment", "--comment", "inkctl-test", "-j", "ACCEPT"]


def netns(i):
    return f"inkh{i}"


def veth(i):
    return f"inkv{i}"


def address(i):
    return f"10.231.0.{10 + i}"


def netns_path(i):
    return f"{NETNS_DIR}/{netns(i)}"


def link_exists(name):
    return os.path.exists(f"/sys/class/net/{name}")


def ensure_bridge():
    if not link_exists(BRIDGE):
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    addrs = run(["ip", "-o", "-4", "addr", "show", "dev", BRIDGE]).stdout
    if f"{GATEWAY}/{PREFIX}" not in addrs:
        run(["ip", "addr", "add", f"{GATEWAY}/{PREFIX}", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])


def add_netns(i):
    """Create the namespace (sequentially: the first `ip netns add` mounts /run/netns)."""
    if not os.path.exists(netns_path(i)):
        run(["ip", "netns", "add", netns(i)])


def wire_host(i):
    """The veth pair and addresses of host i (safe to run for several hosts at once)."""
    ns, v = netns(i), veth(i)
    if link_exists(v):
        run(["ip", "link", "del", v])
    run(["ip", "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "link", "set", v, "master", BRIDGE, "up"])
    run(["ip", "-n", ns, "addr", "add", f"{address(i)}/{PREFIX}", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])


def set_link(i, up):
    run(["ip", "link", "set", veth(i), "up" if up else "down"])


def link_is_up(i):
    try:
        with open(f"/sys/class/net/{veth(i)}/operstate") as f:
            return f.read().strip() != "down"
    except OSError:
        return False


def our_netns():
    try:
        names = os.listdir(NETNS_DIR)
    except OSError:
        return []
    return sorted(n for n in names if re.fullmatch(r"inkh\d+", n))


def netns_pids(name):
    cp = run(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in cp.stdout.split() if p.isdigit()]


def delete_netns(name):
    run(["ip", "netns", "del", name], check=False)


def delete_links():
    for name in os.listdir("/sys/class/net"):
        if re.fullmatch(r"inkv\d+", name):
            run(["ip", "link", "del", name], check=False)
    if link_exists(BRIDGE):
        run(["ip", "link", "del", BRIDGE], check=False)


def allow_bridge_forwarding():
    """With br_netfilter loaded, bridged frames go through iptables FORWARD, whose policy a
    dockerd may have set to DROP: accept host-to-host traffic on our bridge. True if added."""
    if not shutil.which("iptables"):
        return False
    if run(["iptables", "-C", *RULE], check=False).returncode == 0:
        return True
    return run(["iptables", "-I", *RULE[:1], "1", *RULE[1:]], check=False).returncode == 0


def remove_bridge_forwarding():
    if not shutil.which("iptables"):
        return
    for _ in range(20):
        if run(["iptables", "-D", *RULE], check=False).returncode != 0:
            return
