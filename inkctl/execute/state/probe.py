"""Reading remote state: containers by label (``<runtime> container inspect``), and the combined
probe of a host before a launch (its script, running it on every host, parsing its answer).

Read at run time, never baked into a plan. Both runtimes print a JSON array from ``inspect``
without ``--format``; the parsers read docker's and podman's shapes alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone

from inkctl.execute.state import gpu as gpu_probe
from inkctl.execute.state import fabric, gpu_amd
from inkctl.execute.state.deploylock import PROBE_SECTION
from inkctl.execute.state.deployed import ContainerState, parse_inspect
from inkctl.execute.hosts.transport import HostError, Result, Transport
from inkctl import runtimes
from inkctl.plan.quote import command_line

# One round trip: the host's clock (for uptimes), then every container of the deployment.
# Arguments: the inspect command (3 words), then the ps command listing the ids (the runtime's argv).
BY_LABEL = (
    'i1="$1"; i2="$2"; i3="$3"; shift 3\n'
    "date -u +%s\n"
    'ids=$("$@") || exit 3\n'
    '[ -z "$ids" ] && { echo "[]"; exit 0; }\n'
    '"$i1" "$i2" "$i3" $ids\n'
)


# The one round trip per host before a launch (and doctor's only one). Values arrive as
# positional arguments, never inside the script. Sections go to stdout and stderr alike, so each
# section's stderr can be told apart. With a lock directory, the deploy lock is taken first
# (deploylock owns that part); when it is not given, nothing else is read. One ``ps --all``
# serves the deployment probe (by label) and the name check, and proves the runtime answers;
# one ``image inspect`` serves the image check of ``ensure_image`` and of preflight.
HOST_PROBE = "\n".join([
    'rt="$1"; psfmt="$2"; image="$3"; lock_parent="$4"; lock_dir="$5"; lock_record="$6"; lock_token="$7"; fab_root="$8";'
    ' fab_addr="$9"; shift 9',
    'sec() { echo "@@inkctl $1"; echo "@@inkctl $1" >&2; }',
    'rc() { echo "@@inkctl rc $1"; }',
    'if [ -n "$lock_dir" ]; then',
    "sec lock",
    PROBE_SECTION,
    'rc $lock_rc',  # held: the rest still answers, for a stale lock taken over after it
    "fi",
    "sec containers",
    'if command -v "$rt" >/dev/null 2>&1; then "$rt" ps --all --format "$psfmt"; ps_rc=$?; else ps_rc=127; fi; rc $ps_rc',
    # one nvidia-smi answers both the gpus section (QUERY's fields) and the index -> uuid table
    # of gpuapps (each call costs the host tens to hundreds of milliseconds): its rows are split
    # here with shell builtins, the uuid being the last field
    "sec gpus",
    f"if command -v nvidia-smi >/dev/null 2>&1; then gq=$({command_line(gpu_probe.QUERY_UUID)}); gq_rc=$?",
    ' if [ "$gq_rc" = 0 ]; then while IFS= read -r l; do [ -z "$l" ] || echo "${l%, *}"; done <<INKCTL_GQ',
    "$gq",
    "INKCTL_GQ",
    ' elif [ -n "$gq" ]; then printf "%s\\n" "$gq"; fi; rc $gq_rc',
    "else gq_rc=none; rc 127; fi",
    "sec gpuapps",  # who else holds GPU memory: index -> uuid, then the compute processes
    'if [ "$gq_rc" = none ]; then rc 127; elif [ "$gq_rc" != 0 ]; then [ -z "$gq" ] || printf "%s\\n" "$gq"; rc $gq_rc;',
    'else while IFS= read -r l; do [ -z "$l" ] || echo "${l%%,*}, ${l##*, }"; done <<INKCTL_GQ',
    "$gq",
    "INKCTL_GQ",
    f" echo '@@apps'; {command_line(gpu_probe.APPS_QUERY)}; rc $?; fi",
    "sec amdgpus",  # the tool's name first, then its JSON (execute/state/gpu_amd.py)
    f"if command -v amd-smi >/dev/null 2>&1; then echo amd-smi; {command_line(gpu_amd.AMD_SMI)}; rc $?;"
    f" elif command -v rocm-smi >/dev/null 2>&1; then echo rocm-smi; {command_line(gpu_amd.ROCM_SMI)}; rc $?; else rc 127; fi",
    "sec amdmem",  # the memory in use on AMD GPUs (amd-smi static has none; rocm-smi's answer above does)
    f"if command -v amd-smi >/dev/null 2>&1; then {command_line(gpu_amd.AMD_SMI_MEM)}; rc $?; else rc 127; fi",
    "sec meminfo",
    "grep -E '^(MemTotal|MemAvailable):' /proc/meminfo; rc $?",
    "sec image",
    'if [ "$ps_rc" != 0 ]; then rc $ps_rc; elif [ -n "$image" ]; then "$rt" image inspect "$image"; rc $?; else rc 0; fi',
    "sec listen",  # ss asks the kernel for the listening sockets alone; /proc/net/tcp walks every bucket
    "{ command -v ss >/dev/null 2>&1 && ss -Hltn 2>/dev/null; } || cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; rc 0",
    "sec net",
    # the names from /proc/net/dev (the login's own network namespace, which a /sys mounted for
    # another namespace would not show), each one's state from /sys/class/net; builtins only
    '{ read -r _; read -r _; while read -r n _; do n=${n%%:*}; d=/sys/class/net/$n;'
    ' { read -r o < "$d/operstate" || o=unknown; read -r f < "$d/flags" || f=0x0; } 2>/dev/null;'
    ' echo "$n $o $f"; done; } < /proc/net/dev; rc 0',
    "sec hcas",  # under the same root as the fabric section (a test host's tree)
    'ib="${fab_root:-${INKCTL_SYSFS_ROOT:-/sys}}/class/infiniband"; if [ -d "$ib" ]; then ls -1 "$ib"; fi; rc 0',
    "sec paths",
    'for p in "$@"; do if [ -e "$p" ]; then echo present; else echo missing; fi; done; rc 0',
    "sec fabric",  # the RDMA rails from sysfs (execute/state/fabric.py)
    fabric.SECTION,
    "rc 0",
    "",
])

# Pull (by digest when pinned), tag it as the plan's reference, then inspect it again.
PULL = "\n".join([
    'rt="$1"; src="$2"; ref="$3"',
    '"$rt" pull "$src" >&2 || exit $?',
    'if [ "$src" != "$ref" ]; then "$rt" tag "$src" "$ref" >&2 || exit $?; fi',
    'exec "$rt" image inspect "$ref"',
    "",
])


@dataclass(frozen=True)
class HostContainers:
    host: str
    containers: list[ContainerState]
    clock: datetime | None  # the host's own time when it answered


def deployment_containers(t: Transport, rt: str, deployment: str, timeout: float = 30) -> HostContainers:
    """Every container labelled ``inkctl.deployment=<deployment>`` on one host (one round trip)."""
    runtime = runtimes.get(rt)
    res = t.run(["sh", "-c", BY_LABEL, "inkctl-status", *runtime.inspect(format=None),
                 *runtime.ps(deployment=deployment, quiet=True)], timeout=timeout)
    if not res.ok:
        err = (res.err_text() or res.text()).strip().splitlines()
        raise HostError(t.name, "runtime", f"{rt} did not list containers: " + (err[-1] if err else f"exit {res.exit_code}"),
                        hint=f"check the runtime on {t.name}: {rt} ps --all")
    first, _, rest = res.text().partition("\n")
    clock = datetime.fromtimestamp(int(first), timezone.utc) if first.strip().isdigit() else None
    try:
        containers = parse_inspect(rest, t.name)
    except ValueError as e:
        raise HostError(t.name, "runtime", str(e)) from None
    return HostContainers(host=t.name, containers=containers, clock=clock)


def deployment_states(plan, transports: dict[str, Transport]):
    """Every host's containers of the deployment, in parallel: a Fanout of HostContainers."""
    from inkctl.execute.hosts.fanout import on_hosts

    return on_hosts(lambda name: deployment_containers(transports[name], plan.host(name).runtime, plan.deployment),
                    [h.name for h in plan.hosts], name="status")


def uptime(c: ContainerState, now: datetime | None) -> float | None:
    if not c.running or c.started_at is None:
        return None
    now = now or datetime.now(timezone.utc)
    return max(0.0, (now - c.started_at).total_seconds())


def human_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


@dataclass(frozen=True)
class Link:
    """One network interface from /sys/class/net: its name, operstate and IFF flags."""

    name: str
    operstate: str
    flags: int

    @property
    def up(self) -> bool:
        # virtual links (veth in some namespaces, tun, some RoCE bonds) report 'unknown' while
        # passing traffic: then the administrative IFF_UP flag (0x1) decides
        return self.operstate == "up" or (self.operstate == "unknown" and bool(self.flags & 0x1))


def parse_links(text: str) -> dict[str, Link]:
    """The net section: ``<name> <operstate> <flags>`` per line (flags in hex, 0x...)."""
    out: dict[str, Link] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        try:
            flags = int(f[2], 16) if len(f) > 2 else 0
        except ValueError:
            flags = 0
        out[f[0]] = Link(f[0], f[1], flags)
    return out


def listening_ports(text: str) -> set[int]:
    """TCP ports in LISTEN state (any bound address), from ``ss -Hltn`` (``LISTEN 0 4096
    0.0.0.0:8000 0.0.0.0:*``) or from /proc/net/tcp and /proc/net/tcp6 (hex, state 0A)."""
    ports: set[int] = set()
    for line in text.splitlines():
        f = line.split()
        try:
            if len(f) > 3 and f[0] == "LISTEN" and ":" in f[3]:
                ports.add(int(f[3].rsplit(":", 1)[1]))
            elif len(f) > 3 and f[3] == "0A" and ":" in f[1]:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
        except ValueError:
            continue
    return ports


# --- the preflight probe's answer ------------------------------------------------------------

@dataclass
class Sections:
    """The combined probe's answer: per section its stdout, stderr and exit code."""

    out: dict[str, str]
    err: dict[str, str]
    rc: dict[str, int]

    def get(self, name: str) -> tuple[str, str, int]:
        return self.out.get(name, ""), self.err.get(name, ""), self.rc.get(name, -1)


def split_sections(stdout: str, stderr: str) -> Sections:
    def split(text: str, rcs: dict[str, int] | None) -> dict[str, str]:
        parts: dict[str, list[str]] = {}
        current = None
        for line in text.splitlines():
            if line.startswith("@@inkctl "):
                word = line[9:].strip()
                if word.startswith("rc ") and current is not None and rcs is not None:
                    rcs[current] = int(word[3:]) if word[3:].strip().lstrip("-").isdigit() else -1
                elif not word.startswith("rc "):
                    current = word
                    parts.setdefault(current, [])
                continue
            if current is not None:
                parts[current].append(line)
        return {k: "\n".join(v) for k, v in parts.items()}

    rcs: dict[str, int] = {}
    return Sections(out=split(stdout, rcs), err=split(stderr, None), rc=rcs)


def image_ids(text: str) -> tuple[str, list[str]] | None:
    """(Id, RepoDigests) of the first image in ``<runtime> image inspect`` JSON; None when there is none."""
    try:
        items = json.loads(text or "[]")
    except json.JSONDecodeError:
        return None
    if not items:
        return None
    it = items[0]
    iid = it.get("Id") or ""
    if iid and not iid.startswith("sha256:"):
        iid = "sha256:" + iid
    return iid, list(it.get("RepoDigests") or [])


# --- the combined probe, run ---------------------------------------------------------------

PROBE_TIMEOUT_S = 60


@dataclass
class HostAnswer:
    """One host's answer to HOST_PROBE: its sections, or the error that cut it off."""

    host: str
    result: Result | None
    sections: Sections | None
    error: HostError | None = None

    def lock_answer(self) -> tuple[str, str, int] | HostError:
        """What ``DeployLock.taken`` reads: the lock section, or the host's error."""
        if self.error is not None:
            return self.error
        assert self.sections is not None  # a host without an error has answered
        return self.sections.get("lock")


def launch_probe_argv(rt: str, image: str, mounts: list[str], lock: tuple[str, str, str, str] | None = None,
                      *, sysfs: str = "", address: str = "") -> list[str]:
    """``sysfs``: the root the fabric is read under (empty: $INKCTL_SYSFS_ROOT on the host, else
    /sys); ``address``: the host's cluster address, resolved on the host."""
    runtime = runtimes.get(rt)
    return ["sh", "-c", HOST_PROBE, "inkctl-preflight", runtime.command, runtime.ps_format(), image,
            *(lock or ("", "", "", "")), sysfs, address, *mounts]


def run_launch_probe(t: Transport, rt: str, image: str, mounts: list[str], lock=None, *, sysfs: str = "",
                     address: str = "") -> HostAnswer:
    """HOST_PROBE on one host: its answer, or the error that cut it off (never raises HostError)."""
    try:
        res = t.run(launch_probe_argv(rt, image, mounts, lock, sysfs=sysfs, address=address), timeout=PROBE_TIMEOUT_S)
    except HostError as e:
        return HostAnswer(t.name, None, None, e)
    return HostAnswer(t.name, res, split_sections(res.text(), res.err_text()))


def image_section(res: Result) -> tuple[str, str, int]:
    """A fresh ``image inspect`` answer in the shape of the probe's image section."""
    return res.text(), res.err_text(), res.exit_code
