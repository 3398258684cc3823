"""A container registry for push tests: Debian's docker-registry (distribution 2.8), plain HTTP,
bound to the cluster bridge's address (10.231.K.1:5000) so that every host's dockerd reaches it.

The hosts' dockerd trust it as an insecure registry (tests/cluster/runtimes.py). Its config and
storage live under the cluster's state dir, so `down` stops it and removes what was pushed.
"""

from __future__ import annotations

import os
import shutil
import urllib.request

from . import net
from .proc import HarnessError, alive, read_pid, spawn, wait_for

PORT = 5000


def address(net_id: int = 0) -> str:
    return f"{net.gateway(net_id)}:{PORT}"


def answers(net_id: int = 0) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to the bridge
    try:
        with opener.open(f"http://{address(net_id)}/v2/", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def start(state: str, net_id: int = 0, timeout: float = 30) -> str:
    """Start it unless it answers already; returns HOST:PORT."""
    if answers(net_id):
        return address(net_id)
    if not shutil.which("docker-registry"):
        raise HarnessError("docker-registry: not installed (run tests/cluster/install.sh)")
    d = os.path.join(os.path.abspath(state), "registry")
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    cfg = os.path.join(d, "config.yml")
    with open(cfg, "w") as f:
        f.write(f"""# written by tests/cluster/registry.py
version: 0.1
log: {{level: warn}}
storage:
  filesystem: {{rootdirectory: {d}/data}}
  delete: {{enabled: true}}
http:
  addr: {address(net_id)}
""")
    pid = spawn(["docker-registry", "serve", cfg], os.path.join(d, "registry.log"))
    with open(os.path.join(d, "registry.pid"), "w") as f:
        f.write(f"{pid}\n")

    def _tail():
        with open(os.path.join(d, "registry.log"), errors="replace") as f:
            return f.read()[-2000:]
    wait_for(f"docker-registry on {address(net_id)}", lambda: answers(net_id) or (not alive(pid) and _dead(_tail())),
             timeout=timeout, on_timeout=_tail)
    return address(net_id)


def _dead(log: str):
    raise HarnessError(f"docker-registry exited: {log}")


def running_pid(state: str) -> int | None:
    pid = read_pid(os.path.join(os.path.abspath(state), "registry", "registry.pid"))
    return pid if pid and alive(pid) else None
