"""The network: a bridge inkbr0 (10.231.0.1/24) on the control side, one netns inkh<i> per host
joined to it by a veth pair (inkv<i> on the bridge, eth0 inside at 10.231.0.(10+i)).

A second, independent cluster can run beside it with net id K > 0: bridge ink<K>br0 at
10.231.K.1/24, netns ink<K>h<i>, veths ink<K>v<i>, hosts at 10.231.K.(10+i)."""

import os
import re
import shutil

from .proc import run

NETNS_DIR = "/var/run/netns"
PREFIX = 24


def _tag(k):
    return "ink" if k == 0 else f"ink{k}"


def bridge(k=0):
    return f"{_tag(k)}br0"


def gateway(k=0):
    return f"10.231.{k}.1"


def netns(i, k=0):
    return f"{_tag(k)}h{i}"


def veth(i, k=0):
    return f"{_tag(k)}v{i}"


def address(i, k=0):
    return f"10.231.{k}.{10 + i}"


def netns_path(i, k=0):
    return f"{NETNS_DIR}/{netns(i, k)}"


def link_exists(name):
    return os.path.exists(f"/sys/class/net/{name}")


def ensure_bridge(k=0):
    br = bridge(k)
    if not link_exists(br):
        run(["ip", "link", "add", br, "type", "bridge"])
    addrs = run(["ip", "-o", "-4", "addr", "show", "dev", br]).stdout
    if f"{gateway(k)}/{PREFIX}" not in addrs:
        run(["ip", "addr", "add", f"{gateway(k)}/{PREFIX}", "dev", br])
    run(["ip", "link", "set", br, "up"])


def add_netns(i, k=0):
    """Create the namespace (sequentially: the first `ip netns add` mounts /run/netns)."""
    if not os.path.exists(netns_path(i, k)):
        run(["ip", "netns", "add", netns(i, k)])


def wire_host(i, k=0):
    """The veth pair and addresses of host i (safe to run for several hosts at once)."""
    ns, v = netns(i, k), veth(i, k)
    if link_exists(v):
        run(["ip", "link", "del", v])
    run(["ip", "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "link", "set", v, "master", bridge(k), "up"])
    run(["ip", "-n", ns, "addr", "add", f"{address(i, k)}/{PREFIX}", "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])


def set_link(i, up, k=0):
    run(["ip", "link", "set", veth(i, k), "up" if up else "down"])


def link_is_up(i, k=0):
    try:
        with open(f"/sys/class/net/{veth(i, k)}/operstate") as f:
            return f.read().strip() != "down"
    except OSError:
        return False


def our_netns(k=0):
    return [n for n in _all_netns() if re.fullmatch(rf"{_tag(k)}h\d+", n)]


def any_cluster_netns():
    """Namespaces of any test cluster (any net id)."""
    return [n for n in _all_netns() if re.fullmatch(r"ink\d*h\d+", n)]


def _all_netns():
    try:
        return sorted(os.listdir(NETNS_DIR))
    except OSError:
        return []


def netns_pids(name):
    cp = run(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in cp.stdout.split() if p.isdigit()]


def delete_netns(name):
    run(["ip", "netns", "del", name], check=False)


def delete_links(k=0):
    for name in os.listdir("/sys/class/net"):
        if re.fullmatch(rf"{_tag(k)}v\d+", name):
            run(["ip", "link", "del", name], check=False)
    if link_exists(bridge(k)):
        run(["ip", "link", "del", bridge(k)], check=False)


def _rule(k):
    return ["FORWARD", "-i", bridge(k), "-o", bridge(k), "-m", "comment", "--comment", "inkctl-test", "-j", "ACCEPT"]


def allow_bridge_forwarding(k=0):
    """With br_netfilter loaded, bridged frames go through iptables FORWARD, whose policy a
    dockerd may have set to DROP: accept host-to-host traffic on our bridge. True if in place."""
    if not shutil.which("iptables"):
        return False
    rule = _rule(k)
    if run(["iptables", "-C", *rule], check=False).returncode == 0:
        return True
    return run(["iptables", "-I", rule[0], "1", *rule[1:]], check=False).returncode == 0


def remove_bridge_forwarding(k=0):
    if not shutil.which("iptables"):
        return
    for _ in range(20):
        if run(["iptables", "-D", *_rule(k)], check=False).returncode != 0:
            return


def limit_link(i, mbit, k=0):
    """Cap host i's link at ``mbit`` Mbit/s each way (tc tbf on both ends of its veth: the bridge
    side shapes what the host receives, eth0 in the netns what it sends), so benchmarks measure
    the network rather than the shared CPU. ``mbit`` None removes the cap."""
    ends = (["tc"], ["tc", "-n", netns(i, k)])
    devs = (veth(i, k), "eth0")
    for tc, dev in zip(ends, devs):
        run(tc + ["qdisc", "del", "dev", dev, "root"], check=False)
        if mbit:
            burst = max(32 * 1024, int(mbit * 1e6 / 8 / 100))  # 10 ms of bytes
            run(tc + ["qdisc", "add", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit", "burst", str(burst),
                      "latency", "50ms"])
