"""A real multi-host test cluster on one machine.

Each host h<i> is a network namespace inkh<i> on the bridge inkbr0 (10.231.0.1/24) at
10.231.0.(10+i), with its own sshd and its own container engine (dockerd, or podman on the
podman hosts), nvidia-smi and GPU stand-ins, and the fake engine image inkctl-fake-engine:latest.

    python -m tests.cluster up --hosts 4 [--podman h3 ...] [--state DIR]
    python -m tests.cluster status [--state DIR]
    python -m tests.cluster down [--state DIR]

    from tests.cluster import Cluster
    c = Cluster.up(4)                 # or Cluster.load("/var/lib/inkctl-test")
    c.exec("h1", ["docker", "ps"]); c.docker("h3", "ps"); c.ssh("h2", "nvidia-smi -L")
    c.cut("h2"); c.heal("h2"); c.stop_runtime("h1"); c.start_runtime("h1")
    c.down()
"""

from .cluster import DEFAULT_STATE, Cluster, down, host_exec
from .host import Host
from .image import IMAGE
from .proc import HarnessError

__all__ = ["Cluster", "DEFAULT_STATE", "HarnessError", "Host", "IMAGE", "down", "host_exec"]
