"""Execute a Plan: stage by stage, hosts in parallel within a stage, a host's steps in order.

The runner executes exactly the objects ``inkctl plan`` renders. It never prints: it emits
typed events (``inkctl.execute.events``) to a sink. It remembers every host where it started
something, so that a failure (a step, a crashed rank, a health timeout, Ctrl-C) can be undone
there and nowhere else: no half-up clusters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import enum
import hashlib
import threading
import time
from dataclasses import dataclass, field

from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError
from inkctl.smoke.result import SmokeResult
from inkctl.execute.events import (Info, RollbackFinished, RollbackStarted, SmokeFinished, StageFinished,
                                   StageStarted, StepFailed, StepFinished, StepStarted)
from inkctl.execute.deploy.secrets import render_env_file
from inkctl.execute.deploy.takedown import RemovalFailed, remove_from_host
from inkctl.execute.hosts.fanout import each
from inkctl.execute.hosts.transport import HostError, Transport
from inkctl.plan import pagecache
from inkctl.plan.quote import command_line
from inkctl.plan.step import EnvFile, Plan, Put, Register, Run, Smoke, Stage, WaitFor, WaitHealth

RUN_TIMEOUT_S = 300.0  # one remote command (docker run --detach returns in seconds)
TEARDOWN_TIMEOUT_S = 60.0
STDERR_LINES = 15


class StepError(InkctlError):
    """A step failed on a host; the message names host, rank, purpose and what happened."""

    def __init__(self, message: str, *, host: str, rank: int | None, purpose: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.host, self.rank, self.purpose = host, rank, purpose


class LaunchFailed(InkctlError):
    """``up`` failed; the message says why and what the rollback did (or what was kept).
    ``left``: what the rollback could not remove ("host: what and why"); ``lock_kept``: a lost
    host also kept this run's deploy lock (it could not be released there)."""

    def __init__(self, message: str, *, hint: str | None = None, left: tuple[str, ...] = (), lock_kept: bool = False):
        super().__init__(message, hint=hint)
        self.left, self.lock_kept = left, lock_kept


def who(host: str, rank: int | None) -> str:
    return f"{host} (rank {rank})" if rank is not None else host


def tail(text: str, n: int = STDERR_LINES) -> str:
    lines = [line for line in text.rstrip().splitlines() if line.strip()]
    return "\n".join("    | " + line for line in lines[-n:])


class UpStatus(enum.Enum):
    """How ``up`` ended well; the value is the word its JSON ``finished`` event says."""

    UP = "up"
    ALREADY = "already running"  # the same version was up and healthy: nothing changed
    DETACHED = "detached: still booting"  # interrupted with --detach once every rank was started
    WATCHED = "detached from the watchdog"  # up, watched after boot, then Ctrl-C: left running


if TYPE_CHECKING:
    from inkctl.smoke.ready import FirstAnswer


@dataclass
class Outcome:
    seconds: float
    url: str = ""
    healthy_after_s: float | None = None
    first_answer: "FirstAnswer | None" = None  # the completion that made it ready
    smoke: tuple[SmokeResult, ...] = ()
    stage_seconds: dict[str, float] = field(default_factory=dict)
    status: UpStatus = UpStatus.UP
    port_open_s: float | None = None  # into the health wait: the server's first HTTP answer
    boot: dict | None = None  # execute.bootphases.boot_record: where the boot's time went

    @property
    def detached(self) -> bool:
        return self.status is UpStatus.DETACHED


class Runner:
    def __init__(self, plan: Plan, transports: dict[str, Transport], sink, *, secrets: dict | None = None,
                 health_timeout_s: float | None = None, cancel: threading.Event | None = None,
                 fabric: dict[str, dict[str, str]] | None = None):
        self.plan, self.transports, self.sink = plan, transports, sink
        self.secrets = secrets or {}
        self.fabric = fabric or {}  # per host, what its preflight read for the plan's FabricRefs
        self.health_timeout_s = health_timeout_s
        # set by a failure on one host (the others stop) or by Ctrl-C/SIGTERM (the CLI's handler
        # sets it instead of raising at an arbitrary point: every wait checks it)
        self.cancel = cancel if cancel is not None else threading.Event()
        self.touched: set[str] = set()  # hosts where this run started something
        self.lost: dict[str, HostError] = {}  # hosts whose connection died
        self.causes: list[str] = []  # root causes found beside the steps (the boot watchdog)
        self.stage: str | None = None  # the stage in progress (or the last one started)
        self.on_rank_line = None  # (watched rank, log line) during the health wait: the NCCL transport check
        self.phase_reader: Any = None  # the same, for the boot phases each engine reports (execute.bootphases)
        self._lock = threading.Lock()

    # -- one step ----------------------------------------------------------------------------
    def _step(self, step, outcome: Outcome) -> None:
        tr = self.transports[step.host]
        if isinstance(step, Run):
            argv, stdin = step.argv, None
            if step.files:  # written by the same remote command, before the argv runs
                from inkctl.plan.files import archive, files_dir, remote_argv

                base = files_dir(step)
                stdin = archive(base, [(f.path, self._content(f), f.mode) for f in step.files])
                argv = remote_argv(step, base)
            with self._lock:
                self.touched.add(step.host)
            res = tr.run(argv, timeout=RUN_TIMEOUT_S, stdin=stdin)
            if step.kind == pagecache.KIND and res.exit_code == 0:
                dropped = pagecache.parse(res.text())
                self.sink.emit(Info(dropped.describe(step.host), level="info" if dropped.allowed else "warning"))
            if res.exit_code not in step.ok_codes:
                err = tail(res.err_text()) or tail(res.text()) or "    (no output)"
                raise StepError(
                    f"{who(step.host, step.rank)}: {step.purpose} failed with exit code {res.exit_code}\n"
                    f"  $ {_short(command_line(step.argv))}\n  last lines of its output:\n{err}",
                    host=step.host, rank=step.rank, purpose=step.purpose, hint=_hint_for(res.err_text()))
        elif isinstance(step, Put):
            content = self._content(step)
            with self._lock:
                self.touched.add(step.host)
            tr.put(step.path, content, step.mode)
        elif isinstance(step, WaitFor):
            self._wait_for(tr, step)
        elif isinstance(step, WaitHealth):
            self._health(step, outcome)
        elif isinstance(step, Smoke):
            from inkctl.execute.deploy.smoke import run_smoke

            outcome.smoke = run_smoke(step, self._key(step.api_key))
            self.sink.emit(SmokeFinished(url=step.url, results=outcome.smoke))
        elif isinstance(step, Register):
            from inkctl.client.workers import register_workers

            for change in register_workers(step.url, step.workers):
                self.sink.emit(Info(f"gateway: {change}"))
        else:
            raise InkctlError(f"unknown step {step!r}")

    def _health(self, step: WaitHealth, outcome: Outcome) -> None:
        """The health wait, then (readiness) one answer; with an API key, a request without it must get 401."""
        from inkctl.execute.supervise.health import HealthWait

        from inkctl.execute.supervise.health import LineReaders

        runtime = self.plan.host(step.host).runtime
        wait = HealthWait(step, self.transports, runtime, self.sink.emit, self.cancel,
                          timeout_s=self.health_timeout_s, plan=self.plan,
                          on_line=LineReaders(self.on_rank_line, self.phase_reader)
                          if self.on_rank_line or self.phase_reader else None)
        outcome.healthy_after_s = wait.run()
        outcome.port_open_s = wait.port_open_s
        outcome.url = step.url.rsplit("/", 1)[0] if step.url.count("/") > 2 else step.url
        if step.answer_url:  # readiness means it answers
            from inkctl.smoke.ready import first_answer

            key = self._key(step.api_key)
            outcome.first_answer = first_answer(step.answer_url, step.model, step.timeout_s, key)
            if key is not None:
                from inkctl.execute.deploy.smoke import check_guarded

                self.sink.emit(Info(check_guarded(step.answer_url, step.model)))

    def _key(self, name: str | None) -> str | None:
        """The API key's value for a request header (the scrubber masks it in all that is shown)."""
        if name is None:
            return None
        if name not in self.secrets:
            raise InkctlError(f"the plan sends the API key {name} but it was not read on this machine")
        return self.secrets[name].reveal()

    def _content(self, step: Put) -> bytes:
        c = step.content
        data = render_env_file(c, self.secrets, self.fabric.get(step.host)) if isinstance(c, EnvFile) else c.encode() if isinstance(c, str) else c
        if step.sha256:
            got = hashlib.sha256(data).hexdigest()
            if got != step.sha256:
                what = "the local file is missing" if not data else f"its content has sha256 {got}"
                raise StepError(f"{who(step.host, step.rank)}: {step.purpose}: {step.path} is pinned to sha256 "
                                f"{step.sha256} but {what}; nothing was uploaded",
                                host=step.host, rank=step.rank, purpose=step.purpose,
                                hint="put the right file in the recipe's patches directory, or update the pin")
        return data

    def _wait_for(self, tr: Transport, step: WaitFor) -> None:
        t0 = time.monotonic()
        last = ""
        while True:
            res = tr.run(step.argv, timeout=max(15.0, step.interval_s * 5))
            out = res.text() + res.err_text()
            last = out
            if res.ok and (step.expect is None or out.count(step.expect) >= step.expect_count):
                return
            if time.monotonic() - t0 >= step.timeout_s:
                seen = f" (its output shows {step.expect!r} {out.count(step.expect)} of {step.expect_count} times)" if step.expect else ""
                raise StepError(
                    f"{who(step.host, step.rank)}: {step.purpose}: timed out after {step.timeout_s:g} s{seen}\n"
                    f"  $ {_short(command_line(step.argv))}\n  last output:\n{tail(last) or '    (none)'}",
                    host=step.host, rank=step.rank, purpose=step.purpose)
            if self.cancel.wait(step.interval_s):
                raise Cancelled(started=True)

    # -- a stage -----------------------------------------------------------------------------
    def _host_steps(self, steps: list, outcome: Outcome) -> None:
        for s in steps:
            if self.cancel.is_set():
                return
            t0 = time.monotonic()
            self.sink.emit(StepStarted(host=s.host, rank=s.rank, kind=s.kind, purpose=s.purpose))
            try:
                self._step(s, outcome)
            except HostError as e:
                with self._lock:
                    if e.cause in ("unreachable", "timeout"):
                        self.lost[e.host] = e
                self.sink.emit(StepFailed(host=s.host, rank=s.rank, kind=s.kind, purpose=s.purpose,
                                          seconds=round(time.monotonic() - t0, 3), message=e.message))
                raise
            except InkctlError as e:
                self.sink.emit(StepFailed(host=s.host, rank=s.rank, kind=s.kind, purpose=s.purpose,
                                          seconds=round(time.monotonic() - t0, 3), message=e.message))
                raise
            self.sink.emit(StepFinished(host=s.host, rank=s.rank, kind=s.kind, purpose=s.purpose,
                                        seconds=round(time.monotonic() - t0, 3)))

    def _stage(self, index: int, stage: Stage, outcome: Outcome) -> float:
        t0 = time.monotonic()
        hosts = stage.hosts()
        self.sink.emit(StageStarted(index=index, total=len(self.plan.stages), name=stage.name,
                                    description=stage.description, hosts=tuple(hosts)))
        by_host = {h: [s for s in stage.steps if s.host == h] for h in hosts}
        # the first failure stops the stage's other hosts; they are waited for (a docker run in
        # flight must not recreate a container after its rollback) before it is raised
        each(lambda steps: self._host_steps(steps, outcome), by_host.values(), name="stage",
             cancel=self.cancel, grace_s=RUN_TIMEOUT_S)
        if len(by_host) > 1 and self.cancel.is_set():
            raise Cancelled(started=True)
        secs = time.monotonic() - t0
        self.sink.emit(StageFinished(index=index, name=stage.name, seconds=round(secs, 3)))
        return secs

    def run(self) -> Outcome:
        """Every stage in order; raises the first failure (after the stage's other hosts stopped)."""
        t0 = time.monotonic()
        outcome = Outcome(seconds=0.0)
        for i, stage in enumerate(self.plan.stages, 1):
            if self.cancel.is_set():
                raise Cancelled(started=bool(self.touched))
            self.stage = stage.name
            outcome.stage_seconds[stage.name] = self._stage(i, stage, outcome)
            if self.cancel.is_set():
                raise Cancelled(started=True)
        outcome.seconds = time.monotonic() - t0
        return outcome

    # -- undo --------------------------------------------------------------------------------
    def rollback(self, reason: str) -> tuple[list[str], list[str]]:
        """Run the plan's teardown on every host this run touched, in parallel.
        Returns (hosts cleaned, "host: what was left and why")."""
        t0 = time.monotonic()
        hosts = [h.name for h in self.plan.hosts if h.name in self.touched]
        self.sink.emit(RollbackStarted(reason=reason, hosts=tuple(hosts)))

        def one(host: str) -> str | None:
            """None when removed; else what was left and why."""
            containers = ", ".join(c.name for c in self.plan.containers if c.host == host) or "its files"
            # a host counted lost because one command timed out may still answer: its connection
            # says (keepalives), and a host that answers is cleaned, not reported as left
            if host in self.lost and not self.transports[host].alive():
                return f"{host}: {containers}, {self.plan.host(host).state_dir} and the deploy lock (host unreachable)"
            try:
                remove_from_host(self.transports[host], [s for s in self.plan.teardown if s.host == host],
                                 timeout=TEARDOWN_TIMEOUT_S)
            except RemovalFailed as e:
                return f"{host}: {e.reason}"
            except HostError as e:
                with self._lock:
                    self.lost.setdefault(host, e)
                return f"{host}: {containers} ({e.reason})"
            with self._lock:
                self.lost.pop(host, None)  # it answered: its deploy lock is released with the others
            return None

        # this runs after a failure or a first Ctrl-C: a second Ctrl-C abandons a removal that
        # hangs on a host at once (the fan-out's threads are daemons, the process can exit)
        results = each(one, hosts, name="rollback", on_interrupt="abandon")
        cleaned = [h for h, why in zip(hosts, results) if why is None]
        left = [why for why in results if why is not None]
        self.sink.emit(RollbackFinished(removed=tuple(cleaned), left=tuple(left), seconds=round(time.monotonic() - t0, 3)))
        return cleaned, left

    def left_running(self) -> list[str]:
        """What --keep-on-failure leaves, for the message."""
        return [f"{c.host}: {c.name}" for c in self.plan.containers if c.host in self.touched]


DETACHABLE = ("health", "smoke")  # stages after which every rank has been started


def launch(runner: Runner, *, keep_on_failure: bool = False, detach: bool = False) -> Outcome:
    """Run the plan; on any failure or interrupt undo what this run started (or say what was kept).

    ``detach``: an interrupt once every rank was started (the health wait, the smoke prompts)
    leaves the deployment as it is and returns an Outcome with ``detached`` set."""
    try:
        return runner.run()
    except (InkctlError, KeyboardInterrupt, Cancelled, Exception) as e:
        runner.cancel.set()
        interrupted = isinstance(e, (KeyboardInterrupt, Cancelled))
        if interrupted and detach and runner.stage in DETACHABLE and not runner.causes:
            return Outcome(seconds=0.0, url=_base_url(runner.plan), status=UpStatus.DETACHED)
        if interrupted:
            cause, hint = "interrupted", None
        elif isinstance(e, InkctlError):
            cause, hint = e.message, e.hint
        else:
            cause, hint = f"internal error: {type(e).__name__}: {e}", "run with --debug and please report it"
        if runner.causes:  # e.g. the watchdog killed a rank: that is why it exited
            cause = "\n".join(runner.causes) + "\n" + cause
        if keep_on_failure:
            kept = runner.left_running()
            msg = cause + ("\nleft as they are (--keep-on-failure):\n" + "\n".join("  " + k for k in kept)
                           if kept else "\nnothing had been started")
            down = "remove them with: inkctl down RECIPE (with the same --hosts)"
            err = LaunchFailed(msg, hint=hint + "; " + down if hint else down)
        else:
            cleaned, left = runner.rollback(cause.splitlines()[0])
            parts = [cause]
            if cleaned:
                parts.append(f"rolled back: removed the deployment's containers and files on {', '.join(cleaned)}")
            if left:
                parts.append("could NOT remove:\n" + "\n".join("  " + x for x in left))
            if not cleaned and not left:
                parts.append("nothing had been started on any host")
            err = LaunchFailed("\n".join(parts), hint=hint, left=tuple(left), lock_kept=bool(left) and bool(runner.lost))
        if interrupted:
            err.exit_code = EXIT_INTERRUPTED
        if not isinstance(e, (InkctlError, KeyboardInterrupt, Cancelled)):
            raise err from e
        raise err from None


def _base_url(plan: Plan) -> str:
    for s in plan.steps():
        if isinstance(s, WaitHealth):
            return s.url.rsplit("/", 1)[0] if s.url.count("/") > 2 else s.url
    return ""


def _short(text: str, n: int = 400) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _hint_for(stderr: str) -> str | None:
    s = stderr.lower()
    if "is already in use" in s and "container" in s:
        return "a container of that name exists: run inkctl down RECIPE first (or inkctl status)"
    if "no such image" in s or "unable to find image" in s or "image not known" in s:
        return "the image is not on that host: load it there (docker load) or set engine.image.pull: true"
    if "could not select device driver" in s:
        return "the host's container runtime has no GPU support (nvidia-container-toolkit)"
    if "command not found" in s or "executable file not found" in s:
        return "install the container runtime on that host, or fix container.runtime in the recipe"
    if "permission denied" in s and "docker" in s:
        return "the SSH user cannot use docker: add it to the docker group or connect as root"
    return None
