"""Bring a planned deployment up on connected hosts: the orchestration behind ``inkctl up``.

Order: each host is probed as soon as it is connected (deploy lock, containers, image, GPUs,
memory, ports, paths: one remote command) -> the one barrier correctness needs: every answer is
in -> build or deliver a missing image -> preflight table -> nothing there, the same version
running (done), or another version (replace) -> run the plan with the boot watchdog beside it
-> optionally keep watching memory after boot. Never prints: events go to ``sink``.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Union

from inkctl.errors import Cancelled, InkctlError
from inkctl.execute.deploy.replace import Replacement, replace_old
from inkctl.execute.deploy.runner import Outcome, Runner, UpStatus, launch
from inkctl.execute.hosts.warm import warm_imports
from inkctl import runtimes

log = logging.getLogger(__name__)


def bring_up(loaded, plan, sink, secrets, *, accept_new: bool, keep: bool, timeout: float | None, skip: list[str],
             interrupt: threading.Event, detach: bool = False, on_healthy=None,
             allow_socket_fallback: bool = False, after_boot: bool = True, weights=None) -> Outcome:
    """Raises Cancelled when ``interrupt`` stops it (``started`` says whether anything was launched).
    ``after_boot=False``: return once healthy even when the recipe's watchdog stays attached
    (``up --watch`` supervises instead, memory included). ``weights(loaded)``: the weights
    preflight check, or None (``inkctl.weights.preflight.weights_check``, passed in by the
    caller: execute does not import the weights package above it)."""
    from inkctl.execute.events import Info
    from inkctl.execute.hosts.connect import close_all

    lock, transports, answers = _connected(loaded, plan, sink, accept_new, interrupt)
    launched = False
    try:
        answers = {h.name: answers[h.name] for h in plan.hosts}
        lock.taken({h: a.lock_answer() for h, a in answers.items()})  # another command at work explains everything else
        for text in lock.notices:
            sink.emit(Info(text=text, level="warning"))
        existing = _existing(plan, answers)
        check = weights(loaded) if weights is not None else None  # the pinned model's files (inkctl.weights)
        ready: dict = {}
        problem = _get_ready(loaded, plan, transports, sink, answers, skip, check, ready)
        already = _settle(existing, problem, loaded, plan, transports, sink, skip, check, interrupt)
        if already is not None:
            return already
        if interrupt.is_set():
            raise Cancelled()
        launched = True
        from inkctl.execute.deploy.preflight.fabric import values

        runner = Runner(plan, transports, sink, secrets=secrets, health_timeout_s=timeout, cancel=interrupt,
                        fabric=values(plan, answers))
        outcome = _launch(loaded, plan, transports, runner, sink, existing, keep=keep, detach=detach,
                          allow_socket_fallback=allow_socket_fallback)
        if outcome.boot is not None and "proof" in ready:
            outcome.boot["proof"] = ready["proof"]  # before the launch: what the argv proof cost
        if outcome.detached or not (after_boot and loaded.recipe.watchdog_on and loaded.recipe.watchdog.after_boot):
            return outcome
        lock.release()  # the deployment is up: down (or another up) may run while this one watches
        if on_healthy is not None:
            on_healthy(outcome)
        _watch_after_boot(loaded.recipe, plan, transports, sink, interrupt)
        outcome.status = UpStatus.WATCHED
        return outcome
    except KeyboardInterrupt:  # a second Ctrl-C, raised by the CLI's handler
        raise Cancelled(started=launched) from None
    finally:
        lock.release()  # also after Ctrl-C: a lock must never outlive its command
        close_all(transports)


def _connected(loaded, plan, sink, accept_new: bool, interrupt: threading.Event):
    """Every host connected and probed, each the moment it is connected: (the deploy lock, the
    transports, host -> its probe's answer). A host that cannot be reached, or ``interrupt``,
    raises with nothing held."""
    from inkctl.execute.events import HostConnected, HostKeyAccepted, Info
    from inkctl.execute.hosts.connect import close_all, connect_each, connection_failure
    from inkctl.execute.state.deploylock import DeployLock

    def accepted(host, name, key_type, fp):
        from inkctl.execute.hosts.hostkeys import default_known_hosts

        sink.emit(HostKeyAccepted(host=host, name=name, key_type=key_type, fingerprint=fp, file=str(default_known_hosts())))

    t = time.monotonic()
    # one round trip per host, sent the moment that host is connected: the deploy lock, the
    # containers (the deployment probe and the name check), the image (ensure_image and
    # preflight) and everything else preflight reads; the answers are judged once all are in
    lock = DeployLock(plan, {}, "up")
    lock.record()  # one holder record for every host, made before the probes' threads ask for it
    answers: dict = {}
    connected: list[float] = []
    first = threading.Lock()

    def on_host(h: str, secs: float, e) -> None:
        if e is None:
            if first.acquire(blocking=False):  # the health wait's client is made while the hosts answer
                _warm_health()
            connected.append(secs)
            sink.emit(HostConnected(host=h, seconds=round(secs, 3)))

    def probe(name: str, transport) -> None:
        # preflight's modules load here, in the first connected host's thread: the other
        # handshakes go on meanwhile (nothing but connecting stands before the first connection)
        from inkctl.execute.deploy.preflight import probe_one

        if not interrupt.is_set():
            answers[name] = probe_one(loaded.recipe, plan, transport, lock=lock)
            # what runs once every answer is in loads while the other hosts still answer
            warm_imports(*AFTER_PROBES)

    res = connect_each(list(loaded.hosts), accept_new=accept_new, on_accept=accepted, on_host=on_host, then=probe)
    transports = lock.transports = res.transports
    if res.errors or interrupt.is_set():
        lock.give_back(answers)  # taken by the probes of the hosts that did connect
        close_all(transports)
        if interrupt.is_set():
            raise Cancelled()
        raise connection_failure(list(loaded.hosts), res)
    n = len(transports)
    sink.emit(Info(text=f"connected to {n} host{'s' if n != 1 else ''} in {max(connected, default=0.0):.2f} s, "
                        f"probed in {time.monotonic() - t:.2f} s"))
    return lock, transports, answers


# what the bring-up imports between the last probe's answer and the launch (the image check,
# the boot-phase reader): loaded while the hosts answer, not after
AFTER_PROBES = ("inkctl.execute.image.build", "inkctl.execute.supervise.bootphases")


def _settle(existing, problem, loaded, plan, transports, sink, skip: list[str], check,
            interrupt: threading.Event) -> Outcome | None:
    """What is already there, against the image and preflight's verdict (an existing deployment
    explains a failed check best): the same version healthy (its outcome: nothing to do), another
    version replaced (its containers removed), a conflict or a failed check raised."""
    from inkctl.execute.deploy.preflight import PreflightFailed

    if isinstance(existing, Conflict):
        raise existing.error
    if isinstance(existing, SameHealthy):
        return Outcome(seconds=0.0, url=existing.url, status=UpStatus.ALREADY)
    if isinstance(existing, OtherVersion):
        if problem is not None and not isinstance(problem, PreflightFailed):
            raise problem
        if interrupt.is_set():
            raise Cancelled()
        replace_old(existing.replacement, transports, sink)  # the GPUs cannot hold both versions
        if problem is not None:  # most likely the old containers' ports and names: check again
            from inkctl.execute.deploy.preflight import run_preflight

            run_preflight(loaded.recipe, plan, transports, skip=set(skip), sink=sink, weights=check,
                          proof_pins=_proof_pins(loaded))
    elif problem is not None:
        raise problem
    return None


def _launch(loaded, plan, transports, runner: Runner, sink, existing, *, keep: bool, detach: bool,
            allow_socket_fallback: bool) -> Outcome:
    """The plan run (the boot watchdog beside it), its boot record read; a failure after a
    replacement says that the previous version had been removed."""
    from inkctl.execute.supervise.bootphases import PhaseReader

    runner.on_rank_line = _transport_check(loaded, sink, allow_socket_fallback)
    runner.phase_reader = PhaseReader(loaded.recipe.engine.kind)
    try:
        with _watchdog(loaded.recipe, plan, transports, runner, sink):
            outcome = launch(runner, keep_on_failure=keep, detach=detach)
        if not outcome.detached:
            outcome.boot = _boot_record(plan, outcome, runner.phase_reader, loaded.recipe.engine.kind)
    except InkctlError as e:
        if isinstance(existing, OtherVersion):
            e.message += (f"\nthe previous version ({', '.join(existing.replacement.old_hashes)}) "
                          "had been removed before the launch")
            e.args = (e.message,)
        raise
    return outcome


def _get_ready(loaded, plan, transports, sink, answers, skip: list[str], check, ready: dict) -> InkctlError | None:
    """The image (built or delivered where missing, held against its pins), then preflight:
    the first failure, returned so that what is already there can explain it first. ``ready``
    gets what the boot record keeps of it: the argv proof's seconds (the slowest host)."""
    from inkctl.execute.deploy.preflight import host_image, run_preflight
    from inkctl.execute.image.build import ensure_probed_image

    try:
        ensure_probed_image(loaded, plan, transports, sink, answers, host_image(loaded.recipe, plan))
        results = run_preflight(loaded.recipe, plan, transports, skip=set(skip), sink=sink, answers=answers,
                                weights=check, proof_pins=_proof_pins(loaded))
        proofs = [r for r in results if r.check == "argv" and r.seconds is not None]
        if proofs:
            ready["proof"] = {"seconds": max(r.seconds or 0.0 for r in proofs),
                              "asked": sum(1 for r in proofs if r.seconds)}
        _compile_cache(loaded, plan, transports, sink)
    except InkctlError as e:
        return e
    return None


def _proof_pins(loaded) -> dict[str, dict]:
    """The lock file's verdicts on the argv (a pinned verdict is not asked again)."""
    from inkctl.recipe.lockfile import read_proofs

    return read_proofs(loaded)


def _compile_cache(loaded, plan, transports, sink) -> None:
    """With the compile cache pinned in the lock file: every host's cache, where present, is
    the pinned one (a corrupt cache fails the boot before anything starts: engines trust it)."""
    if not loaded.recipe.compile_cache.enabled:
        return
    from pathlib import PurePosixPath

    from inkctl.execute.deploy import cachesync
    from inkctl.execute.events import Info
    from inkctl.recipe.lockfile import read_pins

    dirs = {s.host: s.argv[-1] for st in plan.stages if st.name == "compile-cache" for s in st.steps}
    if not dirs:
        return
    pin = read_pins(loaded).get(cachesync.PIN_PREFIX + PurePosixPath(next(iter(dirs.values()))).name)
    if pin is None:
        return
    states = cachesync.scan(transports, dirs)
    bad = [s for s in states.values() if s.present and s.files and s.digest != pin]
    warm = [s.host for s in states.values() if s.digest == pin]
    if bad:
        raise InkctlError("compile cache corrupt: " + "; ".join(
            f"{s.host}: {s.dir} has sha256 {(s.digest or '')[:16]}, the lock file pins {pin[:16]}" for s in bad),
            hint=f"inkctl cache {loaded.path} --verify names the files; inkctl cache {loaded.path} copies the "
                 "pinned one over it")
    sink.emit(Info(text=f"compile cache: pinned cache on {', '.join(warm) or 'no host'}"
                        + (f"; the others compile ({', '.join(h for h in dirs if h not in warm)})"
                           if len(warm) < len(dirs) else "")))


def _watch_after_boot(recipe, plan, transports, sink, interrupt: threading.Event) -> None:
    """``watchdog.after_boot``: stay attached, reading MemAvailable, until Ctrl-C (which detaches
    and leaves the deployment running). A trip kills the deployment's containers and fails."""
    from inkctl.execute.events import Info
    from inkctl.execute.supervise.watchdog import Watchdog

    w = recipe.watchdog
    sink.emit(Info(text=f"watching MemAvailable on {', '.join(h.name for h in plan.hosts)} every {w.interval_s:g} s "
                        f"(watchdog.after_boot; floor {w.mem_available_min_gib:g} GiB for {w.consecutive} reads); "
                        "Ctrl-C detaches and leaves the deployment running"))
    latest: dict[str, float] = {}
    said = [0.0]
    trips = []
    lock = threading.Lock()

    def reading(host: str, gib: float) -> None:
        with lock:
            latest[host] = gib
            now = time.monotonic()
            if len(latest) == len(plan.hosts) and now - said[0] >= AFTER_BOOT_EVERY_S:
                said[0] = now
                sink.emit(Info(text="watchdog: MemAvailable " + ", ".join(f"{h} {g:.1f} GiB" for h, g in latest.items())))

    def tripped(trip) -> None:
        trips.append(trip)
        interrupt.set()

    dog = Watchdog.for_recipe(recipe, plan, transports, on_trip=tripped, on_reading=reading).start()
    try:
        while not interrupt.wait(0.5):  # short waits: a signal handler must get to run
            pass
    finally:
        dog.stop_event.set()
    if not trips:
        sink.emit(Info(text=f"detached: {plan.deployment} keeps running (the watchdog stopped watching)"))
        return
    trip = trips[0]
    others = _kill_all(plan, transports, skip=trip.host)
    raise InkctlError(f"after boot: {trip.message}" + (f"\nalso killed {', '.join(others)}" if others else ""),
                      hint="the containers are stopped, not removed: read inkctl logs RECIPE, then inkctl down RECIPE")


AFTER_BOOT_EVERY_S = 30.0  # how often up prints the readings while it watches after boot


def _kill_all(plan, transports, *, skip: str) -> list[str]:
    """Kill the deployment's containers on the other hosts (their peer is gone); -> what was killed."""
    killed = []
    for h in plan.hosts:
        names = [c.name for c in plan.containers if c.host == h.name]
        if h.name == skip or not names:
            continue
        try:
            if transports[h.name].run(runtimes.get(h.runtime).kill(*names), timeout=30).ok:
                killed += names
        except Exception as e:  # the host's error is reported by the rollback that follows
            log.debug("%s: killing %s failed: %s", h.name, ", ".join(names), e)
    return killed


class _watchdog:
    """The boot memory watchdog during the launch, when the recipe wants it (unified memory).

    A trip kills that host's containers (the health wait then fails on them) and its reading
    series becomes the first line of the failure, since it is the cause."""

    def __init__(self, recipe, plan, transports, runner, sink):
        self.on = recipe.watchdog_on
        self.args = (recipe, plan, transports, runner, sink)
        self.dog = None

    def __enter__(self):
        if not self.on:
            return self
        from inkctl.execute.events import Info
        from inkctl.execute.supervise.watchdog import Watchdog

        recipe, plan, transports, runner, sink = self.args

        def tripped(trip) -> None:
            runner.causes.append(trip.message)
            sink.emit(Info(text=trip.message, level="warning"))

        self.dog = Watchdog.for_recipe(recipe, plan, transports, on_trip=tripped).start()
        return self

    def __exit__(self, *exc) -> None:
        if self.dog is not None:
            self.dog.stop_event.set()  # its threads end at their next reading; nobody waits for them


def _boot_record(plan, outcome, reader, engine: str) -> dict:
    """inkctl's milestones, in seconds from the start of the stage that starts the head's
    container, and each rank's phases as its engine reported them."""
    from inkctl.execute.supervise.bootphases import boot_record
    from inkctl.smoke.ready import HEAD_START_STAGES

    order = [s.name for s in plan.stages]
    start = next((i for i, n in enumerate(order) if n in HEAD_START_STAGES), None)
    marks: dict[str, float] = {}
    if start is not None and "health" in order and all(n in outcome.stage_seconds for n in order[start:order.index("health")]):
        container = outcome.stage_seconds[order[start]]
        before_health = sum(outcome.stage_seconds[n] for n in order[start:order.index("health")])
        marks["container"] = container
        if outcome.port_open_s is not None:
            marks["port_open"] = before_health + outcome.port_open_s
        if outcome.healthy_after_s is not None:
            marks["health"] = before_health + outcome.healthy_after_s
        if outcome.first_answer is not None and outcome.healthy_after_s is not None:
            # the readiness completion's first streamed token, not the end of its answer
            marks["first_token"] = before_health + outcome.healthy_after_s + outcome.first_answer.first_token_s
    return boot_record(engine, reader.phases() if reader is not None else [], marks)


def _transport_check(loaded, sink, allow: bool):
    """With network.rdma: read each rank's boot log for the network NCCL chose (execute.supervise.nccl)."""
    recipe = loaded.recipe
    if not recipe.network.rdma:
        return None
    from inkctl.execute.events import Info
    from inkctl.execute.supervise.nccl import TransportCheck

    hcas = {h.name: list(h.ib_hca if h.ib_hca is not None else recipe.network.ib_hca) for h in loaded.hosts}
    return TransportCheck(hcas_of=hcas, allow=allow, warn=lambda text: sink.emit(Info(text=text, level="warning")))


def _warm_health() -> None:
    """httpx and its TLS context, for the health wait, while the hosts answer the probes."""
    def warm():
        try:
            from inkctl.execute.supervise.health import warm

            warm()
        except Exception as e:  # the health wait builds it (and reports any error) itself
            log.debug("warming the health client failed: %s", e)

    threading.Thread(target=warm, daemon=True, name="warm-health").start()


@dataclass(frozen=True)
class Nothing:
    """No container of the deployment on any host."""


@dataclass(frozen=True)
class SameHealthy:
    """This version is up on every host and its health URL answers: ``up`` changes nothing."""

    url: str


@dataclass(frozen=True)
class OtherVersion:
    """Containers of another version (another recipe hash): ``up`` replaces them."""

    replacement: Replacement


@dataclass(frozen=True)
class Conflict:
    """What is there (or what could not be asked) stops ``up``; ``error`` says what and why."""

    error: InkctlError


Existing = Union[Nothing, SameHealthy, OtherVersion, Conflict]


def _existing(plan, answers) -> Existing:
    """A second ``up`` must neither duplicate nor roll back the first one's containers."""
    from inkctl.execute.state.deployed import of_deployment, parse_ps, ps_failed
    from inkctl.execute.deploy.replace import Replacement

    items = []
    for h in plan.hosts:  # what the probe's ``ps --all`` listed, by the deployment's label
        a = answers[h.name]
        if a.error is not None:
            return Conflict(a.error)
        out, err, rc = a.sections.get("containers")
        if rc != 0:
            return Conflict(ps_failed(h.name, h.runtime, rc, err))
        items += of_deployment(parse_ps(h.name, out), plan.deployment)
    if not items:
        return Nothing()
    if any(f.recipe_hash != plan.recipe_hash for f in items):
        return OtherVersion(Replacement(plan, items))
    planned = {(c.host, c.name) for c in plan.containers}
    running_same = all(f.state == "running" and f.recipe_hash == plan.recipe_hash for f in items)
    have = {(f.host, f.name) for f in items}
    listing = "\n".join(f"  {f.host}: {f.name} ({f.state}{'' if f.recipe_hash == plan.recipe_hash else ', another recipe version'})"
                        for f in items)
    if running_same and have == planned:
        from inkctl.execute.supervise.health import check_once

        url = plan.health_url
        if url and check_once(url)[0]:
            return SameHealthy(url.rsplit("/", 1)[0])
        return Conflict(InkctlError(
            f"deployment {plan.deployment} is already running but {url} does not answer 200:\n{listing}\nnothing was changed",
            hint="see inkctl status / inkctl logs, or replace it: inkctl down RECIPE, then inkctl up RECIPE"))
    return Conflict(InkctlError(
        f"deployment {plan.deployment} already has containers on its hosts:\n{listing}\nnothing was changed",
        hint="remove them first: inkctl down RECIPE (with the same --hosts), then run up again"))
