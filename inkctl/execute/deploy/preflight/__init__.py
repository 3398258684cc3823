"""Preflight: is every host ready for this plan? One failed check and nothing is launched.

Each host answers one combined probe (one SSH round trip, ``probe.HOST_PROBE``): its
containers (``ps --all``, which also proves the runtime answers), nvidia-smi, /proc/meminfo,
the image, listening sockets, mount sources, its network interfaces and RDMA fabric. ``up``
runs that probe once per host with the deploy lock in it, as each host connects
(``probe_one``), and hands the answers here (``run_preflight(answers=)``); ``doctor`` lets
``run_preflight`` probe by itself. Values reach the remote shell as positional arguments of
``sh -c SCRIPT``, never inside it. The only second round trip is a pull, when the recipe
allows one and the image is missing.

One module per thing checked: ``runtime`` (runtime, name), ``gpus`` (gpus, gpu-free),
``memory``, ``image``, ``places`` (paths, ports), ``network``; ``planned`` reads what the
plan gives a host, ``report`` holds the rows and the failure, ``run`` runs them all.
"""

from inkctl.execute.deploy.preflight.planned import host_image, mount_sources, planned_gpus, planned_image, planned_ports
from inkctl.execute.deploy.preflight.report import (CHECKS, FAIL, NOT_RUN, OK, SKIPPED, WARN, CheckResult, PreflightFailed,
                                                    PreflightReport, Unreachable, check_names)
from inkctl.execute.deploy.preflight.run import probe_one, run_preflight

__all__ = ["CHECKS", "FAIL", "NOT_RUN", "OK", "SKIPPED", "WARN", "CheckResult", "PreflightFailed", "PreflightReport",
           "Unreachable", "check_names", "host_image", "mount_sources", "planned_gpus", "planned_image", "planned_ports",
           "probe_one", "run_preflight"]
