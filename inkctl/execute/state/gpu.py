"""What a host's GPUs are, from ``nvidia-smi --query-gpu``; memory from /proc/meminfo.

Pure parsers: the remote call lives in preflight (one round trip per host). On unified-memory
hardware (GB10) nvidia-smi reports memory as ``[N/A]``; MemAvailable is the number that
matters there ("Inkling on Two DGX Sparks", Wall 2).
"""

from __future__ import annotations

from dataclasses import dataclass

from inkctl.errors import InkctlError

FIELDS = ("index", "name", "compute_cap", "memory.total", "memory.free", "driver_version")
QUERY = ("nvidia-smi", "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits")
# what the launch probe asks: QUERY's fields and each GPU's uuid last (split on the host into
# QUERY's answer and UUID_QUERY's: one nvidia-smi instead of two)
QUERY_UUID = ("nvidia-smi", "--query-gpu=" + ",".join((*FIELDS, "uuid")), "--format=csv,noheader,nounits")

DRIVER_DOWN = "couldn't communicate with the NVIDIA driver"
_NA = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", ""}
MIB_PER_GIB = 1024


class GpuProbeError(InkctlError):
    """nvidia-smi is missing, cannot reach the driver, or answered something we cannot read."""


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    compute_capability: str  # "9.0", "12.1"
    memory_total_mib: int | None  # None: unified memory ([N/A])
    memory_free_mib: int | None
    driver: str

    @property
    def unified_memory(self) -> bool:
        return self.memory_total_mib is None

    def as_dict(self) -> dict:
        return {"index": self.index, "name": self.name, "compute_capability": self.compute_capability,
                "memory_total_mib": self.memory_total_mib, "memory_free_mib": self.memory_free_mib,
                "driver": self.driver}


@dataclass(frozen=True)
class MemInfo:
    total_kib: int
    available_kib: int

    @property
    def total_gib(self) -> float:
        return self.total_kib / 1024 / 1024

    @property
    def available_gib(self) -> float:
        return self.available_kib / 1024 / 1024


def _mib(value: str, what: str, lineno: int) -> int | None:
    v = value.strip()
    if v.lower() in _NA:
        return None
    if v.endswith("MiB"):  # tolerate a query made without nounits
        v = v[:-3].strip()
    try:
        return int(float(v))
    except ValueError:
        raise GpuProbeError(f"nvidia-smi line {lineno}: {what} is {value.strip()!r}, not a number of MiB") from None


def parse_query_gpu(text: str) -> list[Gpu]:
    """Parse the CSV answer of ``QUERY``; raises GpuProbeError naming the line it cannot read."""
    gpus: list[Gpu] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("index,"):  # blank, or a header from a query without noheader
            continue
        if DRIVER_DOWN in line:
            raise driver_down(line)
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(FIELDS):
            raise GpuProbeError(
                f"unexpected nvidia-smi output on line {lineno}: {_clip(line)!r} "
                f"(expected {len(FIELDS)} comma-separated fields: {', '.join(FIELDS)})",
                hint="run the query by hand on the host: " + " ".join(QUERY))
        index, name, cc, total, free, driver = parts
        if not index.isdigit():
            raise GpuProbeError(f"nvidia-smi line {lineno}: GPU index {index!r} is not a number")
        if not _is_capability(cc):
            raise GpuProbeError(f"nvidia-smi line {lineno}: compute capability {cc!r} is not MAJOR.MINOR",
                                hint="a driver older than 510 cannot report compute_cap; upgrade the driver")
        gpus.append(Gpu(index=int(index), name=name, compute_capability=cc,
                        memory_total_mib=_mib(total, "memory.total", lineno),
                        memory_free_mib=_mib(free, "memory.free", lineno), driver=driver))
    return gpus


def _is_capability(cc: str) -> bool:
    major, dot, minor = cc.partition(".")
    return bool(dot) and major.isdigit() and minor.isdigit()


def _clip(s: str, n: int = 120) -> str:
    return s if len(s) <= n else s[:n] + "..."


def driver_down(output: str) -> GpuProbeError:
    return GpuProbeError(
        "the NVIDIA driver is not loaded (nvidia-smi: " + _clip(output.strip().splitlines()[0]) + ")",
        hint="load it (modprobe nvidia) or reboot after a driver install, then check with nvidia-smi")


def query_failure(exit_code: int, output: str) -> GpuProbeError:
    """The error for a non-zero nvidia-smi exit; 127 means it is not installed."""
    if exit_code == 127:
        return GpuProbeError("nvidia-smi not found",
                             hint="install the NVIDIA driver utilities, or put nvidia-smi on the SSH user's PATH")
    if DRIVER_DOWN in output:
        return driver_down(output[output.index("NVIDIA-SMI") if "NVIDIA-SMI" in output else 0:])
    first = next((ln.strip() for ln in output.splitlines() if ln.strip()), "no output")
    return GpuProbeError(f"nvidia-smi failed (exit {exit_code}): {_clip(first)}",
                         hint="run on the host: " + " ".join(QUERY))


def parse_meminfo(text: str) -> MemInfo:
    """MemTotal and MemAvailable (kB) from /proc/meminfo."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if key in ("MemTotal", "MemAvailable") and fields and fields[0].isdigit():
            values[key] = int(fields[0])
    missing = [k for k in ("MemTotal", "MemAvailable") if k not in values]
    if missing:
        raise GpuProbeError(f"/proc/meminfo has no {' or '.join(missing)}",
                            hint="a kernel older than 3.14 has no MemAvailable; it is needed on unified memory")
    return MemInfo(total_kib=values["MemTotal"], available_kib=values["MemAvailable"])


def describe(gpus: list[Gpu], mem: MemInfo | None = None) -> str:
    """One line for people, e.g. '8x NVIDIA H200, sm 9.0, 140.4 GiB (139.8 free) each, driver 580.159.04'."""
    if not gpus:
        return "no GPU"
    names = sorted({g.name for g in gpus})
    ccs = sorted({g.compute_capability for g in gpus})
    arch = "" if ccs[0].startswith("gfx") else "sm "  # AMD: the gfx target as it is
    text = f"{len(gpus)}x {'/'.join(names)}, {arch}{'/'.join(ccs)}"
    if all(g.unified_memory for g in gpus):
        if mem is not None:
            text += f", unified memory: MemAvailable {mem.available_gib:.1f} of {mem.total_gib:.1f} GiB"
        else:
            text += ", unified memory"
    else:
        totals = [g.memory_total_mib or 0 for g in gpus]
        frees = [g.memory_free_mib or 0 for g in gpus]
        text += f", {min(totals) / MIB_PER_GIB:.1f} GiB ({min(frees) / MIB_PER_GIB:.1f} free) each"
    return text + f", driver {gpus[0].driver}"


# --------------------------------------------------------------- who else holds the GPUs

UUID_QUERY = ("nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader")
APPS_QUERY = ("nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
              "--format=csv,noheader,nounits")


@dataclass(frozen=True)
class GpuHolder:
    """A process holding memory on a GPU (``nvidia-smi --query-compute-apps``)."""

    gpu: int | None  # the GPU's index (None: a uuid the index query did not list)
    uuid: str
    pid: int | None
    process: str
    used_mib: int | None

    def describe(self) -> str:
        mem = f"{self.used_mib / MIB_PER_GIB:.1f} GiB" if self.used_mib is not None else "memory unknown"
        pid = f"pid {self.pid}" if self.pid is not None else "pid unknown"
        return f"GPU {self.gpu if self.gpu is not None else self.uuid}: {pid} ({self.process}) holds {mem}"


def parse_holders(uuids_text: str, apps_text: str) -> list[GpuHolder]:
    """``UUID_QUERY``'s answer (index, uuid) and ``APPS_QUERY``'s (an empty answer: nothing
    runs). A row nvidia-smi cannot fill (``[N/A]``, ``[Insufficient Permissions]``) still counts."""
    index: dict[str, int] = {}
    for line in uuids_text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            index[parts[1]] = int(parts[0])
    out = []
    for line in apps_text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 4 or not parts[0].startswith(("GPU-", "MIG-")):
            continue  # a header, a blank line
        uuid, pid, process, used = parts[0], parts[1], ", ".join(parts[2:-1]), parts[-1]
        if used.endswith("MiB"):
            used = used[:-3].strip()
        out.append(GpuHolder(gpu=index.get(uuid), uuid=uuid, pid=int(pid) if pid.isdigit() else None,
                             process=process, used_mib=int(used) if used.isdigit() else None))
    return out
