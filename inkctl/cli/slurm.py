"""``--slurm`` on up, down, status, logs and watch: flags -> ``inkctl.api.slurm`` -> what it shows.

Thin: the api loads the recipe, reads its secrets, submits, follows and cancels the job
(``inkctl.slurm``); these functions turn the flags into that call and print what comes back,
as text lines or JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.errors import EXIT_INTERRUPTED, InkctlError

SlurmFlag = typer.Option(False, "--slurm", help="Run it as a Slurm job from this login node (sbatch, squeue, scancel): no --hosts.")
PendingOpt = typer.Option(None, "--pending-timeout", min=0, help=(
    "With --slurm: seconds the job may stay pending (waiting for nodes) before it is cancelled, "
    "with squeue's reason (default 600); 0: wait as long as Slurm keeps it."))


def _say(fmt: str):
    """Progress as text lines, or JSON lines with ``-o json``; scrubbed."""
    from inkctl.api.slurm import scrubbed

    def say(text: str) -> None:
        if fmt == "json":
            print(json.dumps({"event": "slurm", "text": text}), flush=True)
        else:
            print(text, flush=True)
    return scrubbed(say)


def _target(recipe: Path, set_):
    from inkctl.api.target import Target

    return Target.of(recipe, None, set_)


def up(recipe: Path, set_: Optional[List[str]], *, partition, account, time_limit, job_dir, gpus_per_node=None,
       container: Optional[str] = None, pending_timeout: Optional[float] = None, timeout: Optional[float],
       keep_on_failure: bool, fmt: str, results_dir: Path = Path("bench-results")) -> None:
    from inkctl.api.slurm import SlurmUpOptions
    from inkctl.api.slurm import up as api_up
    from inkctl.cli.options import slurm_container

    say = _say(fmt)
    mode, set_ = slurm_container(container, set_, recipe)
    opts = SlurmUpOptions(partition=partition, account=account, time_limit=time_limit, job_dir=job_dir,
                          gpus_per_node=gpus_per_node, container=mode, pending_timeout=pending_timeout,
                          timeout=timeout, keep_on_failure=keep_on_failure, results_dir=results_dir,
                          output_tail=fmt == "text")
    result = api_up(_target(recipe, set_), opts, say, events=_events(fmt))
    if fmt == "json":
        print(json.dumps(_finished(result)))
    elif result.already:
        say(f"{result.deployment} is already up: {result.url} (job {result.job} on {', '.join(result.nodes)}, "
            "same recipe); nothing changed")
    else:
        _summary(result, recipe, say)


def _events(fmt: str):
    """Where the boot phases go besides the run's record: JSON lines with ``-o json``."""
    from inkctl.execute.events import JsonLines

    return JsonLines() if fmt == "json" else None


def _finished(result) -> dict:
    if result.already:
        return {"event": "finished", "ok": True, "deployment": result.deployment, "job": result.job,
                "nodes": list(result.nodes), "url": result.url, "message": "already"}
    run = result.run
    return {"event": "finished", "ok": True, "deployment": result.deployment, "job": result.job,
            "nodes": list(run.nodes), "url": run.url, "healthy_after_s": round(run.healthy_after_s or 0, 3),
            "first_ttft_s": round(run.first_ttft_s or 0, 4), "script": result.script}


def _summary(result, recipe: Path, say) -> None:
    run = result.run
    say(f"{result.deployment} is up: {run.url} (job {result.job}, healthy after {run.healthy_after_s:.1f} s, "
        f"{result.seconds:.1f} s in all)")
    say(f"  first request TTFT {(run.first_ttft_s or 0) * 1000:.0f} ms")
    for i, n in enumerate(run.nodes):
        say(f"  rank {i} ({'head' if i == 0 else 'worker'}) {n}")
    if result.boot is not None:
        from inkctl.cli.boottable import boot_table

        table = boot_table(result.boot, result.slower)
        if table:
            say(table)
    if run.smoke:
        say(f"  smoke: {sum(1 for x in run.smoke if x.ok)}/{len(run.smoke)} checks passed")
    say(f"  output: {run.output}; stop it with: inkctl down {recipe} --slurm")


def down(recipe: Path, set_, fmt: str) -> None:
    from inkctl.api.slurm import down as api_down

    say = _say(fmt)
    result = api_down(_target(recipe, set_), say)
    if not result.jobs:
        say(f"{result.deployment}: no Slurm job named {result.job_name}; nothing to cancel")
        return
    say(f"{result.deployment} is down")


def status(recipe: Path, set_, fmt: str) -> None:
    from inkctl.api.slurm import status as api_status

    deployment, name, out = api_status(_target(recipe, set_))
    if fmt == "json":
        print(json.dumps({"deployment": deployment, "jobs": out}, indent=2))
    elif not out:
        print(f"{deployment}: no Slurm job named {name}")
    for e in out if fmt != "json" else []:
        _status_lines(e)
    if not any(e.get("health", {}).get("ok") for e in out):
        raise typer.Exit(1)


def _status_lines(e: dict) -> None:
    print(f"job {e['job']}: {e['state'].lower()} on {', '.join(e['nodes']) or '-'}"
          + (f" ({e['reason']})" if e["reason"] not in ("None", "") else ""))
    for k in e["ranks"]:
        print(f"  rank {k['rank']} {k['node']}: {k['state']}")
    if "health" in e:
        h = e["health"]
        print(f"  health {h['url']}: {'ok' if h['ok'] else h['seen']}")


def logs(recipe: Path, set_, *, follow: bool, rank: Optional[int], tail: Optional[str]) -> None:
    """The job's output: every rank's lines, prefixed 'RANK: ' by srun --label."""
    from inkctl.api.slurm import logs as api_logs

    api_logs(_target(recipe, set_), lambda line: print(line, flush=True), follow=follow, rank=rank,
             tail=None if tail in (None, "all") else int(tail))


def watch(recipe: Path, set_, fmt: str, interval: float) -> None:
    """Follow the job: its state, every rank's status, health. The job ending or a rank failing: exit 1."""
    from inkctl.api.slurm import watch as api_watch

    try:
        api_watch(_target(recipe, set_), interval, _say(fmt))
    except KeyboardInterrupt:
        raise InkctlError("stopped watching; the job runs on", exit_code=EXIT_INTERRUPTED) from None
