"""What ``--slurm`` on up, down, status, logs and watch shows: the job's progress (``Lines``)
and each command's last words, as text lines or JSON.

Thin: the api picks the Slurm backend (``api.backend``) and loads the recipe, reads its
secrets, submits, follows and cancels the job (``api.slurm``, ``inkctl.slurm``); the commands
(cli/deploy.py, observe.py, logs.py, watch.py) render what comes back with these.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer


SlurmFlag = typer.Option(False, "--slurm", help="Run it as a Slurm job from this login node (sbatch, squeue, scancel): no --hosts.")
PendingOpt = typer.Option(None, "--pending-timeout", min=0, help=(
    "With --slurm: seconds the job may stay pending (waiting for nodes) before it is cancelled, "
    "with squeue's reason (default 600); 0: wait as long as Slurm keeps it."))


class Lines:
    """A Slurm job's progress (``Said``) as text lines, or JSON lines with ``-o json``; in JSON
    also the other events (the boot phases). Scrubbed by the api."""

    def __init__(self, fmt: str):
        from inkctl.execute.events import JsonLines

        self.fmt = fmt
        self.json = JsonLines() if fmt == "json" else None

    def emit(self, event) -> None:
        from inkctl.execute.events import Said

        if isinstance(event, Said):
            print(json.dumps(event.as_dict()) if self.fmt == "json" else event.text, flush=True)
        elif self.json is not None:
            self.json.emit(event)

    def close(self) -> None:
        pass

    def say(self, text: str) -> None:
        """A line of this command's own (its summary), as the job's progress is shown."""
        from inkctl.api.slurm import scrubbed
        from inkctl.execute.events import Said

        scrubbed(lambda line: self.emit(Said(line)))(text)


def said_up(result, recipe: Path, fmt: str) -> None:
    """``up --slurm``'s last words: JSON, that it already ran, or the summary."""
    say = Lines(fmt).say
    if fmt == "json":
        print(json.dumps(_finished(result)))
    elif result.already:
        say(f"{result.deployment} is already up: {result.url} (job {result.job} on {', '.join(result.nodes)}, "
            "same recipe); nothing changed")
    else:
        _summary(result, recipe, say)


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
        from inkctl.cli.show.boottable import boot_table

        table = boot_table(result.boot, result.slower)
        if table:
            say(table)
    if run.smoke:
        say(f"  smoke: {sum(1 for x in run.smoke if x.ok)}/{len(run.smoke)} checks passed")
    say(f"  output: {run.output}; stop it with: inkctl down {recipe} --slurm")


def said_down(result, fmt: str) -> None:
    say = Lines(fmt).say
    if not result.jobs:
        say(f"{result.deployment}: no Slurm job named {result.job_name}; nothing to cancel")
        return
    say(f"{result.deployment} is down")


def said_status(st, fmt: str) -> None:
    out = st.jobs
    if fmt == "json":
        print(json.dumps({"deployment": st.deployment, "jobs": out}, indent=2))
    elif not out:
        print(f"{st.deployment}: no Slurm job named {st.job_name}")
    for e in out if fmt != "json" else []:
        _status_lines(e)
    if not st.ok:
        raise typer.Exit(1)


def _status_lines(e: dict) -> None:
    print(f"job {e['job']}: {e['state'].lower()} on {', '.join(e['nodes']) or '-'}"
          + (f" ({e['reason']})" if e["reason"] not in ("None", "") else ""))
    for k in e["ranks"]:
        print(f"  rank {k['rank']} {k['node']}: {k['state']}")
    if "health" in e:
        h = e["health"]
        print(f"  health {h['url']}: {'ok' if h['ok'] else h['seen']}")
