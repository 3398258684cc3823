"""``up --slurm``, ``down --slurm``, ``status --slurm``, ``logs --slurm``, ``watch --slurm``:
the sbatch script of ``export.slurm`` submitted and followed from the login node.

``up`` checks the request against the partition before anything is submitted (Slurm accepts a
job that asks for more nodes than exist and leaves it pending forever), then ``sbatch
--test-only``, submits, follows ``scontrol show job``, waits for health and the first completion
through the head from here, as ``up`` does over SSH. A job that ends first (a rank crashed, an
image or a pin was wrong), a health timeout, Ctrl-C: the job is cancelled and waited for, and the
error names the rank, its node and the reason from the rank's status file.

Progress goes to ``say(text)``; nothing here prints.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from inkctl.errors import Cancelled, InkctlError
from inkctl.slurm import ctl
from inkctl.export.slurm import HEAD, SlurmJob, SlurmOptions, job_name
from inkctl.export.slurm_rank import STATUS_DIR
from inkctl.plan.step import WaitHealth

POLL_S = 0.5
log = logging.getLogger(__name__)


class SlurmJobFailed(InkctlError):
    exit_code = 1


@dataclass
class Running:
    job_id: str
    nodes: tuple[str, ...]
    head: str
    url: str
    job_dir: str
    output: str
    healthy_after_s: float | None = None
    first_ttft_s: float | None = None
    smoke: list = field(default_factory=list)
    boot: dict | None = None  # execute.supervise.bootphases.boot_record, read from the job's output


def job_dir_of(state: ctl.JobState, deployment: str) -> str:
    return f"{state.workdir}/{job_name(deployment)}-{state.id}"


def rank_status(job_dir: str, nodes: int, *, by_time: bool = False) -> list[tuple[int, str, str]]:
    """(rank, node, what) from the ranks' status files: 'running', 'stopped', 'failed REASON'
    (``by_time``: in the order they were last written, the first failure first)."""
    out = []
    for r in range(nodes):
        path = Path(job_dir, STATUS_DIR, f"rank{r}")
        try:
            text, when = path.read_text().strip(), path.stat().st_mtime
        except OSError:
            out.append((float("inf"), r, "?", "not started"))
            continue
        node, _, what = text.partition(" ")
        out.append((when, r, node, what))
    if by_time:
        out.sort(key=lambda x: x[0])
    return [(r, n, w) for _, r, n, w in out]


def failure_of(state: ctl.JobState, deployment: str, nodes: int) -> str:
    """The sentence that names the failing rank: the first 'failed' status, else the job's own state."""
    ranks = rank_status(job_dir_of(state, deployment), nodes, by_time=True)
    failed = [(r, n, w) for r, n, w in ranks if w.startswith("failed")]
    if failed:
        (r, n, w), rest = failed[0], failed[1:]
        text = f"rank {r} on {n} failed first: {w[len('failed '):]}"
        if rest:
            text += "; then " + "; ".join(f"rank {r2} on {n2}: {w2[len('failed '):]}" for r2, n2, w2 in rest)
        return text
    said = [ln[len("inkctl: "):] for ln in output_tail(state.stdout, None, 200) if ln.startswith("inkctl: ")
            and not ln.startswith(("inkctl: rank ", "inkctl: job ", "inkctl: ready"))] if state.stdout else []
    why = f": {said[-1]}" if said else ""
    return f"the job ended {state.state} (exit {state.exit_code}, reason {state.reason}){why}"


def output_tail(path: str, rank: int | None = None, lines: int = 20) -> list[str]:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return []
    if rank is not None:
        mine = [ln for ln in text if ln.startswith(f"{rank}: ")]
        text = mine or text
    return text[-lines:]


def _env(secrets_file: str | None, secret_names: list[str], hidden: list[str]) -> dict:
    """sbatch's environment: ours, without any secret (the job reads them from the file)."""
    env = {k: v for k, v in os.environ.items() if k not in secret_names and k not in hidden}
    if secrets_file:
        env["INKCTL_SECRETS_FILE"] = secrets_file
    return env


def check_request(job: SlurmJob, nodes: int, gpus: int, part: ctl.Partition) -> None:
    """What Slurm would accept and leave pending forever, said before anything is submitted."""
    if part.state != "UP":
        raise InkctlError(f"partition {part.name} is {part.state}: nothing submitted", exit_code=2)
    if nodes > part.total:
        raise InkctlError(f"the recipe needs {nodes} nodes (hardware.nodes) but partition {part.name} has "
                          f"{part.total} ({', '.join(part.nodes)}): nothing submitted",
                          hint="choose a partition with enough nodes (--partition), or a recipe for fewer nodes",
                          exit_code=2)
    if part.max_nodes is not None and nodes > part.max_nodes:
        raise InkctlError(f"the recipe needs {nodes} nodes but partition {part.name} allows {part.max_nodes} per job "
                          "(MaxNodes): nothing submitted", hint="choose another partition (--partition)", exit_code=2)
    if gpus:
        enough = [n for n, g in part.gpus.items() if g >= gpus]
        if len(enough) < nodes:
            have = ", ".join(f"{n} {g}" for n, g in part.gpus.items())
            raise InkctlError(f"the job asks for {gpus} GPUs per node on {nodes} nodes, but partition {part.name} has "
                              f"{len(enough)} such node(s) (GPUs: {have}): nothing submitted",
                              hint="--gpus-per-node 0 asks for none (a cluster without GPU GRES)", exit_code=2)


def submit(job: SlurmJob, options: SlurmOptions, part: ctl.Partition, *, secrets: dict, hidden: list[str],
           say) -> tuple[str, str, str | None]:
    """Write the script (and the secrets file, 0600), check it with --test-only, submit it.
    Returns (job id, script path, secrets file)."""
    d = Path(options.job_dir or os.getcwd())
    d.mkdir(parents=True, exist_ok=True)
    script = d / f"{job.name}.sbatch"
    script.write_text(job.script)
    script.chmod(0o755)
    secrets_file = None
    if job.secrets:
        secrets_file = str(d / f".{job.name}.secrets")
        from inkctl.execute.deploy.secrets import render_env_file
        from inkctl.plan.step import EnvFile, SecretRef

        fd = os.open(secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(render_env_file(EnvFile(tuple((k, SecretRef(k)) for k in job.secrets)), secrets))  # by secret name
    env = _env(secrets_file, list(job.secrets), hidden)
    args = ["--chdir", str(d)]
    problem = ctl.test_only(str(script), args, env)
    if problem:
        remove_secrets(secrets_file)
        raise InkctlError(f"Slurm would not run it (sbatch --test-only): {problem}: nothing submitted",
                          hint=f"the script: {script}", exit_code=2)
    job_id = ctl.submit(str(script), args, env)
    say(f"submitted job {job_id} to partition {part.name} ({script})")
    return job_id, str(script), secrets_file


def remove_secrets(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except OSError as e:
            log.debug("removing %s: %s", path, e)


def wait_running(job_id: str, deployment: str, nodes: int, say, cancel: threading.Event,
                 pending_timeout: float | None = None) -> ctl.JobState:
    """Until the job runs. Pending with a reason that never clears, or for longer than
    ``pending_timeout`` seconds: raise, saying why (Slurm's reason) and what to do."""
    last = ""
    t0 = time.monotonic()
    while True:
        if cancel.is_set():
            raise Cancelled(started=True)
        st = ctl.job(job_id)
        if st.state == "RUNNING" and st.nodes:
            return st
        if st.ended:
            raise SlurmJobFailed(f"job {job_id} ended before it ran: {failure_of(st, deployment, nodes)}",
                                 hint=f"its output: {st.stdout}" if st.stdout else None)
        if st.state == "PENDING":
            hopeless = any(st.reason.startswith(h) for h in ctl.HOPELESS)
            waited = time.monotonic() - t0
            if hopeless or (pending_timeout is not None and waited > pending_timeout):
                what, todo = ctl.pending_why(st.reason, st.partition or "PARTITION", job_id)
                when = "cannot start" if hopeless else f"still pending after {waited:.0f} s"
                raise SlurmJobFailed(_fit(f"job {job_id} {when} (reason {st.reason}): {what}", 73),
                                     hint=_fit(todo, 74))
        text = f"job {job_id}: {st.state.lower()}" + (f" ({st.reason})" if st.reason not in ("None", "") else "")
        if text != last:
            say(text)
            last = text
        time.sleep(POLL_S)


def _fit(text: str, width: int) -> str:
    """Lines that fit 80 columns after the 'error: ' / 'hint: ' prefix."""
    import textwrap

    return textwrap.fill(text, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


def health_url(job: SlurmJob, head_address: str) -> tuple[str, str]:
    step = next(s for s in job.plan.steps() if isinstance(s, WaitHealth))
    return step.url.replace(HEAD, head_address), step.answer_url.replace(HEAD, head_address)


def url_for(recipe, head_address: str) -> str:
    """The head's health URL (as the plan's WaitHealth has it), for status and watch."""
    from inkctl.plan.deploy import api_port

    host = f"[{head_address}]" if ":" in head_address else head_address
    return f"http://{host}:{api_port(recipe)}{recipe.health_path}"


def follow_up(job: SlurmJob, job_id: str, recipe, *, timeout: float, say, cancel: threading.Event,
              api_key: str | None = None, pending_timeout: float | None = None) -> Running:
    """From submitted to serving: running, healthy, answering. Raises naming the failing rank."""
    nodes = recipe.hardware.nodes
    st = wait_running(job_id, recipe.name, nodes, say, cancel, pending_timeout)
    from inkctl.slurm.bootlog import JobLog

    boot = JobLog(st.stdout, st.nodes, recipe.engine.kind, time.monotonic()).start() if st.stdout else None
    try:
        run = _serving(job, job_id, recipe, st, boot, timeout=timeout, say=say, cancel=cancel, api_key=api_key)
    finally:
        record = boot.stop() if boot is not None else None
    run.boot = record
    return run


def _serving(job: SlurmJob, job_id: str, recipe, st: ctl.JobState, boot, *, timeout: float, say,
             cancel: threading.Event, api_key: str | None) -> Running:
    nodes = recipe.hardware.nodes
    head = st.nodes[0]
    try:
        addr = socket.gethostbyname(head)
    except OSError as e:
        raise InkctlError(f"job {job_id}: the head node {head} does not resolve here: {e}",
                          hint="inkctl reaches the head by its node name: run it where node names resolve", exit_code=1)
    url, answer = health_url(job, addr)
    run = Running(job_id, st.nodes, head, url, job_dir_of(st, recipe.name), st.stdout)
    say(f"job {job_id} runs on {', '.join(st.nodes)}; head {head} ({addr})")
    from inkctl.execute.supervise.health import check_once

    t0 = time.monotonic()
    shown = ""
    while True:
        if cancel.is_set():
            raise Cancelled(started=True)
        st = ctl.job(job_id)
        if st.ended or st.state not in ("RUNNING", "COMPLETING"):
            why = failure_of(st, recipe.name, nodes)
            raise SlurmJobFailed(f"job {job_id} failed before the head answered: {why}",
                                 hint=f"its output: {st.stdout or run.output}")
        ok, seen = check_once(url, timeout=2.0)
        if boot is not None and seen.startswith("HTTP "):
            boot.mark("port_open")
        if ok:
            break
        if time.monotonic() - t0 > timeout:
            raise SlurmJobFailed(f"job {job_id}: {url} did not answer within {timeout:g} s (last: {seen})",
                                 hint=f"its output: {run.output}")
        if seen != shown:
            say(f"waiting for {url}: {seen}")
            shown = seen
        time.sleep(POLL_S)
    healthy = time.monotonic()
    run.healthy_after_s = healthy - t0
    if boot is not None:
        boot.mark("health", healthy)
    from inkctl.smoke.ready import first_answer

    first = first_answer(answer, recipe.model.name, max(30.0, timeout - run.healthy_after_s), api_key)
    run.first_ttft_s = first.ttft_s
    if api_key is not None:
        from inkctl.execute.deploy.smoke import check_guarded

        say(check_guarded(answer, recipe.model.name))
    if boot is not None:  # the readiness completion's first streamed token
        boot.mark("first_token", healthy + first.first_token_s)
    if recipe.smoke.enabled:
        from inkctl.plan.smoke import smoke_checks
        from inkctl.smoke.run import run_checks

        run.smoke = run_checks(answer, recipe.model.name, smoke_checks(recipe), timeout_s=recipe.smoke.timeout_s,
                               api_key=api_key)
        bad = [r for r in run.smoke if not r.ok]
        if bad:
            raise SlurmJobFailed(f"job {job_id}: {len(bad)} smoke check(s) failed: {bad[0].prompt!r}: "
                                 f"{bad[0].error or bad[0].answer[:200]}")
    return run


def settled(job_id: str, timeout: float = 60) -> ctl.JobState:
    """The job's state once it has left its nodes (not COMPLETING), or as it is after ``timeout``."""
    end = time.monotonic() + timeout
    while True:
        st = ctl.job(job_id)
        if (st.ended and st.state != "COMPLETING") or time.monotonic() > end:
            return st
        time.sleep(POLL_S)


def cancel_and_wait(job_id: str, timeout: float = 120) -> ctl.JobState:
    """scancel, then wait until Slurm says the job has left its nodes (each rank removed its container)."""
    ctl.cancel(job_id)
    end = time.monotonic() + timeout
    while True:
        st = ctl.job(job_id)
        if st.ended and st.state != "COMPLETING":
            return st
        if time.monotonic() > end:
            raise InkctlError(f"job {job_id} is still {st.state} {timeout:g} s after scancel", exit_code=1,
                              hint="see `scontrol show job " + job_id + "`; a node that does not answer is drained by Slurm")
        time.sleep(POLL_S)


def _head_url(recipe, st: ctl.JobState) -> str:
    return url_for(recipe, socket.gethostbyname(st.nodes[0]))


def existing(job: SlurmJob, recipe) -> tuple[ctl.JobState, bool, str | None] | None:
    """This user's job of the deployment, if any: (its state, the same recipe hash?, its health URL
    when it runs and answers)."""
    from inkctl.execute.supervise.health import check_once
    from inkctl.export.slurm import COMMENT

    for job_id in ctl.jobs_named(job.name):
        st = ctl.job(job_id)
        same = st.comment == f"{COMMENT}{job.plan.recipe_hash}"
        url = None
        if st.state == "RUNNING" and st.nodes:
            url = _head_url(recipe, st)
            url = url if check_once(url)[0] else None
        return st, same, url
    return None


def take_down(recipe, say) -> list[str]:
    """scancel every job of the deployment, wait until each has left its nodes; the jobs' ids."""
    ids = ctl.jobs_named(job_name(recipe.name))
    for job_id in ids:
        st = cancel_and_wait(job_id)
        ranks = rank_status(job_dir_of(st, recipe.name), recipe.hardware.nodes)
        left = [f"rank {rk} on {n}" for rk, n, w in ranks if w == "running"]
        remove_secrets(str(Path(st.workdir, f".{job_name(recipe.name)}.secrets")) if st.workdir else None)
        if left:
            raise InkctlError(f"job {job_id} ended but {', '.join(left)} did not report its container removed",
                              hint="look on that node: docker ps --filter label=inkctl.deployment=" + recipe.name)
        say(f"job {job_id} cancelled ({st.state.lower()}); every rank removed its container")
    return ids


def job_status(recipe) -> list[dict]:
    """Each job of the deployment: state, nodes, output, every rank's state, the head's health."""
    from inkctl.execute.supervise.health import check_once

    out = []
    for job_id in ctl.jobs_named(job_name(recipe.name)):
        st = ctl.job(job_id)
        entry: dict[str, object] = {"job": job_id, "state": st.state, "reason": st.reason, "nodes": list(st.nodes), "output": st.stdout,
                 "ranks": [{"rank": rk, "node": n, "state": w}
                           for rk, n, w in rank_status(job_dir_of(st, recipe.name), recipe.hardware.nodes)]}
        if st.state == "RUNNING" and st.nodes:
            url = _head_url(recipe, st)
            ok, seen = check_once(url)
            entry["health"] = {"url": url, "ok": ok, "seen": seen}
        out.append(entry)
    return out


def _latest(recipe) -> str:
    ids = ctl.jobs_named(job_name(recipe.name))
    if not ids:
        raise InkctlError(f"{recipe.name}: no Slurm job named {job_name(recipe.name)}", exit_code=1)
    return ids[-1]


def follow_output(recipe, emit, *, follow: bool, rank: int | None, tail: int | None,
                  stop: threading.Event | None = None) -> None:
    """The latest job's output (every rank's lines are prefixed 'RANK: '), then, with ``follow``,
    what it adds until the job ends or ``stop`` is set."""
    stop = stop or threading.Event()
    st = ctl.job(_latest(recipe))
    path = Path(st.stdout)
    if not st.stdout or not path.exists():
        raise InkctlError(f"job {st.id}: its output {st.stdout or '(unknown)'} is not readable here",
                          hint="read it on a node that shares the job's directory", exit_code=1)

    def wanted(line: str) -> bool:
        return rank is None or line.startswith(f"{rank}: ")

    with path.open(errors="replace") as f:
        lines = [ln for ln in f.read().splitlines() if wanted(ln)]
        for ln in lines[-tail:] if tail else lines:
            emit(ln)
        while follow and not stop.is_set():
            line = f.readline()
            if line:
                if wanted(line):
                    emit(line.rstrip("\n"))
                continue
            if ctl.job(st.id).ended:
                break
            stop.wait(0.3)


def watch_job(recipe, interval: float, say, stop: threading.Event | None = None) -> None:
    """Until the job ends or its head stops answering (3 checks in a row): then raise, naming the
    rank; or until ``stop`` is set (returns)."""
    from inkctl.execute.supervise.health import check_once

    job_id = _latest(recipe)
    st = ctl.job(job_id)
    if st.state != "RUNNING" or not st.nodes:
        raise InkctlError(f"job {job_id} is {st.state.lower()}, not running", exit_code=1)
    url = _head_url(recipe, st)
    say(f"watching job {job_id} on {', '.join(st.nodes)}: {url} (Ctrl-C stops watching, the job runs on)")
    misses = 0
    while True:
        st = ctl.job(job_id)
        if st.state != "RUNNING":
            st = settled(job_id)
            ranks = rank_status(job_dir_of(st, recipe.name), recipe.hardware.nodes, by_time=True)
            failed = any(w.startswith("failed") for _, _, w in ranks)
            what = failure_of(st, recipe.name, recipe.hardware.nodes) if failed else "; ".join(
                f"rank {rk} on {n}: {w}" for rk, n, w in ranks)
            raise InkctlError(f"job {job_id} is {st.state.lower()}: {what}", hint=f"its output: {st.stdout}", exit_code=1)
        ok, seen = check_once(url)
        misses = 0 if ok else misses + 1
        if misses >= 3:
            raise InkctlError(f"job {job_id}: {url} stopped answering ({seen}, 3 times in a row)", exit_code=1)
        if (stop or threading.Event()).wait(interval):
            return
