"""Slurm's own commands, run on the login node (argv, never shell), and what they answer, parsed.

``sinfo``/``scontrol show partition`` for what a partition has, ``sbatch --test-only`` and
``sbatch --parsable`` to check and submit, ``scontrol show job`` (``squeue`` for the list) to
follow a job, ``scancel`` to end it. A missing command is one clear error: run inkctl where Slurm's
client commands are (a login node), with ``SLURM_CONF`` if the cluster's config is not the default.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field

from inkctl.errors import InkctlError

# a job in one of these has ended (scontrol's JobState)
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
# a pending job with one of these reasons never starts as asked
HOPELESS = ("PartitionNodeLimit", "PartitionConfig", "BadConstraints", "PartitionDown", "PartitionInactive",
            "InvalidAccount", "InvalidQOS", "AccountNotAllowed", "QOSMaxNodePerJobLimit")

# why a job is pending (squeue's Reason, scontrol's Reason=): what it means, what to do
PENDING_WHY = {
    "Resources": ("the nodes it needs are busy with other jobs",
                  "wait longer (--pending-timeout), or see who holds them: squeue -p PARTITION"),
    "Priority": ("jobs of higher priority are ahead of it in the queue",
                 "wait longer (--pending-timeout), or see the queue: squeue -p PARTITION"),
    "ReqNodeNotAvail": ("a node it needs is down, drained or reserved",
                        "see why: sinfo -R -p PARTITION; an admin resumes a node with scontrol update"),
    "PartitionNodeLimit": ("it asks for more nodes than the partition allows per job",
                           "choose another partition (--partition), or a recipe for fewer nodes"),
    "Nodes_required_for_job_are_DOWN": ("nodes it needs are down or drained",
                                        "see why: sinfo -R -p PARTITION"),
    "NodeDown": ("a node it needs is down", "see why: sinfo -R -p PARTITION"),
    "PartitionDown": ("the partition is down", "choose another partition (--partition)"),
    "PartitionTimeLimit": ("its --time is over the partition's limit", "ask for less (--time)"),
    "AssocGrpNodeLimit": ("the account's node limit is reached", "wait, or use another account (--account)"),
    "QOSMaxNodePerJobLimit": ("the QOS allows fewer nodes per job", "ask the admins, or use fewer nodes"),
    "BeginTime": ("its start time has not come yet", "wait"),
    "Dependency": ("it waits for another job", "see: scontrol show job JOBID"),
    "JobHeldUser": ("it is held", "release it: scontrol release JOBID"),
    "JobHeldAdmin": ("an admin holds it", "ask the admins"),
}


def pending_why(reason: str, partition: str, job_id: str) -> tuple[str, str]:
    """(what squeue's reason means, what to do), the partition and job named."""
    key = reason.split(",")[0].split("(")[0].strip()
    what, todo = PENDING_WHY.get(key, (f"Slurm says: {reason}", "see: scontrol show job JOBID"))
    return what, todo.replace("PARTITION", partition).replace("JOBID", job_id)


def slurm(argv: list[str], *, env: dict | None = None, timeout: float = 60, check: bool = True,
          input: str | None = None) -> subprocess.CompletedProcess:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, input=input)
    except FileNotFoundError:
        raise InkctlError(f"{argv[0]}: not found: --slurm runs Slurm's client commands on this machine",
                          hint="run inkctl on a login node of the cluster (with SLURM_CONF if its config is elsewhere)",
                          exit_code=2) from None
    except subprocess.TimeoutExpired:
        raise InkctlError(f"{' '.join(argv[:3])}: no answer within {timeout:g} s (is slurmctld up?)", exit_code=1) from None
    if check and cp.returncode != 0:
        raise InkctlError(f"{' '.join(argv[:2])} failed: {(cp.stderr or cp.stdout).strip()[:400]}", exit_code=1)
    return cp


def fields(line: str) -> dict[str, str]:
    """``scontrol show ... -o`` -> {Key: value}; values may hold spaces up to the next Key=."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(\S+?)=(.*?)(?=\s+\S+?=|$)", line.strip()):
        out[m.group(1)] = m.group(2)
    return out


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    state: str
    max_nodes: int | None  # None: UNLIMITED
    gpus: dict[str, int] = field(default_factory=dict)  # node -> GPUs (GRES gpu)

    @property
    def total(self) -> int:
        return len(self.nodes)


def hostnames(nodelist: str) -> list[str]:
    """``ink6h[1-2]`` -> ['ink6h1', 'ink6h2'] (scontrol show hostnames)."""
    if not nodelist or nodelist in ("(null)", "None"):
        return []
    return slurm(["scontrol", "show", "hostnames", nodelist]).stdout.split()


def partition(name: str | None) -> Partition:
    cp = slurm(["scontrol", "show", "partition", "-o"])
    parts = [fields(ln) for ln in cp.stdout.splitlines() if ln.strip()]
    if not parts:
        raise InkctlError("Slurm has no partition", exit_code=2)
    if name is None:
        found = next((p for p in parts if p.get("Default") == "YES"), None)
        if found is None:
            raise InkctlError("Slurm has no default partition: name one with --partition",
                              hint="partitions: " + ", ".join(p.get("PartitionName", "?") for p in parts), exit_code=2)
    else:
        found = next((p for p in parts if p.get("PartitionName") == name), None)
        if found is None:
            raise InkctlError(f"Slurm has no partition {name!r}",
                              hint="partitions: " + ", ".join(p.get("PartitionName", "?") for p in parts), exit_code=2)
    nodes = tuple(hostnames(found.get("Nodes", "")))
    mx = found.get("MaxNodes", "UNLIMITED")
    gpus: dict[str, int] = {}
    info = slurm(["sinfo", "-h", "-N", "-p", found["PartitionName"], "-o", "%N %G"], check=False)
    for ln in info.stdout.splitlines():
        node, _, gres = ln.partition(" ")
        m = re.search(r"gpu(?::[^:(,]+)?:(\d+)", gres)
        gpus[node] = int(m.group(1)) if m else 0
    return Partition(found["PartitionName"], nodes, found.get("State", "?"), None if not mx.isdigit() else int(mx), gpus)


def test_only(script: str, args: list[str], env: dict) -> str:
    """``sbatch --test-only``: '' when Slurm would accept the job, else its message."""
    cp = slurm(["sbatch", "--test-only", *args, script], env=env, check=False)
    if cp.returncode != 0:
        return (cp.stderr or cp.stdout).strip()
    return ""


def submit(script: str, args: list[str], env: dict) -> str:
    cp = slurm(["sbatch", "--parsable", *args, script], env=env)
    return cp.stdout.strip().split(";")[0]


@dataclass(frozen=True)
class JobState:
    id: str
    state: str  # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ... ; GONE when Slurm forgot it
    reason: str
    nodes: tuple[str, ...]
    exit_code: str
    stdout: str
    workdir: str
    name: str
    comment: str = ""
    partition: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED or self.state == "GONE"


def job(job_id: str) -> JobState:
    cp = slurm(["scontrol", "show", "job", "-o", job_id], check=False)
    if cp.returncode != 0 or not cp.stdout.strip():
        return JobState(job_id, "GONE", "", (), "", "", "", "")
    f = fields(cp.stdout.splitlines()[0])
    nodelist = f.get("NodeList", "")
    return JobState(job_id, f.get("JobState", "?").split()[0], f.get("Reason", "None"),
                    tuple(hostnames(nodelist)) if nodelist not in ("", "(null)") else (),
                    f.get("ExitCode", ""), f.get("StdOut", ""), f.get("WorkDir", ""), f.get("JobName", ""),
                    f.get("Comment", ""), f.get("Partition", ""))


def jobs_named(name: str) -> list[str]:
    """This user's jobs with that name, oldest first (squeue keeps ended ones only briefly)."""
    user = os.environ.get("USER") or _whoami()
    cp = slurm(["squeue", "-h", "--name", name, "-u", user, "-o", "%i"], check=False)
    return sorted((x for x in cp.stdout.split() if x.strip()), key=lambda j: int(j) if j.isdigit() else 0)


def _whoami() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def cancel(job_id: str) -> None:
    slurm(["scancel", job_id], check=False)


def partition_hosts(name: str | None, known: list | None = None) -> list:
    """The partition's nodes as inventory hosts, in Slurm's order (see ``as_hosts``)."""
    part = partition(name)
    return as_hosts(list(part.nodes), known, f"of partition {part.name}")


def job_hosts(job_id: str, known: list | None = None) -> list:
    """The nodes a running job holds (its allocation), as inventory hosts in Slurm's order."""
    st = job(job_id)
    if st.state == "GONE":
        raise InkctlError(f"Slurm has no job {job_id}", hint="list yours: squeue --me", exit_code=2)
    if st.state != "RUNNING" or not st.nodes:
        raise InkctlError(f"job {job_id} is {st.state.lower()}: it holds no nodes now", exit_code=2,
                          hint="name a running job (squeue --me -t running), or use --partition P")
    return as_hosts(list(st.nodes), known, f"of job {job_id}")


def as_hosts(nodes: list[str], known: list | None, where: str) -> list:
    """Slurm node names as inventory hosts: a node that ``known`` (an inventory) lists by name
    keeps its entry (user, key, vars); the others get their resolved address."""
    import socket

    from inkctl.recipe.hosts import Host

    by_name = {h.name: h for h in known or []}
    out = []
    for node in nodes:
        if node in by_name:
            out.append(by_name[node])
            continue
        try:
            address = socket.gethostbyname(node)
        except OSError as e:
            raise InkctlError(f"node {node} {where} does not resolve here: {e}",
                              hint="list it with its address in --hosts FILE", exit_code=2) from None
        out.append(Host(name=node, address=address))
    return out
