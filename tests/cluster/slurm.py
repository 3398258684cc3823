"""A real Slurm (Debian's slurm-wlm 22.05) on the test cluster: one munged and one slurmctld on the
control side, one slurmd inside each chosen host's network namespace. Started on demand by the
tests that submit jobs (like the registry), stopped by `down`.

Everything is unique per net id K, so clusters side by side never meet: node names `ink<K>h<i>`,
the controller `ink<K>ctl` on the bridge address, ports from K, state under `<state>/slurm`,
/etc/hosts lines tagged `# inkctl-test-slurm-<K>` (removed exactly on stop).

What makes it work here (TEST-CLUSTER.md "Slurm on the test hosts"): slurmd runs under
`nsenter --net` + `unshare --uts --mount` with its own hostname (not `ip netns exec`: no
cgroups there); no cgroup plugins at all; a TaskProlog exports the node's runtime settings (DOCKER_HOST, or podman's config) and PATH
(slurmd's own environment does not reach jobs); GPUs are character devices made with mknod.
Clients (sbatch, squeue, inkctl) find it through `SLURM_CONF` (`Slurm.env`).
"""

from __future__ import annotations

import os
import shutil
import socket

from . import net
from .proc import HarnessError, alive, kill_all, read_pid, run, spawn, wait_for

HOSTS_FILE = "/etc/hosts"
GPUS_PER_NODE = 8


def _tag(net_id: int) -> str:
    return f"# inkctl-test-slurm-{net_id}"


def node_name(host_name: str, net_id: int) -> str:
    return f"ink{net_id}{host_name}"


def controller_name(net_id: int) -> str:
    return f"ink{net_id}ctl"


def ports(net_id: int) -> tuple[int, int]:
    """(slurmctld, slurmd) ports for net id K: 21K17 and 21K18 style, never shared by two ids."""
    base = 21000 + 100 * net_id
    return base + 17, base + 18


class Slurm:
    """A running Slurm of one test cluster. ``start(cluster, ["h1", "h2"])`` makes one."""

    def __init__(self, state: str, net_id: int, hosts: list, partition: str, extra: dict | None = None):
        self.state, self.net_id, self.hosts, self.partition = state, net_id, hosts, partition
        self.extra = dict(extra or {})  # partition -> host names, beside the default one
        self.dir = os.path.join(state, "slurm")

    @property
    def all_hosts(self) -> list:
        return [*self.hosts, *(h for hs in self.extra.values() for h in hs)]

    @property
    def conf(self) -> str:
        return os.path.join(self.dir, "slurm.conf")

    @property
    def env(self) -> dict:
        """What a client on the login node needs: the config (and through it munge's socket)."""
        return {"SLURM_CONF": self.conf}

    def nodes(self) -> list[str]:
        return [node_name(h.name, self.net_id) for h in self.all_hosts]

    def node(self, host_name: str) -> str:
        return node_name(host_name, self.net_id)

    def node_env(self, host_name: str, env: dict | None) -> None:
        """Environment that jobs get on one node only (a site's per-node settings); None clears it."""
        path = os.path.join(self.dir, "node-env", self.node(host_name))
        if not env:
            if os.path.exists(path):
                os.remove(path)
            return
        with open(path, "w") as f:
            f.writelines(f"export {k}={v}\n" for k, v in env.items())

    def run(self, argv, check=True, timeout=60):
        return run(argv, check=check, timeout=timeout, env=dict(os.environ, **self.env))

    def idle(self) -> bool:
        cp = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False, timeout=10)
        states = [ln.split()[1] for ln in cp.stdout.splitlines() if ln.strip()]
        return cp.returncode == 0 and len(states) == len(self.all_hosts) and all(s == "idle" for s in states)

    def jobs(self) -> list[str]:
        cp = self.run(["squeue", "-h", "-o", "%i %T"], check=False, timeout=10)
        return [ln.strip() for ln in cp.stdout.splitlines() if ln.strip()]


def start(cluster, host_names=("h1", "h2"), partition: str | None = None, timeout: float = 60,
          extra: dict | None = None) -> Slurm:
    """Start munged, slurmctld and a slurmd on each host; idempotent while running. ``extra``:
    more partitions, {name: [host names]} (disjoint from ``host_names``; podman hosts too)."""
    for exe in ("munged", "slurmctld", "slurmd", "sbatch"):
        if not shutil.which(exe):
            raise HarnessError(f"{exe}: not installed (run tests/cluster/install.sh)")
    net_id = cluster.net_id
    hosts = [cluster.host(n) for n in host_names]
    s = Slurm(cluster.state, net_id, hosts, partition or f"ink{net_id}",
              {p: [cluster.host(n) for n in ns] for p, ns in (extra or {}).items()})
    if _running(s) and s.idle() and _same_shape(s):
        return s
    stop(cluster.state, net_id)
    os.makedirs(s.dir, mode=0o755, exist_ok=True)
    _hosts_lines(s)
    _munge(s)
    _config(s)
    ctld_port, _ = ports(net_id)
    ctl = controller_name(net_id)
    ctld = spawn(["unshare", "--uts", "--", "sh", "-c", f'hostname {ctl} && exec slurmctld -D -f "$1"', "sh", s.conf],
                 os.path.join(s.dir, "slurmctld.out"))
    _write_pid(s, "slurmctld.pid", ctld)
    wait_for(f"slurmctld on {net.gateway(net_id)}:{ctld_port}", lambda: _listens(net.gateway(net_id), ctld_port)
             or (not alive(ctld) and _dead(s, "slurmctld")), timeout=timeout, on_timeout=lambda: _tail(s, "slurmctld.log"))
    for h in s.all_hosts:
        name = s.node(h.name)
        pid = spawn(["nsenter", f"--net={h.netns_path}", *_mount_ns(h), "--", "unshare", "--uts", "--mount", "--", "sh", "-c",
                     f'hostname {name} && exec slurmd -D -N {name} -f "$1"', "sh", s.conf],
                    os.path.join(s.dir, f"{name}.out"))
        _write_pid(s, f"{name}.pid", pid)
    wait_for(f"{len(s.all_hosts)} idle Slurm nodes", s.idle, timeout=timeout,
             on_timeout=lambda: s.run(["sinfo", "-N", "-l"], check=False).stdout + _tail(s, f"{s.node(hosts[0].name)}.log"))
    return s


def stop(state: str, net_id: int) -> None:
    """Stop this cluster's Slurm daemons and munged; remove its /etc/hosts lines and its state."""
    d = os.path.join(os.path.abspath(state), "slurm")
    pids = []
    if os.path.isdir(d):
        for f in os.listdir(d):
            if f.endswith(".pid"):
                pids.append(read_pid(os.path.join(d, f)))
    kill_all([p for p in pids if p and alive(p)], timeout=10)
    _drop_hosts_lines(net_id)
    shutil.rmtree(d, ignore_errors=True)


def _same_shape(s: Slurm) -> bool:
    """The running Slurm was started from this harness's config (GPUs, nodes)."""
    try:
        with open(s.conf) as f:
            text = f.read()
    except OSError:
        return False
    parts = [f"PartitionName={p} Nodes={','.join(s.node(h.name) for h in hs)} " for p, hs in s.extra.items()]
    return f"Gres=gpu:{GPUS_PER_NODE} " in text and all(f"NodeName={n} " in text for n in s.nodes()) \
        and text.count("PartitionName=") == 1 + len(parts) and all(p in text for p in parts)


def _running(s: Slurm) -> bool:
    return all(alive(read_pid(os.path.join(s.dir, f"{n}.pid"))) for n in ["munged", "slurmctld", *s.nodes()])


def _write_pid(s: Slurm, name: str, pid: int) -> None:
    with open(os.path.join(s.dir, name), "w") as f:
        f.write(f"{pid}\n")


def _listens(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def _tail(s: Slurm, name: str) -> str:
    try:
        with open(os.path.join(s.dir, name), errors="replace") as f:
            return f.read()[-2000:]
    except OSError:
        return ""


def _dead(s: Slurm, what: str):
    raise HarnessError(f"{what} exited: {_tail(s, what + '.log') or _tail(s, what + '.out')}")


def _hosts_lines(s: Slurm) -> None:
    _drop_hosts_lines(s.net_id)
    tag = _tag(s.net_id)
    lines = [f"{net.gateway(s.net_id)} {controller_name(s.net_id)} {tag}\n"]
    lines += [f"{h.address} {s.node(h.name)} {tag}\n" for h in s.all_hosts]
    with open(HOSTS_FILE, "a") as f:
        f.writelines(lines)


def _drop_hosts_lines(net_id: int) -> None:
    tag = _tag(net_id)
    try:
        with open(HOSTS_FILE) as f:
            lines = f.readlines()
    except OSError:
        return
    keep = [ln for ln in lines if not ln.rstrip("\n").endswith(tag)]
    if keep != lines:
        # rewrite in place: /etc/hosts may be a bind mount (containers), which a rename would break
        with open(HOSTS_FILE, "w") as f:
            f.writelines(keep)


def _munge(s: Slurm) -> None:
    d = os.path.join(s.dir, "munge")
    os.makedirs(d, mode=0o700, exist_ok=True)
    key = os.path.join(d, "munge.key")
    with open(key, "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(key, 0o400)
    pid = spawn(["munged", "-F", "--force", f"--socket={d}/munge.socket", f"--key-file={key}",
                 f"--pid-file={d}/munged.pidfile", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"],
                os.path.join(s.dir, "munged.out"))
    _write_pid(s, "munged.pid", pid)
    wait_for("munged's socket", lambda: os.path.exists(f"{d}/munge.socket") or (not alive(pid) and _dead(s, "munged")),
             timeout=20)


def _config(s: Slurm) -> None:
    d, k = s.dir, s.net_id
    ctld_port, slurmd_port = ports(k)
    dev = os.path.join(d, "dev")
    os.makedirs(dev, exist_ok=True)
    for i in range(GPUS_PER_NODE):  # character devices: plain files give jobs no CUDA_VISIBLE_DEVICES
        path = os.path.join(dev, f"nvidia{i}")
        if not os.path.exists(path):
            os.mknod(path, 0o666 | 0o020000, os.makedev(195, i))
    prolog = os.path.join(d, "task_prolog.sh")
    cases = "".join(f'  {s.node(h.name)})\n' + "".join(f'    echo "export {k}={v}"\n' for k, v in _task_env(h).items())
                    + f'    echo "export PATH={h.bin_dir}:$PATH" ;;\n' for h in s.all_hosts)
    node_env = os.path.join(d, "node-env")
    os.makedirs(node_env, exist_ok=True)
    with open(prolog, "w") as f:
        f.write(f'#!/bin/sh\n# the node\'s own dockerd and tools for every task (slurmd\'s environment does not reach jobs)\n'
                f'case "$SLURMD_NODENAME" in\n{cases}esac\n'
                f'# what a test gives one node only (Slurm.node_env): `export NAME=value` lines\n'
                f'[ ! -f "{node_env}/$SLURMD_NODENAME" ] || cat "{node_env}/$SLURMD_NODENAME"\n')
    os.chmod(prolog, 0o755)
    node_lines = "".join(f"NodeName={s.node(h.name)} NodeAddr={h.address} CPUs={os.cpu_count() or 1} RealMemory=1000 "
                         f"Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN\n" for h in s.all_hosts)
    extra_lines = "".join(f"PartitionName={p} Nodes={','.join(s.node(h.name) for h in hs)} MaxTime=INFINITE State=UP\n"
                          for p, hs in s.extra.items())
    with open(os.path.join(d, "slurm.conf"), "w") as f:
        f.write(f"""# written by tests/cluster/slurm.py (net id {k})
ClusterName=ink{k}
SlurmctldHost={controller_name(k)}({net.gateway(k)})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
CommunicationParameters=NoCtldInAddrAny
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/ctld
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pidfile
SlurmdPidFile={d}/slurmd-%n.pidfile
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
TaskProlog={prolog}
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait=5
MinJobAge=600
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
MailProg=/bin/true
{node_lines}PartitionName={s.partition} Nodes={",".join(s.node(h.name) for h in s.hosts)} Default=YES MaxTime=INFINITE State=UP
{extra_lines}""")
    with open(os.path.join(d, "gres.conf"), "w") as f:
        f.write("".join(f"NodeName={s.node(h.name)} Name=gpu File={dev}/nvidia[0-{GPUS_PER_NODE - 1}]\n" for h in s.all_hosts))
    os.makedirs(os.path.join(d, "ctld"), exist_ok=True)


def _mount_ns(h) -> list[str]:
    """A podman host's files are those of its sshd's private mount namespace (its own /run,
    podman's storage on a tmpfs): its slurmd, and so its jobs, start in that one."""
    if h.runtime != "podman":
        return []
    pid = read_pid(h.sshd_pid_file)
    if not pid or not alive(pid):
        raise HarnessError(f"{h.name}: its sshd (pid file {h.sshd_pid_file}) is not running")
    return [f"--mount=/proc/{pid}/ns/mnt"]


def _task_env(h) -> dict:
    """What a task on host h gets from the TaskProlog: its runtime's settings (its own dockerd, or
    podman's config and storage), as an SSH session there gets them; PATH is prepended apart."""
    return {k: v for k, v in h.session_env.items() if k not in ("PATH", "SHLVL")}
