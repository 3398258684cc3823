"""Wait for the server to answer while watching every rank's container.

A multi-node boot fails in ways the health URL alone never shows: a worker dies on an NCCL
error and the head waits forever for it. So while polling the URL from the control machine,
the wait follows each rank's log (one channel per container on the existing connection:
the last line feeds the live display, the last 50 explain a crash) and inspects containers
in one ``inspect`` per host: each interval those whose log stream is not open, and all of
them every 10 s. An open ``logs --follow`` stream ends when its container exits, which
triggers an inspect at once: a crash fails the wait within a moment, with its exit code and
its last 50 log lines, without an inspect per host per interval while all is well (on big
clusters, and on test hosts sharing two cores, those processes add up).

The streams (and with them the inspects) start FOLLOW_AFTER_S into the wait, not at once: a
deployment that answers by then (a small model, a warm restart) never pays for a remote
process per rank, and a rank that died before then is still noticed right away, since the
stream of an exited container ends as soon as it has printed its log.

The URL is polled every FAST_POLL_S at first, then less and less often up to
``health.interval_s`` (PollSchedule): a server that answers within the first seconds is seen
within tens of milliseconds, one that loads for minutes costs a request per interval. Any
change of answer (refused -> 503) and the head's log announcing its HTTP server bring the fast
polling back, since both mean the answer is near.
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
import time
from dataclasses import dataclass, field

from inkctl.errors import Cancelled, InkctlError
from inkctl.execute.state.deployed import ContainerState, parse_inspect_lines
from inkctl.execute.events import HealthProgress, RankState
from inkctl.execute.hosts.fanout import background, on_hosts
from inkctl.execute.hosts.ssh import LOST_AFTER_S
from inkctl.execute.supervise.ranks import HostLost, alive, lost_error, lost_hosts
from inkctl.execute.hosts.transport import HostError
from inkctl import runtimes
from inkctl.plan.step import WaitHealth

LOG_LINES = 50
FULL_INSPECT_S = 10.0  # every container is inspected this often even while its log stream is open
FOLLOW_AFTER_S = 1.0  # the log streams (and the inspects) start this far into the wait
FAST_POLL_S = 0.025  # the health URL is polled this often while an answer may come any moment
FAST_FOR_S = 10.0  # ... for this long after the wait starts (or the answer changes), then backing off
BACKOFF = 1.5  # each poll after that waits this much longer than the one before, up to interval_s
SETTLE_CHECK_S = 10.0  # after the first 200: how long a boot-log check may wait for every rank's verdict
SETTLE_S = 0.7  # after a rank died: time for its peers' deaths to show, to tell which was first

log = logging.getLogger(__name__)


_TLS: list = []  # the TLS context every health client shares, built once (see tls_context)
_TLS_LOCK = threading.Lock()


def tls_context():
    """httpx's default TLS context (certificate store loaded), built once per process. Loading
    the CA bundle is the slow part of making an httpx client; ``up`` builds it in the background
    while it connects, so the health wait's client costs nothing on the critical path."""
    with _TLS_LOCK:
        if not _TLS:
            import httpx

            _TLS.append(httpx.create_ssl_context())
        return _TLS[0]


def warm() -> None:
    """Everything the health wait's first poll would otherwise pay for: the TLS context and
    httpx's transport modules (httpcore and the async backends it finds installed, which it
    imports when the first client is made). ``up`` calls it in a background thread."""
    import httpx

    httpx.Client(trust_env=False, verify=tls_context()).close()


class RankFailed(InkctlError):
    """A rank's container exited (or vanished) before the server became healthy."""

    def __init__(self, message: str, *, host: str, rank: int, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.host, self.rank = host, rank


class HealthTimeout(InkctlError):
    pass


@dataclass
class Watched:
    """A rank the wait keeps an eye on: its log's last lines and its container's latest state."""

    host: str
    container: str
    rank: int
    lines: collections.deque = field(default_factory=lambda: collections.deque(maxlen=LOG_LINES))
    seen: ContainerState | None = None  # the latest inspect (None before the first)
    missing: bool = False  # the latest inspect did not find the container
    streaming: bool = False  # its log stream is open: the container has not exited

    @property
    def status(self) -> str:
        return "missing" if self.missing else self.seen.state if self.seen is not None else "starting"

    @property
    def exit_code(self) -> int | None:
        return self.seen.exit_code if self.seen is not None else None

    @property
    def finished_at(self) -> float:
        """Seconds since the epoch when it exited; 0 while it runs."""
        t = self.seen.finished_at if self.seen is not None else None
        return t.timestamp() if t is not None else 0.0

    @property
    def last_line(self) -> str:
        return self.lines[-1] if self.lines else ""


class PollSchedule:
    """When to poll the health URL next: every FAST_POLL_S for FAST_FOR_S, then each delay
    BACKOFF times the previous one, capped at ``interval_s``. ``hurry`` (a changed answer, the
    server announcing itself in its log) starts the fast phase again. Pure: times are passed in."""

    def __init__(self, interval_s: float, now: float):
        self.interval = interval_s
        self.fast = min(FAST_POLL_S, interval_s)
        self.delay = self.fast
        self.fast_until = now + FAST_FOR_S
        self.last: str | None = None

    def hurry(self, now: float) -> None:
        self.delay = self.fast
        self.fast_until = now + FAST_FOR_S

    def after(self, status: str, now: float) -> float:
        """The delay until the next poll, given the answer just seen at ``now``."""
        if self.last is not None and status != self.last:
            self.hurry(now)
        self.last = status
        if now >= self.fast_until:
            self.delay = min(self.interval, self.delay * BACKOFF)
        return self.delay


# uvicorn's and the OpenAI-compatible servers' own lines; each engine adds its own (EngineSpec.server_lines)
SERVER_STARTING = ("application startup complete", "uvicorn running", "started server process",
                   "waiting for application startup", "starting api server")


@functools.cache
def _server_lines() -> tuple[str, ...]:
    from inkctl.recipe.engine_registry import specs

    return SERVER_STARTING + tuple(line.lower() for s in specs() for line in s.server_lines)


def announces_server(line: str) -> bool:
    """A log line with which an engine says its HTTP server is (about to be) up."""
    low = line.lower()
    return any(s in low for s in _server_lines())


def phase_of(w: Watched, healthy: bool) -> str:
    """What a rank is doing, in words an operator knows, from its container state and log."""
    if w.status in ("exited", "dead", "missing"):
        return "exited"
    if w.status not in ("running", "starting"):
        return w.status
    if healthy:
        return "healthy" if w.rank == 0 else "serving"
    text = " ".join(list(w.lines)[-5:]).lower()
    if any(s in text for s in ("application startup complete", "uvicorn running", "fired up", "ready to roll",
                               "serving on", "starting api server", "route: ")):
        return "starting server"
    if "cuda graph" in text or "capturing" in text:
        return "capturing graphs"
    if any(s in text for s in ("loading weights", "safetensors", "checkpoint shards", "loading model")):
        return "loading weights"
    if "ray" in text and ("started" in text or "node" in text):
        return "ray"
    if "waiting" in text or "rendezvous" in text or "connect" in text:
        return "waiting for peers"
    return "starting" if w.status == "starting" else "running"


class LineReaders:
    """Several readers of the followed boot log as one ``on_line``: the first fault found wins;
    ``settled`` is the NCCL transport check's, when there is one."""

    def __init__(self, *readers):
        self.readers = [r for r in readers if r is not None]
        checks = [r for r in self.readers if hasattr(r, "settled")]
        self.settled = checks[0].settled if checks else None

    def __call__(self, watched, line: str) -> str | None:
        fault = None
        for r in self.readers:
            fault = r(watched, line) or fault
        return fault


class HealthWait:
    """One WaitHealth step: ``run()`` returns the seconds until the URL answered 200."""

    def __init__(self, step: WaitHealth, transports: dict, runtime: str, emit, cancel: threading.Event,
                 timeout_s: float | None = None, plan=None, on_line=None):
        self.step, self.transports, self.runtime, self.emit, self.cancel = step, transports, runtime, emit, cancel
        self.timeout = timeout_s if timeout_s is not None else step.timeout_s
        self.watched = [Watched(h, c, r) for h, c, r in step.watch]
        self.plan = plan  # for a lost host's report: every rank of the deployment
        self.on_line = on_line  # (watched, line) for each followed log line (the NCCL transport check)
        self.hosts = list(dict.fromkeys(w.host for w in self.watched))
        self.faults: list[tuple[Watched, str]] = []  # what on_line found wrong (it fails the wait)
        self.poke = threading.Event()
        self.stop = threading.Event()
        self.announced = threading.Event()  # the head's log says its HTTP server is starting
        self._last_sent: tuple | None = None
        self._last_sent_at = 0.0
        self.port_open_s: float | None = None  # into the wait: the first HTTP answer of any kind

    # -- log following -----------------------------------------------------------------------
    def _follow(self, w: Watched) -> None:
        """Follow one rank's log. The open stream is also the cheapest liveness signal there is:
        it ends when the container exits, which pokes the wait into an inspect at once."""
        # a line checker (NCCL's transport) reads the whole boot log; the display needs the last lines
        argv = runtimes.get(self.runtime).logs(w.container, follow=True, tail="all" if self.on_line else LOG_LINES)

        def line(text: str) -> None:
            w.lines.append(text)
            if w.rank == 0 and announces_server(text):
                self.announced.set()  # the answer is near: poll fast again
                self.poke.set()
            if self.on_line is not None:
                try:
                    fault = self.on_line(w, text)
                except Exception:  # a checker's bug must not stop following this rank's log
                    log.exception("rank %s on %s: the log-line check failed on %r", w.rank, w.host, text[:200])
                    return
                if fault:
                    self.faults.append((w, fault))
                    self.poke.set()

        try:
            self.transports[w.host].stream(argv, line, self.stop)
        except Exception as e:  # the inspect loop reports the host
            log.debug("rank %s on %s: following its log ended: %s", w.rank, w.host, e)
        w.streaming = False
        self.poke.set()

    # -- container states --------------------------------------------------------------------
    def _inspect_host(self, host: str, items: list[Watched]) -> None:
        argv = runtimes.get(self.runtime).inspect(*[w.container for w in items])
        res = self.transports[host].run(argv, timeout=20)
        seen = parse_inspect_lines(host, res.text())
        for w in items:
            w.seen = seen.get(w.container, w.seen)
            w.missing = w.container not in seen

    def _inspect_all(self, targets: list[Watched]) -> None:
        by_host: dict[str, list[Watched]] = {}
        for w in targets:
            by_host.setdefault(w.host, []).append(w)
        res = on_hosts(lambda h: self._inspect_host(h, by_host[h]), by_host, name="inspect")
        for h, e in res.failed.items():
            if alive(self.transports[h]):
                raise e
            raise self._lost(h, e.message.split(": ", 1)[-1]) from None

    def _check_hosts(self, t0: float) -> None:
        """Every host's connection, each turn of the wait (no round trip: the keepalives say it)."""
        for h in lost_hosts(self.transports, self.hosts):
            raise self._lost(h, f"no answer for {LOST_AFTER_S:g} s (SSH keepalives unacknowledged)",
                             when=f" {time.monotonic() - t0:.1f} s into the health wait")

    def _lost(self, host: str, why: str, when: str = ""):
        self.stop.set()
        if self.plan is not None:
            return lost_error(self.plan, self.transports, host, why, when=when)
        ranks = [w.rank for w in self.watched if w.host == host]
        others = "".join(f"\n  rank {w.rank} ({w.host}): {phase_of(w, False)}"
                         + (f"; last log line: {w.last_line}" if w.last_line else "") for w in self.watched if w.host != host)
        return HostLost(host, ranks, why, others, when)

    def _unsettled(self, first_200: float) -> bool:
        """A boot-log check that has not read every rank's verdict yet holds the success back
        (its log may still be on the way), for at most SETTLE_CHECK_S after the first 200."""
        settled = getattr(self.on_line, "settled", None)
        if settled is None or time.monotonic() - first_200 > SETTLE_CHECK_S:
            return False
        return not all(settled(w) for w in self.watched)

    def _check_faults(self) -> None:
        if self.faults:
            w, text = self.faults[0]
            from inkctl.execute.supervise.nccl import FALLBACK_HINT

            raise RankFailed(text, host=w.host, rank=w.rank, hint=FALLBACK_HINT)

    def _verified(self) -> bool:
        """After the head's 200: every rank's container, inspected now, is running. A rank that
        is not (or a host that does not answer) fails the wait: never report success with a rank
        unverified."""
        self._inspect_all(self.watched)
        return all(w.status == "running" for w in self.watched)

    def _crashed(self) -> Watched | None:
        """The rank that died first: when one rank crashes its peers follow within a second
        (an NCCL error), and the first is the one whose log explains it."""
        dead = [w for w in self.watched if w.status in ("exited", "dead", "missing", "removing", "stopped")]
        if not dead:
            return None
        return min(dead, key=lambda w: (w.status == "missing", w.finished_at or float("inf"), w.rank))

    def _logs(self, w: Watched) -> list[str]:
        try:
            res = self.transports[w.host].run(runtimes.get(self.runtime).logs(w.container, tail=LOG_LINES), timeout=20)
            lines = (res.text() + res.err_text()).splitlines() if res.ok else []
        except HostError:
            lines = []
        return lines[-LOG_LINES:] or list(w.lines)

    # -- progress ----------------------------------------------------------------------------
    def _progress(self, t0: float, status: str, healthy: bool = False, force: bool = False) -> None:
        ranks = tuple(RankState(host=w.host, rank=w.rank, container=w.container, phase=phase_of(w, healthy),
                                last_line=w.last_line[-300:], exit_code=w.exit_code if w.status == "exited" else None)
                      for w in self.watched)
        key = (status, tuple((r.phase, r.last_line) for r in ranks))
        now = time.monotonic()
        if force or key != self._last_sent or now - self._last_sent_at > 1.0:
            self._last_sent, self._last_sent_at = key, now
            self.emit(HealthProgress(url=self.step.url, elapsed=round(now - t0, 1), timeout=self.timeout,
                                     ranks=ranks, status=status))

    # -- the wait ----------------------------------------------------------------------------
    def run(self) -> float:
        """Until the head answers 200 with every rank running (the seconds it took), or a rank
        crashes, a host is lost, the timeout passes or ``cancel`` is set (raised)."""
        import httpx

        c = _Turns.starting(time.monotonic(), self.timeout, self.step.interval_s, self.on_line is not None)
        try:
            with httpx.Client(trust_env=False, verify=tls_context(),
                              timeout=httpx.Timeout(min(10.0, max(2.0, c.interval * 2)))) as http:
                while True:
                    if self.cancel.is_set():
                        raise Cancelled(started=True)
                    self._check_hosts(c.t0)
                    self._check_faults()
                    now = time.monotonic()
                    self._start_following(c, now)
                    self._inspect_turn(c, now)
                    if self.announced.is_set():
                        self.announced.clear()
                        c.polls.hurry(now)
                        c.next_http = min(c.next_http, now)
                    if now >= c.next_http and self._http_turn(http, c):
                        return time.monotonic() - c.t0
                    self._progress(c.t0, c.status)
                    self._timed_out(c)
                    self.poke.wait(max(0.01, min(c.wake() - time.monotonic(), 0.5)))
        finally:
            self.stop.set()

    def _start_following(self, c: _Turns, now: float) -> None:
        """Every rank's log followed, from ``follow_at`` on (until then only the URL is polled)."""
        if c.following or now < c.follow_at:
            return
        c.following = True
        for w in self.watched:
            w.streaming = True  # before the thread runs: no inspect races its start
        background(self._follow, self.watched, name="logs", label=lambda w: w.container)

    def _inspect_turn(self, c: _Turns, now: float) -> None:
        """Inspect the containers whose log stream is not open (all of them every
        ``FULL_INSPECT_S``, or when poked); a crashed rank is raised."""
        poked = self.poke.is_set()
        if not c.following or not (poked or now >= c.next_check or now >= c.next_full):
            return
        self.poke.clear()
        full = now >= c.next_full
        targets = self.watched if full else [w for w in self.watched if not w.streaming]
        if targets:
            self._inspect_all(targets)
        c.next_check = time.monotonic() + c.interval
        if full:
            c.next_full = time.monotonic() + FULL_INSPECT_S
        dead = self._crashed()
        if dead is not None:
            # peers of a crashed rank die within a moment (NCCL errors); look
            # again shortly so that the first to die is the one reported
            if len(self.watched) > 1:
                time.sleep(SETTLE_S)
                self._inspect_all(self.watched)
                dead = self._crashed() or dead
            self._progress(c.t0, c.status, force=True)
            raise self._crash_error(dead, c.t0)

    def _http_turn(self, http, c: _Turns) -> bool:
        """One poll of the URL; True once it answers 200 with every rank verified running."""
        c.status = _poll(http, self.step.url)
        seen = time.monotonic()
        if self.port_open_s is None and c.status.isdigit():
            self.port_open_s = seen - c.t0
        c.next_http = seen + c.polls.after(c.status, seen)
        if c.status != "200":
            return False
        self._check_hosts(c.t0)
        self._check_faults()
        c.first_200 = c.first_200 or time.monotonic()
        if self._unsettled(c.first_200):
            c.status = "200 (reading each rank's NCCL transport)"
            return False
        if self._verified():
            self._progress(c.t0, c.status, healthy=True, force=True)
            return True
        dead = self._crashed()
        if dead is not None:
            self._progress(c.t0, c.status, force=True)
            raise self._crash_error(dead, c.t0)
        c.status = "200 (not every rank running yet)"
        return False

    def _timed_out(self, c: _Turns) -> None:
        if time.monotonic() >= c.deadline:
            raise HealthTimeout(
                f"timed out after {self.timeout:g} s waiting for {self.step.url} (last answer: {c.status})"
                + self._states_text(),
                hint="raise health.timeout_s in the recipe (or --timeout) if the model needs longer to load")

    def _states_text(self) -> str:
        parts = [f"\n  rank {w.rank} ({w.host}, {w.container}): {phase_of(w, False)}"
                 + (f"; last log line: {w.last_line}" if w.last_line else "") for w in self.watched]
        return "".join(parts)

    def _crash_error(self, w: Watched, t0: float) -> RankFailed:
        lines = self._logs(w)
        what = "exited" if w.status != "missing" else "disappeared"
        code = f" with code {w.exit_code}" if w.exit_code is not None and w.status != "missing" else ""
        body = "\n".join("    | " + line for line in lines) if lines else "    (no log output)"
        others = [x for x in self.watched if x is not w]
        extra = "".join(f"\n  rank {x.rank} ({x.host}): {phase_of(x, False)}"
                        + (f" too, with code {x.exit_code}, after it" if x.status == "exited" else "") for x in others)
        return RankFailed(
            f"rank {w.rank} on {w.host} (container {w.container}) {what}{code} after {time.monotonic() - t0:.1f} s, "
            f"before {self.step.url} answered; its last {len(lines)} log lines:\n{body}{extra}",
            host=w.host, rank=w.rank,
            hint="the log above is the engine's own; fix the cause (or use --keep-on-failure to inspect the containers)")


@dataclass
class _Turns:
    """When the health wait does what next (monotonic seconds) and what it saw last."""

    t0: float
    deadline: float
    interval: float
    polls: PollSchedule
    follow_at: float  # until then only the URL is polled; a boot-log check reads from the start
    next_http: float
    next_check: float  # containers whose log stream is not (or no longer) open
    next_full: float  # every container, whatever its stream says
    following: bool = False
    first_200: float | None = None
    status: str = "not polled yet"

    @classmethod
    def starting(cls, t0: float, timeout: float, interval: float, read_from_start: bool) -> _Turns:
        follow_at = t0 + (0.0 if read_from_start else FOLLOW_AFTER_S)
        return cls(t0, t0 + timeout, interval, PollSchedule(interval, t0), follow_at, t0, follow_at + interval,
                   follow_at + FULL_INSPECT_S)

    def wake(self) -> float:
        """The next moment something is due (the deadline at the latest)."""
        return min(self.next_http, self.next_check, self.next_full, self.deadline,
                   self.follow_at if not self.following else self.deadline)


def _poll(http, url: str) -> str:
    import httpx

    try:
        r = http.get(url)
        return str(r.status_code)
    except httpx.ConnectError:
        return "connection refused"
    except httpx.TimeoutException:
        return "no answer (timeout)"
    except httpx.HTTPError as e:
        return type(e).__name__


def check_once(url: str, timeout: float = 5.0) -> tuple[bool, str]:
    """One GET from the control machine: (answered 200, what was seen, e.g. 'HTTP 503')."""
    import httpx

    try:
        code = httpx.get(url, timeout=timeout, trust_env=False, verify=tls_context()).status_code
    except httpx.HTTPError as e:
        return False, type(e).__name__
    return code == 200, f"HTTP {code}"
