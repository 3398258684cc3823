"""``--slurm`` on up, down, status, logs and watch: thin; the work is in ``execute.slurm_run``.

The job is found by its name (``inkctl-<deployment>``, this user's, ``squeue``); its files by
``scontrol show job`` (WorkDir, StdOut), so no record is kept on this machine.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError

SlurmFlag = typer.Option(False, "--slurm", help="Run it as a Slurm job from this login node (sbatch, squeue, scancel): no --hosts.")
PENDING_S = 600.0
PendingOpt = typer.Option(None, "--pending-timeout", min=0, help=(
    "With --slurm: seconds the job may stay pending (waiting for nodes) before it is cancelled, "
    "with squeue's reason (default 600); 0: wait as long as Slurm keeps it."))


def _say(fmt: str):
    from inkctl.scrub import active

    def say(text: str) -> None:
        text = active().text(text)
        if fmt == "json":
            print(json.dumps({"event": "slurm", "text": text}), flush=True)
        else:
            print(text, flush=True)
    return say


def _load(recipe: Path, set_):
    from inkctl.cli.options import overrides
    from inkctl.recipe.source import load_recipe

    return load_recipe(recipe, overrides(set_))


def up(recipe: Path, set_: Optional[List[str]], *, partition, account, time_limit, job_dir, gpus_per_node=None,
       container: Optional[str] = None, pending_timeout: Optional[float] = None, timeout: Optional[float],
       keep_on_failure: bool, fmt: str, results_dir: Path = Path("bench-results")) -> None:
    from inkctl.slurm import ctl
    from inkctl.slurm import run as sr
    from inkctl.secret import resolve_secrets, secret_values
    from inkctl.export.slurm import SlurmOptions
    from inkctl.export.slurm_inputs import job_for
    from inkctl.scrub import arm

    from inkctl.cli.options import slurm_container

    t0 = time.monotonic()
    say = _say(fmt)
    mode, set_ = slurm_container(container, set_, recipe)
    loaded = _load(recipe, set_)
    r = loaded.recipe
    secrets = resolve_secrets(r.secrets) if r.secrets else {}
    arm(secret_values(secrets))
    part = ctl.partition(partition)
    gpus = r.hardware.gpus_per_host if gpus_per_node is None else gpus_per_node
    if gpus_per_node is None and part.gpus and not any(part.gpus.values()):
        say(f"partition {part.name} has no GPU GRES: the job asks for none (nodes are --exclusive)")
        gpus = 0
    options = SlurmOptions(partition=part.name, account=account, time=time_limit, gpus_per_node=gpus,
                           container=mode, job_dir=str(Path(job_dir).resolve()) if job_dir else None)
    job = job_for(loaded, options)
    if _already(job, r, say, fmt, recipe):
        return
    sr.check_request(job, r.hardware.nodes, gpus, part)
    hidden = [s.env for s in r.secrets.values() if s.env]
    cancel = threading.Event()
    previous = {s: signal.signal(s, lambda *_: cancel.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    job_id, script, secrets_file = sr.submit(job, options, part, secrets=secrets, hidden=hidden, say=say)
    try:
        run = sr.follow_up(job, job_id, r, timeout=timeout or r.health.timeout_s, say=say, cancel=cancel,
                           pending_timeout=PENDING_S if pending_timeout is None else (pending_timeout or None))
    except (InkctlError, Cancelled) as e:
        interrupted = isinstance(e, Cancelled)
        if keep_on_failure and not interrupted:
            say(f"--keep-on-failure: job {job_id} left as it is; end it with: inkctl down {recipe} --slurm")
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
        if tail and fmt == "text":
            say("last lines of the job's output:\n" + "\n".join(_fit(f"  | {ln}") for ln in tail))
        raise
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    sr.remove_secrets(secrets_file)  # every rank has read it: its container runs
    total = time.monotonic() - t0
    table = _boot(run, r.name, job.plan.recipe_hash, results_dir, fmt, say)
    if fmt == "json":
        print(json.dumps({"event": "finished", "ok": True, "deployment": r.name, "job": job_id, "nodes": list(run.nodes),
                          "url": run.url, "healthy_after_s": round(run.healthy_after_s or 0, 3),
                          "first_ttft_s": round(run.first_ttft_s or 0, 4), "script": script}))
        return
    say(f"{r.name} is up: {run.url} (job {job_id}, healthy after {run.healthy_after_s:.1f} s, {total:.1f} s in all)")
    say(f"  first request TTFT {(run.first_ttft_s or 0) * 1000:.0f} ms")
    for i, n in enumerate(run.nodes):
        say(f"  rank {i} ({'head' if i == 0 else 'worker'}) {n}")
    if table:
        say(table)
    if run.smoke:
        say(f"  smoke: {sum(1 for x in run.smoke if x.ok)}/{len(run.smoke)} checks passed")
    say(f"  output: {run.output}; stop it with: inkctl down {recipe} --slurm")


def _boot(run, deployment: str, recipe_hash: str, results_dir: Path, fmt: str, say) -> str:
    """The job's boot phases: saved and compared as `up` does them, one `boot_phases` event
    (-o json, and the run's record); the table for the text summary."""
    if run.boot is None:
        return ""
    from inkctl import runlog
    from inkctl.cli.boottable import boot_table, keep
    from inkctl.execute.events import BootPhases, JsonLines

    record, slower, previous, problem = keep(results_dir, deployment, run.boot, recipe_hash)
    if problem:
        say(f"warning: {problem}")
    sink = runlog.recording(JsonLines() if fmt == "json" else None)
    if sink is not None:
        sink.emit(BootPhases(deployment=deployment, record=record, slower=slower, previous=previous))
    return boot_table(record, slower)


def _already(job, r, say, fmt, recipe: Path) -> bool:
    """A job of this deployment already there: the same version, running and healthy, is left as it
    is (True); another version, or one not serving, is refused: `down --slurm` first."""
    from inkctl.slurm import run as sr

    found = sr.existing(job, r)
    if found is None:
        return False
    st, same, url = found
    if same and url:
        if fmt == "json":
            print(json.dumps({"event": "finished", "ok": True, "deployment": r.name, "job": st.id,
                              "nodes": list(st.nodes), "url": url, "message": "already"}))
        else:
            say(f"{r.name} is already up: {url} (job {st.id} on {', '.join(st.nodes)}, same recipe); nothing changed")
        return True
    what = "the same recipe, not serving yet" if same else "another version of the recipe"
    raise InkctlError(f"job {st.id} ({st.state.lower()}) already runs {r.name}: {what}; nothing submitted",
                      hint=f"end it first: inkctl down {recipe} --slurm (or scancel {st.id})", exit_code=2)


def _fit(line: str, width: int = 80) -> str:
    return line if len(line) <= width else line[:width - 3] + "..."


def down(recipe: Path, set_, fmt: str) -> None:
    from inkctl.export.slurm import job_name
    from inkctl.slurm import run as sr

    say = _say(fmt)
    r = _load(recipe, set_).recipe
    if not sr.take_down(r, say):
        say(f"{r.name}: no Slurm job named {job_name(r.name)}; nothing to cancel")
        return
    say(f"{r.name} is down")


def status(recipe: Path, set_, fmt: str) -> None:
    from inkctl.export.slurm import job_name
    from inkctl.slurm import run as sr

    r = _load(recipe, set_).recipe
    out = sr.job_status(r)
    if fmt == "json":
        print(json.dumps({"deployment": r.name, "jobs": out}, indent=2))
    elif not out:
        print(f"{r.name}: no Slurm job named {job_name(r.name)}")
    for e in out if fmt != "json" else []:
        print(f"job {e['job']}: {e['state'].lower()} on {', '.join(e['nodes']) or '-'}"
              + (f" ({e['reason']})" if e["reason"] not in ("None", "") else ""))
        for k in e["ranks"]:
            print(f"  rank {k['rank']} {k['node']}: {k['state']}")
        if "health" in e:
            h = e["health"]
            print(f"  health {h['url']}: {'ok' if h['ok'] else h['seen']}")
    if not any(e.get("health", {}).get("ok") for e in out):
        raise typer.Exit(1)


def logs(recipe: Path, set_, *, follow: bool, rank: Optional[int], tail: Optional[str]) -> None:
    """The job's output: every rank's lines, prefixed 'RANK: ' by srun --label."""
    from inkctl.scrub import arm_for
    from inkctl.slurm import run as sr

    r = _load(recipe, set_).recipe
    scrub = arm_for(r)
    sr.follow_output(r, lambda line: print(scrub.text(line), flush=True), follow=follow, rank=rank,
                     tail=None if tail in (None, "all") else int(tail))


def watch(recipe: Path, set_, fmt: str, interval: float) -> None:
    """Follow the job: its state, every rank's status, health. The job ending or a rank failing: exit 1."""
    from inkctl.slurm import run as sr

    try:
        sr.watch_job(_load(recipe, set_).recipe, interval, _say(fmt))
    except KeyboardInterrupt:
        raise InkctlError("stopped watching; the job runs on", exit_code=EXIT_INTERRUPTED) from None


def slurm_target(recipe: Path, set_, hosts_file: Optional[Path], command: str, *, partition: Optional[str] = None,
                 job: Optional[str] = None, nodelist: Optional[str] = None):
    """(loaded, plan, image) for a command on Slurm nodes (``weights``): every node of a partition
    (sinfo), of a job's allocation (scontrol show job), or of ``$SLURM_JOB_NODELIST``, in Slurm's
    order; ``--hosts FILE`` gives per-node settings by node name."""
    from inkctl.slurm import ctl
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs
    from inkctl.recipe.source import load_inventory
    from inkctl.scrub import arm_for

    loaded = _load(recipe, set_)
    known = load_inventory(hosts_file) if hosts_file else None
    if partition:
        hosts, source = ctl.partition_hosts(partition, known), f"--partition {partition}"
    elif job:
        hosts, source = ctl.job_hosts(job, known), f"--slurm-job {job}"
    else:
        nodes = ctl.hostnames(nodelist or "")
        if not nodes:
            raise InkctlError(f"$SLURM_JOB_NODELIST {nodelist!r} names no node", exit_code=2)
        hosts, source = ctl.as_hosts(nodes, known, "of this allocation"), "$SLURM_JOB_NODELIST"
    loaded.hosts, loaded.hosts_source = hosts, source
    arm_for(loaded.recipe)
    inputs = plan_inputs(loaded)
    # every node given, whatever hardware.nodes says: any of them may run the job
    planned = loaded.recipe.model_copy(update={"hardware": loaded.recipe.hardware.model_copy(update={"nodes": len(hosts)})})
    return loaded, build_plan(planned, hosts, **inputs), inputs.get("image")
