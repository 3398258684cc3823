"""``--slurm`` below the command line: ``up`` (check the request against the partition, submit,
follow the job to health and its first answer, cancel it on a failure, keep the boot record),
``down``, ``status``, ``logs`` and ``watch`` of the job named after the deployment, and the
Slurm nodes a command such as ``weights`` runs on (``slurm_target``). The work is
``inkctl.slurm``'s; progress goes to the caller's ``say(text)`` (``scrubbed``).

The job is found by its name (``inkctl-<deployment>``, this user's, ``squeue``); its files by
``scontrol show job`` (WorkDir, StdOut), so no record is kept on this machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inkctl import runtimes
from inkctl.api.target import Target, Targeted, load
from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError

if TYPE_CHECKING:
    from inkctl.execute.events import Sink
    from inkctl.export.slurm import SlurmOptions
    from inkctl.export.slurm_inputs import SlurmJob
    from inkctl.recipe.model import Recipe
    from inkctl.slurm.ctl import Partition
    from inkctl.slurm.run import Running

Say = Callable[[str], None]
PENDING_S = 600.0  # the default --pending-timeout


@dataclass(frozen=True)
class SlurmUpOptions:
    """``up --slurm``'s flags, as ``export slurm`` names them."""

    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None
    job_dir: str | None = None
    gpus_per_node: int | None = None  # None: hardware.gpus_per_host (none where the partition has no GPU GRES)
    container: str = "runtime"  # the script's container mode (cli.options.slurm_container)
    pending_timeout: float | None = None  # None: PENDING_S; 0: as long as Slurm keeps it pending
    timeout: float | None = None  # the health wait (default: the recipe's health.timeout_s)
    keep_on_failure: bool = False
    results_dir: Path = Path("bench-results")  # boot records: boots/DEPLOYMENT/
    output_tail: bool = True  # a failed job: say the last lines of its output


CONTAINERS = (*runtimes.names(), *runtimes.in_task_names())  # a runtime on the node, or Slurm's own
SLURM_CONTAINERS = (*CONTAINERS, "runtime")


@dataclass(frozen=True)
class SlurmRequest:
    """The ``--slurm`` side's own flags of ``up`` (``UpOptions.slurm``), as the user gave them."""

    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None
    job_dir: str | None = None
    gpus_per_node: int | None = None
    container: str | None = None  # docker, podman, pyxis, apptainer, runtime (None: runtime)
    pending_timeout: float | None = None
    output_tail: bool = True  # a failed job: say the last lines of its output

    def given(self) -> bool:
        """Was any of the Slurm-only flags given? (They go with --slurm only.)"""
        return any(v is not None and v != "" for v in (self.partition, self.account, self.time_limit, self.job_dir,
                                                       self.gpus_per_node, self.container, self.pending_timeout))

    def options(self, target: Target, *, timeout: float | None, keep: bool,
                results_dir: Path) -> tuple[Target, SlurmUpOptions]:
        """(the target with the overrides ``--container`` adds, ``up --slurm``'s options)."""
        mode, sets = container_mode(self.container, list(target.sets), target.recipe)
        return (Target(target.recipe, target.hosts, tuple(sets), target.backend),
                SlurmUpOptions(partition=self.partition, account=self.account, time_limit=self.time_limit,
                               job_dir=self.job_dir, gpus_per_node=self.gpus_per_node, container=mode,
                               pending_timeout=self.pending_timeout, timeout=timeout, keep_on_failure=keep,
                               results_dir=results_dir, output_tail=self.output_tail))


def container_mode(value: str | None, sets: list[str], recipe: Any) -> tuple[str, list[str]]:
    """``--container`` -> (the script's container mode, the --set overrides). docker/podman run on
    the node's runtime: another one than the recipe's overrides container.runtime, and GPUs keep
    being exposed in that runtime's own form (docker --gpus all, podman CDI); pyxis/apptainer are
    Slurm's own; none (or 'runtime'): the recipe's runtime."""
    from inkctl.errors import UsageError

    if value is None or value == "runtime":
        return "runtime", sets
    if value not in SLURM_CONTAINERS:
        raise UsageError(f"--container {value!r}: expected {', '.join(CONTAINERS[:-1])} or {CONTAINERS[-1]}")
    if value in runtimes.in_task_names():
        return value, sets
    from inkctl.recipe.reading.source import load_recipe

    c = load_recipe(recipe, sets).recipe.container
    if c.runtime == value:
        return "runtime", sets
    extra = [f"container.runtime={value}"]
    if c.gpus != "none":
        extra.append(f"container.gpus={runtimes.get(value).default_gpus}")
    return "runtime", [*sets, *extra]


@dataclass
class SlurmUpResult:
    """How ``up --slurm`` ended well: the job runs and answers (``already``: it did before)."""

    deployment: str
    job: str
    nodes: tuple[str, ...]
    url: str
    already: bool = False
    run: Running | None = None  # the job followed to its first answer (None when already up)
    script: str = ""  # the sbatch script submitted
    seconds: float = 0.0  # since up started
    boot: dict | None = None  # the boot record, saved; None: the job's output had none
    slower: tuple[str, ...] = ()  # boot phases slower than the previous boot's


@dataclass
class SlurmDownResult:
    deployment: str
    job_name: str
    jobs: list[str] = field(default_factory=list)  # the jobs cancelled (none: nothing to cancel)

    def failure(self) -> InkctlError | None:
        """scancel's failures are raised where they happen: nothing to end with here."""
        return None


@dataclass
class SlurmStatus:
    """``status --slurm``: the deployment, its job's name, one row per job (state, nodes, reason,
    ranks, health)."""

    deployment: str
    job_name: str
    jobs: list[dict]

    @property
    def ok(self) -> bool:
        """Some job's head answers."""
        return any(e.get("health", {}).get("ok") for e in self.jobs)


def scrubbed(say: Say) -> Say:
    """``say`` behind the scrubber armed at the time of each line."""
    from inkctl.scrub import active

    def out(text: str) -> None:
        say(active().text(text))
    return out


def saying(sink: Sink) -> Say:
    """A Slurm job's sentences as typed events (``Said``) to ``sink`` and the run's record,
    scrubbed with the scrubber armed at the time of each line."""
    from inkctl import runlog
    from inkctl.execute.events import Said

    recorded = runlog.recording(sink)
    return scrubbed(lambda text: recorded.emit(Said(text)))


def up(target: Target, opts: SlurmUpOptions, sink: Sink, *, cancel: threading.Event | None = None) -> SlurmUpResult:
    """Submit the deployment as a Slurm job and follow it until it serves; on a failure or
    ``cancel`` the job is cancelled (unless ``keep_on_failure``) and the error raised (exit 130
    when cancelled). A job of the same recipe already serving is left as it is (``already``);
    another version is refused. Progress and the boot phases go to ``sink`` (and the run's record)."""
    from inkctl.export.slurm_inputs import job_for
    from inkctl.slurm import ctl
    from inkctl.slurm import run as sr

    t0 = time.monotonic()
    say = saying(sink)
    loaded = load(target, "up", need_hosts=False)
    r = loaded.recipe
    secrets = _armed_secrets(r)
    part = ctl.partition(opts.partition)
    options, gpus = _options(r, opts, part, say)
    job = job_for(loaded, options)
    found = _already(job, r, target)
    if found is not None:
        return found
    sr.check_request(job, r.hardware.nodes, gpus, part)
    hidden = [s.env for s in r.secrets.values() if s.env]
    cancel = cancel or threading.Event()
    job_id, script, secrets_file = sr.submit(job, options, part, secrets=secrets, hidden=hidden, say=say)
    try:
        pending = PENDING_S if opts.pending_timeout is None else (opts.pending_timeout or None)
        key = secrets[r.api_key].reveal() if r.api_key else None
        run = sr.follow_up(job, job_id, r, timeout=opts.timeout or r.health.timeout_s, say=say, cancel=cancel,
                           pending_timeout=pending, api_key=key)
    except (InkctlError, Cancelled) as e:
        _failed(job_id, secrets_file, r, target, opts, say, interrupted=isinstance(e, Cancelled))
        raise
    sr.remove_secrets(secrets_file)  # every rank has read it: its container runs
    result = SlurmUpResult(r.name, job_id, run.nodes, run.url, run=run, script=script,
                           seconds=time.monotonic() - t0)
    _boot(result, job.plan.recipe_hash, opts.results_dir, say, sink)
    return result


def _armed_secrets(r: Recipe) -> dict:
    """The recipe's secrets, read on this machine, and the scrubber armed with their values."""
    from inkctl.scrub import arm
    from inkctl.secret import resolve_secrets, secret_values

    secrets = resolve_secrets(r.secrets, bearer=r.api_key) if r.secrets else {}
    arm(secret_values(secrets))
    return secrets


def _options(r: Recipe, opts: SlurmUpOptions, part: Partition, say: Say) -> tuple[SlurmOptions, int]:
    """The script's options, and the GPUs per node the job asks for."""
    from inkctl.export.slurm import SlurmOptions

    gpus = r.hardware.gpus_per_host if opts.gpus_per_node is None else opts.gpus_per_node
    if opts.gpus_per_node is None and part.gpus and not any(part.gpus.values()):
        say(f"partition {part.name} has no GPU GRES: the job asks for none (nodes are --exclusive)")
        gpus = 0
    job_dir = str(Path(opts.job_dir).resolve()) if opts.job_dir else None
    return SlurmOptions(partition=part.name, account=opts.account, time=opts.time_limit, gpus_per_node=gpus,
                        container=opts.container, job_dir=job_dir), gpus


def _already(job: SlurmJob, r: Recipe, target: Target) -> SlurmUpResult | None:
    """A job of this deployment already there: the same version, running and healthy, is left as it
    is (its result); another version, or one not serving, is refused: `down --slurm` first."""
    from inkctl.slurm import run as sr

    found = sr.existing(job, r)
    if found is None:
        return None
    st, same, url = found
    if same and url:
        return SlurmUpResult(r.name, st.id, tuple(st.nodes), url, already=True)
    what = "the same recipe, not serving yet" if same else "another version of the recipe"
    raise InkctlError(f"job {st.id} ({st.state.lower()}) already runs {r.name}: {what}; nothing submitted",
                      hint=f"end it first: inkctl down {target.recipe} --slurm (or scancel {st.id})", exit_code=2)


def _failed(job_id: str, secrets_file: str | None, r: Recipe, target: Target, opts: SlurmUpOptions, say: Say, *,
            interrupted: bool) -> None:
    """A job that failed or was interrupted: cancelled (kept with --keep-on-failure), what it left
    said; interrupted: raises exit 130; else the last lines of its output said."""
    from inkctl.slurm import ctl
    from inkctl.slurm import run as sr

    if opts.keep_on_failure and not interrupted:
        say(f"--keep-on-failure: job {job_id} left as it is; end it with: inkctl down {target.recipe} --slurm")
    else:
        say(f"cancelling job {job_id} ...")
        st = sr.cancel_and_wait(job_id)
        sr.remove_secrets(secrets_file)
        left = [f"rank {rk} on {n}: {w}" for rk, n, w in sr.rank_status(sr.job_dir_of(st, r.name), r.hardware.nodes)
                if w == "running"]
        done = "; it never ran" if not st.nodes else "; every rank removed its container"
        say(f"job {job_id} is {st.state.lower()}" + (f"; still marked running: {'; '.join(left)}" if left else done))
    if interrupted:
        raise InkctlError(f"interrupted: job {job_id} was cancelled", exit_code=EXIT_INTERRUPTED) from None
    tail = sr.output_tail(ctl.job(job_id).stdout or "", None, 12)
    if tail and opts.output_tail:
        say("last lines of the job's output:\n" + "\n".join(_fit(f"  | {ln}") for ln in tail))


def _fit(line: str, width: int = 80) -> str:
    return line if len(line) <= width else line[:width - 3] + "..."


def _boot(result: SlurmUpResult, recipe_hash: str, results_dir: Path, say: Say, events: Sink) -> None:
    """The job's boot phases: saved and compared as `up` does them, one `boot_phases` event
    (to ``events`` and the run's record)."""
    run = result.run
    if run is None or run.boot is None:
        return
    from inkctl import runlog
    from inkctl.api.boots import keep
    from inkctl.execute.events import BootPhases

    record, slower, previous, problem = keep(results_dir, result.deployment, run.boot, recipe_hash)
    if problem:
        say(f"warning: {problem}")
    runlog.recording(events).emit(BootPhases(deployment=result.deployment, record=record, slower=slower,
                                             previous=previous))
    result.boot, result.slower = record, slower


def down(target: Target, sink: Sink) -> SlurmDownResult:
    """scancel every job of the deployment and wait until each has left its nodes; progress to
    ``sink`` (``Said``)."""
    from inkctl.export.slurm import job_name
    from inkctl.slurm import run as sr

    r = load(target, "down", need_hosts=False).recipe
    return SlurmDownResult(r.name, job_name(r.name), sr.take_down(r, saying(sink)))


def status(target: Target) -> SlurmStatus:
    """The deployment's jobs: state, nodes, reason, ranks, health."""
    from inkctl.export.slurm import job_name
    from inkctl.slurm import run as sr

    r = load(target, "status", need_hosts=False).recipe
    return SlurmStatus(r.name, job_name(r.name), sr.job_status(r))


def logs(target: Target, emit: Say, *, follow: bool, rank: int | None, tail: int | None,
         cancel: threading.Event | None = None) -> None:
    """The job's output, every rank's lines prefixed 'RANK: ' by srun --label, scrubbed; followed
    until the job ends or ``cancel`` is set."""
    from inkctl.scrub import arm_for
    from inkctl.slurm import run as sr

    r = load(target, "logs", need_hosts=False).recipe
    scrub = arm_for(r)
    sr.follow_output(r, lambda line: emit(scrub.text(line)), follow=follow, rank=rank, tail=tail, stop=cancel)


def watch(target: Target, interval: float, sink: Sink, *, cancel: threading.Event | None = None) -> None:
    """Follow the job: its state, every rank's status, health; the job ending or a rank failing
    raises. ``cancel`` set (or KeyboardInterrupt) stops watching: raised as exit 130, the job
    runs on."""
    from inkctl.slurm import run as sr

    try:
        sr.watch_job(load(target, "watch", need_hosts=False).recipe, interval, saying(sink), stop=cancel)
    except KeyboardInterrupt:  # a second Ctrl-C while asking Slurm: stopped all the same
        import logging

        logging.getLogger(__name__).debug("watch --slurm: interrupted")
    except InkctlError:
        if cancel is None or not cancel.is_set():
            raise
        # Ctrl-C reached the squeue/scontrol it was waiting for as well: stopped, not failed
    raise InkctlError("stopped watching; the job runs on", exit_code=EXIT_INTERRUPTED)


def slurm_target(target: Target, command: str, *, partition: str | None = None, job: str | None = None,
                 nodelist: str | None = None) -> Targeted:
    """(loaded, plan, image) for a command on Slurm nodes (``weights``): every node of a partition
    (sinfo), of a job's allocation (scontrol show job), or of ``$SLURM_JOB_NODELIST``, in Slurm's
    order; the target's inventory (``--hosts FILE``) gives per-node settings by node name."""
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs
    from inkctl.recipe.reading.source import load_inventory
    from inkctl.scrub import arm_for

    loaded = load(Target(target.recipe, None, target.sets), command, need_hosts=False)
    known = load_inventory(target.hosts) if target.hosts else None
    hosts, source = _slurm_hosts(known, partition, job, nodelist)
    loaded.hosts, loaded.hosts_source = hosts, source
    arm_for(loaded.recipe)
    inputs: dict[str, Any] = plan_inputs(loaded)
    # every node given, whatever hardware.nodes says: any of them may run the job
    planned = loaded.recipe.model_copy(update={"hardware": loaded.recipe.hardware.model_copy(update={"nodes": len(hosts)})})
    return Targeted(loaded, build_plan(planned, hosts, read_fabric=False, **inputs), inputs.get("image"))


def _slurm_hosts(known: Any, partition: str | None, job: str | None, nodelist: str | None) -> tuple[list, str]:
    from inkctl.slurm import ctl

    if partition:
        return ctl.partition_hosts(partition, known), f"--partition {partition}"
    if job:
        return ctl.job_hosts(job, known), f"--slurm-job {job}"
    nodes = ctl.hostnames(nodelist or "")
    if not nodes:
        raise InkctlError(f"$SLURM_JOB_NODELIST {nodelist!r} names no node", exit_code=2)
    return ctl.as_hosts(nodes, known, "of this allocation"), "$SLURM_JOB_NODELIST"
