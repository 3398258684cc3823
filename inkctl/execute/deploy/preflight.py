"""Preflight: is every host ready for this plan? One failed check and nothing is launched.

Each host answers one combined probe (one SSH round trip, ``probe.HOST_PROBE``): its
containers (``ps --all``, which also proves the runtime answers), nvidia-smi, /proc/meminfo,
the image, listening sockets and mount sources. ``up`` runs that probe once per host with the
deploy lock in it, as each host connects (``probe_one``), and hands the answers here
(``run_preflight(answers=)``);
``doctor`` lets ``run_preflight`` probe by itself. Values reach the remote shell as positional
arguments of ``sh -c SCRIPT``, never inside it. The only second round trip is a pull, when the
recipe allows one and the image is missing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import AbstractSet as Set
from typing import Callable, Iterable, Sequence

from inkctl.errors import InkctlError, UsageError
from inkctl.execute.state import gpu as gpu_probe
from inkctl.execute.events import Event
from inkctl.execute.hosts.fanout import each
from inkctl.execute.state.deployed import ContainerState, parse_ps
from inkctl.execute.state.probe import PULL, HostAnswer, Sections, image_ids, listening_ports, parse_links, run_launch_probe
from inkctl import runtimes
from inkctl.runtimes.spec import repository
from inkctl.execute.hosts.transport import HostError, Result, Transport
from inkctl.plan.deploy import api_port
from inkctl.plan.step import Plan, Run
from inkctl.recipe.model import Recipe

CHECKS = ("ssh", "runtime", "gpus", "gpu-free", "image", "paths", "ports", "memory", "network", "name", "weights")
OK, WARN, FAIL, SKIPPED, NOT_RUN = "ok", "warn", "fail", "skipped", "not-run"
PULL_TIMEOUT_S = 3600


@dataclass(frozen=True)
class CheckResult:
    host: str
    rank: int | None
    check: str  # one of CHECKS
    status: str  # ok | warn | fail | skipped | not-run
    detail: str
    hint: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def as_dict(self) -> dict:
        return {"host": self.host, "rank": self.rank, "check": self.check, "status": self.status,
                "detail": self.detail, "hint": self.hint}


@dataclass(frozen=True)
class PreflightReport(Event):
    """The whole table, emitted once to an event sink (pass or fail)."""

    ok: bool
    results: tuple[CheckResult, ...]

    def as_dict(self) -> dict:
        return {"event": "preflight", "ok": self.ok, "checks": [r.as_dict() for r in self.results]}


class Unreachable:
    """Stands in for a host that could not be connected: the ssh check reports its error."""

    def __init__(self, error: HostError):
        self.name = error.host
        self.error = error

    # every member of the Transport protocol (mypy checks it where one is used as a transport):
    # whatever is asked of the host, the answer is the error that kept it unconnected
    def run(self, argv: Sequence[str], *, timeout: float | None = None,
            stdin: bytes | Iterable[bytes] | None = None) -> Result:
        raise self.error

    def put(self, path: str, content: bytes, mode: int) -> None:
        raise self.error

    def read(self, path: str) -> bytes | None:
        raise self.error

    def remove_dir(self, path: str) -> None:
        raise self.error

    def stream(self, argv: Sequence[str], on_line: Callable[[str], None],
               stop: threading.Event | None = None) -> int:
        raise self.error

    def alive(self) -> bool:
        return False  # never reached

    def close(self) -> None:
        pass


class PreflightFailed(InkctlError):
    """At least one check failed; ``results`` holds every check of every host."""

    def __init__(self, message: str, results: list[CheckResult]):
        super().__init__(message, hint="fix what FAILed, or waive a check knowingly with --skip-check NAME")
        self.results = results


def check_names(skip) -> set[str]:
    skip = set(skip or ())
    unknown = sorted(skip - set(CHECKS))
    if unknown:
        raise UsageError(f"--skip-check {', '.join(unknown)}: no such check", hint="checks: " + ", ".join(CHECKS))
    if "ssh" in skip:
        raise UsageError("--skip-check ssh: every other check runs over ssh; it cannot be waived")
    return skip


def probe_one(recipe: Recipe, plan: Plan, t: Transport, *, image: str | None = None, lock=None) -> HostAnswer:
    """One host's answer to the combined probe (taking the deploy lock first when ``lock`` is given)."""
    return run_launch_probe(t, plan.host(t.name).runtime, host_image(recipe, plan, image),
                            [src for _, src in mount_sources(recipe, plan, t.name)],
                            lock.probe_args(t.name) if lock is not None else None)


def host_image(recipe: Recipe, plan: Plan, image: str | None = None) -> str:
    """The image the plan's containers run: ``image`` (a built one), the plan's, or engine.image.ref."""
    return image or planned_image(plan) or recipe.engine.image.ref


def run_preflight(recipe: Recipe, plan: Plan, transports: dict[str, Transport], *, skip: Set[str] = frozenset(),
                  image: str | None = None, sink=None, answers: dict[str, HostAnswer] | None = None,
                  weights=None) -> list[CheckResult]:
    """Check every host of ``plan`` in parallel; raise PreflightFailed (an InkctlError) if any check fails.

    ``image`` is the image the plan runs when it is not engine.image.ref (a built image).
    ``sink`` (an event sink) receives one PreflightReport (pass or fail) before anything is
    raised; the error carries every result too (``PreflightFailed.results``). A host missing from ``transports`` (or an Unreachable) fails its ssh check.
    ``answers`` are the hosts' answers to the combined probe when the caller ran it
    (``probe_one`` per host); without them each host is probed here. ``weights`` (inkctl.weights.preflight)
    checks the pinned model's files on every host.
    """
    skip = check_names(skip)
    per_host = each(lambda name: _host_checks(recipe, plan, name, transports.get(name), skip, image,
                                              None if answers is None else answers.get(name)),
                     [h.name for h in plan.hosts], name="preflight")
    results = [r for checks in per_host for r in checks]
    if weights is not None:
        checked = weights.check(plan, transports) if "weights" not in skip else {}
        results = _with_weights(results, checked, plan, skip)
    failed_any = any(r.failed for r in results)
    if sink is not None:
        sink.emit(PreflightReport(ok=not failed_any, results=tuple(results)))
    failed = [r for r in results if r.failed]
    if failed:
        where = ", ".join(f"{r.host} ({r.check})" for r in failed)
        message = f"preflight failed on {where}: nothing was launched"
        # the weights check names the files and the command that fixes them: worth the message itself
        message += "".join(f"\n  {r.host}: {r.detail}" + (f"\n    {r.hint}" if r.hint else "")
                           for r in failed if r.check == "weights")
        raise PreflightFailed(message, results)
    return results


# --- one host -------------------------------------------------------------------------------

@dataclass
class _Host:
    recipe: Recipe
    plan: Plan
    name: str
    rank: int
    runtime: str
    skip: set[str]
    image: str
    built: bool  # the image is built by inkctl: no digest pin, no pull
    results: dict[str, CheckResult]

    def put(self, check: str, status: str, detail: str, hint: str | None = None) -> None:
        if check in self.skip:
            status, detail, hint = SKIPPED, "skipped (--skip-check)" + (f"; would be: {detail}" if status == FAIL else ""), None
        self.results[check] = CheckResult(self.name, self.rank, check, status, detail, hint)


def _host_checks(recipe: Recipe, plan: Plan, name: str, t: Transport | None, skip: set[str], image: str | None,
                 answer: HostAnswer | None = None) -> list[CheckResult]:
    ph = plan.host(name)
    image = host_image(recipe, plan, image)
    h = _Host(recipe, plan, name, ph.rank, ph.runtime, skip, image, image != recipe.engine.image.ref, {})
    mounts = mount_sources(recipe, plan, name)
    if answer is None:
        if t is None:
            answer = HostAnswer(name, None, None, HostError(name, "unreachable", "not connected"))
        else:
            answer = run_launch_probe(t, ph.runtime, image, [src for _, src in mounts])
    if answer.error is not None:
        e = answer.error
        h.results["ssh"] = CheckResult(name, ph.rank, "ssh", FAIL, e.reason, e.hint)
        for c in CHECKS[1:]:
            h.put(c, NOT_RUN, "host unreachable")
        return _ordered(h)
    # an answer without an error carries its result and sections, and came from a transport
    assert answer.result is not None and answer.sections is not None and t is not None
    h.results["ssh"] = CheckResult(name, ph.rank, "ssh", OK, f"connected ({answer.result.seconds:.2f} s for the probe)")
    s = answer.sections
    runtime_ok = _runtime(h, s)
    _gpus(h, s)
    _gpu_free(h, s)
    _memory(h, s)
    own: list[str] = []
    if runtime_ok:
        own = _name(h, s)
        _image(h, s, t)
    else:
        h.put("name", NOT_RUN, f"{h.runtime} is not answering")
        h.put("image", NOT_RUN, f"{h.runtime} is not answering")
    _paths(h, s, mounts)
    _ports(h, s, own)
    _network(h, s)
    return _ordered(h)


def _with_weights(results: list[CheckResult], checked: dict, plan: Plan, skip: set[str]) -> list[CheckResult]:
    """Each host's weights check after its others (the table groups rows by host)."""
    out: list[CheckResult] = []
    for h in plan.hosts:
        rows = [r for r in results if r.host == h.name]
        ssh_failed = any(r.check == "ssh" and r.failed for r in rows)
        if "weights" in skip:
            extra = CheckResult(h.name, h.rank, "weights", SKIPPED, "skipped (--skip-check)")
        elif ssh_failed or h.name not in checked:
            extra = CheckResult(h.name, h.rank, "weights", NOT_RUN, "host unreachable")
        else:
            status, detail, hint = checked[h.name]
            extra = CheckResult(h.name, h.rank, "weights", status, detail, hint)
        out += rows + [extra]
    return out


def _ordered(h: _Host) -> list[CheckResult]:
    return [h.results[c] for c in CHECKS if c in h.results]


def _last_line(*texts: str) -> str:
    for text in texts:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if lines:
            return lines[-1]
    return ""


def _runtime(h: _Host, s: Sections) -> bool:
    """The runtime answers when it lists its containers (the same ``ps`` serves the name check)."""
    out, err, rc = s.get("containers")
    rt = h.runtime
    if rc == 127:
        h.put("runtime", FAIL, f"{rt} is not installed (not on the SSH user's PATH)",
              f"install {rt} on {h.name}, or set container.runtime to the one it has")
        return False
    if rc != 0:
        why = _last_line(err, out) or f"exit {rc}"
        h.put("runtime", FAIL, f"{rt} is installed but not answering (runtime down): {why}",
              runtimes.get(rt).not_answering(h.name))
        return False
    found = parse_ps(h.name, out)
    running = sum(1 for c in found if c.running)
    h.put("runtime", OK, f"{rt} answering: {len(found)} container{'s' if len(found) != 1 else ''} ({running} running)")
    return True


def _read_gpus(h: _Host, s: Sections) -> list[gpu_probe.Gpu]:
    """The host's GPUs, by the vendor's tool: nvidia-smi, or amd-smi/rocm-smi for AMD."""
    if h.recipe.hardware.vendor == "amd":
        from inkctl.execute.state import gpu_amd

        out, err, rc = s.get("amdgpus")
        tool, _, body = out.partition("\n")
        if rc == 127 and tool.strip() not in ("amd-smi", "rocm-smi"):
            raise gpu_amd.not_found()
        if rc != 0:
            raise gpu_probe.GpuProbeError(f"{tool.strip()} failed (exit {rc}): {_last_line(err, body) or 'no output'}",
                                          hint="run on the host: " + " ".join(gpu_amd.AMD_SMI))
        return gpu_amd.parse(tool.strip(), body)
    out, err, rc = s.get("gpus")
    if rc != 0:
        raise gpu_probe.query_failure(rc, out + "\n" + err)
    return gpu_probe.parse_query_gpu(out)


def _gpus(h: _Host, s: Sections) -> None:
    hw = h.recipe.hardware
    try:
        gpus = _read_gpus(h, s)
    except gpu_probe.GpuProbeError as e:
        h.put("gpus", FAIL, e.message, e.hint)
        return
    mem = _meminfo(s)
    found = gpu_probe.describe(gpus, mem)
    if len(gpus) < hw.gpus_per_host:
        h.put("gpus", FAIL, f"found {found}; the recipe needs {hw.gpus_per_host} GPU(s) per host",
              "run on hosts with enough GPUs, or change hardware.gpus_per_host")
        return
    wrong = [g for g in gpus if g.compute_capability != hw.arch]
    if wrong:
        word = "gfx target" if hw.vendor == "amd" else "compute capability"
        seen = ", ".join(sorted({f"{g.compute_capability} ({g.name})" for g in wrong}))
        h.put("gpus", FAIL, f"found {word} {seen}; the recipe needs {hw.arch} ({hw.accelerator})",
              f"this recipe is for {hw.accelerator}: use one made for this host's GPUs")
        return
    unified = all(g.unified_memory for g in gpus)
    notes = []
    if unified != hw.unified_memory:
        notes.append("the recipe expects unified memory" if hw.unified_memory else "nvidia-smi reports no per-GPU memory ([N/A])")
    if not unified and hw.memory_gib:
        small = [g for g in gpus if (g.memory_total_mib or 0) / gpu_probe.MIB_PER_GIB < 0.95 * hw.memory_gib]
        if small:
            g = small[0]
            h.put("gpus", FAIL, f"GPU {g.index} has {(g.memory_total_mib or 0) / gpu_probe.MIB_PER_GIB:.1f} GiB; the recipe expects "
                  f"{hw.memory_gib:g} GiB per GPU (hardware.memory_gib); found {found}")
            return
    for g in gpus:
        total, free = g.memory_total_mib, g.memory_free_mib
        if total and free is not None and free < 0.9 * total:
            notes.append(f"GPU {g.index}: {(total - free) / gpu_probe.MIB_PER_GIB:.1f} GiB already in use")
    h.put("gpus", WARN if notes else OK, found + ("; " + "; ".join(notes) if notes else ""))


def planned_gpus(plan: Plan, host: str) -> list[int] | None:
    """The GPU indices the host's ranks are given (``--gpus "device=0,1"``, ``--device
    nvidia.com/gpu=0``), from the plan's container specs; None: every GPU."""
    out: list[int] = []
    for c in _containers(plan, host):
        opts = list(c.options)
        if "/dev/kfd" in opts:  # ROCm: /dev/dri holds every card, ROCR_VISIBLE_DEVICES selects them
            rocr = dict(c.env).get("ROCR_VISIBLE_DEVICES")
            if rocr is None:
                return None
            out += [int(x) for x in rocr.split(",") if x.strip().isdigit()]
            continue
        for flag, value in zip(opts, opts[1:]):
            if flag == "--gpus":
                v = value.strip('"')
                if not v.startswith("device="):
                    return None
                out += [int(x) for x in v[len("device="):].split(",") if x.isdigit()]
            elif flag == "--device" and value.startswith("nvidia.com/gpu="):
                v = value.split("=", 1)[1]
                if not v.isdigit():
                    return None
                out.append(int(v))
    return sorted(set(out)) if out else None


def _gpu_free(h: _Host, s: Sections) -> None:
    """No other process holds memory on a GPU the plan gives this host's ranks: a leftover
    engine or someone else's job makes the boot die of CUDA out-of-memory minutes later."""
    if h.recipe.hardware.vendor == "amd":
        _amd_gpu_free(h, s)
        return
    out, err, rc = s.get("gpuapps")
    if rc == 127:
        h.put("gpu-free", NOT_RUN, "nvidia-smi not found")
        return
    uuids, _, apps = out.partition("@@apps")
    if rc != 0 or not _:
        h.put("gpu-free", WARN, f"nvidia-smi --query-compute-apps failed: {_last_line(err, out) or f'exit {rc}'}",
              "run on the host: " + " ".join(gpu_probe.APPS_QUERY))
        return
    holders = gpu_probe.parse_holders(uuids, apps)
    planned = planned_gpus(h.plan, h.name)
    ours = [x for x in holders if planned is None or x.gpu is None or x.gpu in planned]
    which = ("GPU " if len(planned) == 1 else "GPUs ") + ",".join(map(str, planned)) if planned is not None else "any GPU"
    if not ours:
        others = f" ({len(holders)} process(es) on GPUs this plan does not use)" if holders else ""
        h.put("gpu-free", OK, f"no other process holds memory on {which}{others}")
        return
    pids = " ".join(str(x.pid) for x in ours if x.pid is not None)
    h.put("gpu-free", FAIL, f"{len(ours)} process(es) hold GPU memory the plan needs on {h.name}: "
          + "; ".join(x.describe() for x in ours),
          f"stop them (on {h.name}: ps -o pid,user,cmd -p {pids or 'PID'}; a leftover inkctl deployment: "
          "inkctl down), choose free GPUs (the inventory's gpus), or --skip-check gpu-free to boot anyway")


# An AMD GPU with more than this share of its memory in use is taken: amd-smi and rocm-smi list
# no compute processes the way nvidia-smi does, so the memory is the evidence (an idle MI300X
# reports a few hundred MiB of its 192 GiB in use).
AMD_BUSY_SHARE = 0.1


def _amd_gpu_free(h: _Host, s: Sections) -> None:
    """gpu-free for AMD hosts: the memory in use on the GPUs the plan gives this host's ranks,
    from ``amd-smi metric --mem-usage`` (or rocm-smi's used VRAM, where it answered instead)."""
    from inkctl.execute.state import gpu_amd

    out, _, rc = s.get("amdgpus")
    tool = out.partition("\n")[0].strip()
    try:
        if tool == "amd-smi":
            mout, merr, mrc = s.get("amdmem")
            if mrc != 0:
                h.put("gpu-free", WARN, f"amd-smi metric --mem-usage failed: {_last_line(merr, mout) or f'exit {mrc}'}",
                      "run on the host: " + " ".join(gpu_amd.AMD_SMI_MEM))
                return
            used = gpu_amd.parse_mem_usage(mout)
            source = "amd-smi metric --mem-usage"
        elif tool == "rocm-smi" and rc == 0:
            used = {g.index: (g.memory_total_mib - g.memory_free_mib, g.memory_total_mib)
                    for g in gpu_amd.parse("rocm-smi", out.partition("\n")[2])
                    if g.memory_total_mib and g.memory_free_mib is not None}
            source = "rocm-smi --showmeminfo vram"
        else:
            h.put("gpu-free", NOT_RUN, "no answer from amd-smi or rocm-smi (see gpus)")
            return
    except gpu_probe.GpuProbeError as e:
        h.put("gpu-free", WARN, e.message, e.hint)
        return
    planned = planned_gpus(h.plan, h.name)
    which = ("GPU " if planned is not None and len(planned) == 1 else "GPUs ") + ",".join(map(str, planned)) \
        if planned is not None else "any GPU"
    busy = [(i, u, t) for i, (u, t) in sorted(used.items()) if (planned is None or i in planned) and u > AMD_BUSY_SHARE * t]
    if not busy:
        h.put("gpu-free", OK, f"no GPU memory in use on {which} ({source})")
        return
    gib = gpu_probe.MIB_PER_GIB
    h.put("gpu-free", FAIL, f"{len(busy)} GPU(s) the plan needs on {h.name} already hold memory: "
          + "; ".join(f"GPU {i} {u / gib:.1f} of {t / gib:.1f} GiB in use" for i, u, t in busy) + f" ({source})",
          f"stop what runs there (on {h.name}: amd-smi process), choose free GPUs (the inventory's gpus), "
          "or --skip-check gpu-free to boot anyway")


def _meminfo(s: Sections) -> gpu_probe.MemInfo | None:
    out, _, rc = s.get("meminfo")
    try:
        return gpu_probe.parse_meminfo(out) if rc == 0 else None
    except gpu_probe.GpuProbeError:
        return None


def _memory(h: _Host, s: Sections) -> None:
    out, err, rc = s.get("meminfo")
    try:
        mem = gpu_probe.parse_meminfo(out)
    except gpu_probe.GpuProbeError as e:
        h.put("memory", FAIL, e.message if rc == 0 else f"cannot read /proc/meminfo: {_last_line(err) or e.message}", e.hint)
        return
    r = h.recipe
    text = f"MemAvailable {mem.available_gib:.1f} of {mem.total_gib:.1f} GiB"
    if not r.hardware.unified_memory:
        h.put("memory", OK, text)
        return
    floor = r.watchdog.mem_available_min_gib
    if mem.available_gib < floor:
        h.put("memory", WARN, f"{text}: below the watchdog threshold of {floor:g} GiB (unified memory); "
              "the watchdog would stop the boot" + _drop_note(r), "free memory on the host (stop other workloads, drop caches)")
        return
    if r.model.weights_gb:
        per_host = r.model.weights_gb * 1e9 / 2**30 / r.hardware.nodes
        if mem.available_gib < per_host + floor:
            h.put("memory", WARN, f"{text}: about {per_host:.1f} GiB of weights per host plus the {floor:g} GiB "
                  "watchdog floor do not fit (unified memory)")
            return
    h.put("memory", OK, f"{text} (unified memory; watchdog floor {floor:g} GiB)" + _drop_note(r))


def _drop_note(r: Recipe) -> str:
    from inkctl.plan import pagecache

    return "; the page cache is dropped before the engines start" if pagecache.wanted(r) else ""


def _image(h: _Host, s: Sections, t: Transport) -> None:
    out, err, rc = s.get("image")
    pin = None if h.built else h.recipe.engine.image.digest
    may_pull = h.recipe.engine.image.pull and not h.built and "image" not in h.skip
    found = image_ids(out) if rc == 0 else None
    if found is not None and (pin is None or _matches(found, pin)):
        iid, _ = found
        h.put("image", OK, f"{h.image} present ({iid[:19]})" + (", matches the pinned digest" if pin else ""))
        return
    if not may_pull:
        if found is None:
            hint = ("build it first: inkctl build" if h.built else
                    f"load it on {h.name} (docker save {h.image} | ssh {h.name} {h.runtime} load), or set engine.image.pull: true")
            h.put("image", FAIL, f"{h.image} is not on the host", hint)
        else:
            h.put("image", FAIL, f"{h.image} on the host is {found[0][:19]}, not the pinned {pin}",
                  f"put the pinned image on {h.name} ({h.runtime} pull {repository(h.image)}@{pin}), "
                  "or update engine.image.digest (inkctl lock)")
        return
    src = f"{repository(h.image)}@{pin}" if pin else h.image
    why = "missing" if found is None else f"{found[0][:19]}, not the pinned digest"
    try:
        res = t.run(["sh", "-c", PULL, "inkctl-pull", runtimes.get(h.runtime).command, src, h.image], timeout=PULL_TIMEOUT_S)
    except HostError as e:
        h.put("image", FAIL, f"{h.image} was {why}; the pull was cut off: {e.reason}")
        return
    pulled = image_ids(res.text()) if res.ok else None
    if pulled is None or (pin and not _matches(pulled, pin)):
        h.put("image", FAIL, f"{h.image} was {why}; pulling {src} failed: {_last_line(res.err_text()) or f'exit {res.exit_code}'}",
              "check the registry is reachable from the host, or load the image by hand")
        return
    h.put("image", OK, f"{h.image} was {why}: pulled {src} ({pulled[0][:19]})")


def _matches(found: tuple[str, list[str]], pin: str) -> bool:
    iid, digests = found
    return iid == pin or any(d.endswith("@" + pin) for d in digests)


def _name(h: _Host, s: Sections) -> list[str]:
    """Fails on a planned name held by a container of another deployment; returns our own running ones."""
    out, _, _ = s.get("containers")
    planned = {c.name for c in h.plan.containers if c.host == h.name}
    found: list[ContainerState] = [c for c in parse_ps(h.name, out) if c.name in planned]
    foreign = [c for c in found if c.deployment != h.plan.deployment]
    ours = [c for c in found if c.deployment == h.plan.deployment]
    if foreign:
        c = foreign[0]
        owner = f"deployment {c.deployment!r}" if c.deployment else "no inkctl label"
        h.put("name", FAIL, f"{c.name} is taken by another container ({owner}, {c.state})",
              f"remove it on {h.name} ({h.runtime} rm -f {c.name}) or rename the deployment")
        return []
    if ours:
        states = ", ".join(f"{c.name} {c.state}" for c in ours)
        h.put("name", OK, f"this deployment's containers exist ({states}); up replaces or keeps them")
    else:
        h.put("name", OK, "free: " + ", ".join(c.name for c in h.plan.containers if c.host == h.name))
    return [c.name for c in ours if c.running]


def _containers(plan: Plan, host: str | None = None):
    """The container specs of the plan's run steps (of one host, or all)."""
    for step in plan.steps():
        if isinstance(step, Run) and step.container is not None and host in (None, step.host):
            yield step.container


def planned_image(plan: Plan) -> str | None:
    """The image the plan's containers run."""
    return next((c.image for c in _containers(plan)), None)


def mount_sources(recipe: Recipe, plan: Plan, host: str) -> list[tuple[int, str]]:
    """(index in container.mounts, expanded source) of the required mounts of the host's containers
    (their specs list container.mounts first, in order)."""
    spec = next(_containers(plan, host), None)
    if spec is None:
        return []
    return [(i, spec.mounts[i].source) for i, m in enumerate(recipe.container.mounts) if m.required]


def _paths(h: _Host, s: Sections, mounts: list[tuple[int, str]]) -> None:
    if not mounts:
        h.put("paths", OK, "no host paths to check")
        return
    out, _, _ = s.get("paths")
    answers = out.splitlines()
    missing = [(i, src) for (i, src), a in zip(mounts, answers + ["missing"] * len(mounts)) if a != "present"]
    if missing:
        i, src = missing[0]
        raw = h.recipe.container.mounts[i].source
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        where = f" from container.mounts[{i}].source {raw}" if raw != src else f" (container.mounts[{i}].source)"
        h.put("paths", FAIL, f"{src} does not exist{where}{more}",
              f"create it on {h.name}, or set the right value in that host's vars in the inventory")
        return
    h.put("paths", OK, "present: " + ", ".join(src for _, src in mounts))


def planned_ports(recipe: Recipe, rank: int) -> list[tuple[int, str]]:
    """Ports a rank binds on its host before anything else runs: the head's API and rendezvous."""
    if rank != 0:
        return []
    out = [(api_port(recipe), "engine")]
    e = recipe.engine
    if recipe.multinode:
        if e.kind == "sglang":
            out.append((e.dist_init_port, "dist-init"))
        elif e.multinode == "ray":
            out.append((e.ray_port, "ray"))
        else:
            out.append((e.master_port, "master"))
    return out


def _ports(h: _Host, s: Sections, own_running: list[str]) -> None:
    wanted = planned_ports(h.recipe, h.rank)
    if not wanted:
        h.put("ports", OK, "no fixed port on a worker")
        return
    out, _, _ = s.get("listen")
    busy = listening_ports(out)
    taken = [(p, what) for p, what in wanted if p in busy]
    free = ", ".join(f"{p} ({what})" for p, what in wanted)
    if taken and own_running:
        h.put("ports", OK, f"{', '.join(str(p) for p, _ in taken)} held, presumably by this deployment ({', '.join(own_running)})")
    elif taken:
        p, what = taken[0]
        h.put("ports", FAIL, "in use: " + ", ".join(f"{p} ({what})" for p, what in taken),
              f"stop what listens on {p} on {h.name} (ss -ltnp 'sport = :{p}'), or change the port in the recipe")
    else:
        h.put("ports", OK, "free: " + free)


def _planned_env(plan: Plan, host: str) -> dict[str, str]:
    spec = next(_containers(plan, host), None)
    return dict(spec.env) if spec is not None else {}


def _network(h: _Host, s: Sections) -> None:
    """The NCCL/Gloo interface and RDMA adapters the host's ranks are given (the plan's
    NCCL_SOCKET_IFNAME and NCCL_IB_HCA) exist on the host, and the interface is up."""
    r = h.recipe
    env = _planned_env(h.plan, h.name)
    ifname, hcas = env.get("NCCL_SOCKET_IFNAME", ""), env.get("NCCL_IB_HCA", "")
    if not (r.multinode or r.network.rdma or hcas):
        h.put("network", OK, "single node: no NCCL network to check")
        return
    try:
        notes = [_interface_note(h.name, ifname, parse_links(s.get("net")[0]))]
        if hcas:
            optional = "rdma" in r.network.model_fields_set and not r.network.rdma
            notes.append(_adapters_note(h.name, hcas, [ln for ln in s.get("hcas")[0].split() if ln], optional))
    except _Unfit as e:
        h.put("network", FAIL, e.detail, e.hint)
        return
    h.put("network", OK, "; ".join(notes))


class _Unfit(Exception):
    """A network check's failure: what is wrong, and what to do."""

    def __init__(self, detail: str, hint: str):
        super().__init__(detail)
        self.detail, self.hint = detail, hint


def _interface_note(host: str, ifname: str, links: dict) -> str:
    """Every interface NCCL_SOCKET_IFNAME names exists and one of each is up (raises _Unfit)."""
    if not ifname:
        return "no NCCL_SOCKET_IFNAME: NCCL picks an interface itself"
    if ifname.startswith("^"):
        return f"NCCL_SOCKET_IFNAME={ifname} (an exclusion list: not checked)"
    have = ", ".join(f"{n} ({'up' if ln.up else ln.operstate})" for n, ln in sorted(links.items())) or "none"
    exact = ifname.startswith("=")
    notes = []
    for want in ifname.lstrip("=").split(","):
        found = [ln for n, ln in sorted(links.items()) if (n == want if exact else n.startswith(want))]
        if not found:
            raise _Unfit(f"interface {want} (NCCL_SOCKET_IFNAME) does not exist on {host}; it has: {have}",
                         f"set nccl_socket_ifname for {host} in the inventory (or network.socket_ifname) to one of its interfaces")
        if not any(ln.up for ln in found):
            ln = found[0]
            raise _Unfit(f"interface {ln.name} (NCCL_SOCKET_IFNAME) on {host} is {ln.operstate}, not up; it has: {have}",
                         f"bring it up on {host} (ip link set {ln.name} up) or choose another interface")
        notes.append(f"{', '.join(ln.name for ln in found if ln.up)} up")
    return "; ".join(notes)


def _adapters_note(host: str, hcas: str, present: list[str], optional: bool = False) -> str:
    """Every RDMA adapter NCCL_IB_HCA names is in /sys/class/infiniband (raises _Unfit);
    ``optional`` (network.rdma: false, said so): a missing one is a note, not a failure."""
    # NCCL_IB_HCA entries may carry a port (mlx5_0:1) and a ^/= prefix
    wanted = [] if hcas.startswith("^") else [x.split(":")[0] for x in hcas.lstrip("=").split(",") if x]
    missing = [x for x in wanted if x not in present]
    notes = []
    if missing and optional:
        notes.append(f"RDMA adapter {', '.join(missing)} absent: not required (network.rdma: false)")
        missing = []
        wanted = [x for x in wanted if x in present]
    if missing:
        raise _Unfit(f"RDMA adapter {', '.join(missing)} (NCCL_IB_HCA) not in /sys/class/infiniband on {host}; "
                     f"it has: {', '.join(present) or 'none (no RDMA driver loaded)'}",
                     f"set ib_hca for {host} in the inventory (or network.ib_hca) to one it has (ibv_devices lists them)")
    notes.append(f"RDMA {', '.join(wanted)} present" if wanted else f"NCCL_IB_HCA={hcas}")
    return "; ".join(notes)
