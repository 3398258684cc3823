"""python -m tests.cluster up --hosts N [--podman H ...] [--small-disk H ...] [--fresh] [--state DIR]
python -m tests.cluster down [--state DIR]
python -m tests.cluster status [--state DIR]"""

import argparse
import os
import sys

from .cluster import DEFAULT_STATE, Cluster, default_state, down
from .proc import HarnessError


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tests.cluster", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="bring up (or reuse) the test cluster")
    up.add_argument("--hosts", type=int, required=True, metavar="N")
    up.add_argument("--podman", nargs="*", metavar="H", default=None,
                    help="hosts running podman instead of docker (default: h3; give none for none)")
    up.add_argument("--small-disk", nargs="*", metavar="H", default=[], help="docker hosts with a 400 MB data-root")
    up.add_argument("--profile", action="append", default=[], metavar="H=PROFILE",
                    help="nvidia-smi profile of a host (h200x8, gb10, rtxpro6000x2)")
    up.add_argument("--fresh", action="store_true", help="rebuild even if a healthy cluster of this shape runs")
    up.add_argument("--link-mbit", type=float, default=None, metavar="MBIT",
                    help="cap every host's link at MBIT Mbit/s each way (tc on its veth), so that "
                         "benchmarks measure the network; 0 removes the cap")
    for s in (up, sub.add_parser("down", help="remove everything up made"),
              sub.add_parser("status", help="show the hosts and what is wrong")):
        s.add_argument("--state", default=DEFAULT_STATE, metavar="DIR")
        s.add_argument("--net-id", type=int, default=None, metavar="K",
                       help="a second cluster beside the default one: netns ink<K>h<i>, 10.231.K.0/24, "
                            "state /var/lib/inkctl-test-<K> (default 0: inkh<i>, 10.231.0.0/24)")
    args = p.parse_args(argv)
    try:
        if args.cmd == "up":
            profiles = dict(x.split("=", 1) for x in args.profile)
            podman = ("h3",) if args.podman is None else tuple(args.podman)
            c = Cluster.up(args.hosts, podman_hosts=podman, small_disk_hosts=tuple(args.small_disk),
                           state=args.state, profiles=profiles, fresh=args.fresh, net_id=args.net_id or 0)
            if args.link_mbit is not None:
                c.limit_links(args.link_mbit or None)
            _print_hosts(c)
            print(f"inventory: {c.inventory}\nssh:       ssh -F {c.ssh_config} h1")
        elif args.cmd == "down":
            down(args.state, args.net_id)
        else:
            state = default_state(args.net_id) if args.state == DEFAULT_STATE else args.state
            c = Cluster._try_load(os.path.abspath(state))
            if c is None:
                print(f"no test cluster in {state}")
                return 3
            _print_hosts(c)
            problems = c.problems()
            for line in problems:
                print(f"problem: {line}")
            print("healthy" if not problems else f"{len(problems)} problem(s)")
            return 1 if problems else 0
    except (HarnessError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _print_hosts(c):
    for h in c.hosts:
        where = h.socket or h.path("containers.conf")
        small = "  small-disk" if h.small_disk else ""
        print(f"{h.name:4} {h.address:13} {h.runtime:7} {h.profile:13} {where}{small}")


if __name__ == "__main__":
    sys.exit(main())
