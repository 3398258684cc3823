"""``up`` and ``down``: the commands that touch hosts. Thin: load -> plan -> connect -> run -> print.

``up`` is all-or-nothing: every host is connected (and its key checked) before anything starts
anywhere, and any failure after that (a step, a crashed rank, a health timeout, Ctrl-C,
SIGTERM) runs the plan's teardown on every host this run touched. ``down`` asks each host
what the deployment has there (by label) and removes exactly that.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.options import AcceptOpt, HostsOpt, OutputOpt, SetOpt, load_target, output_format, overrides
from inkctl.errors import EXIT_INTERRUPTED, InkctlError, UsageError


@app.command()
def up(
    recipe: Path = typer.Argument(..., help="Recipe file."),
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    keep_on_failure: bool = typer.Option(False, "--keep-on-failure", help="On failure leave what was started (for inspection) instead of removing it."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=1, help="Seconds to wait for health (default: the recipe's health.timeout_s)."),
    output: str = OutputOpt,
    skip_check: Optional[List[str]] = typer.Option(None, "--skip-check", help="Skip a preflight check by name (repeatable)."),
    detach: bool = typer.Option(False, "--detach", help="Ctrl-C during the health wait leaves the deployment booting (follow it with inkctl status / logs -f) instead of removing it."),
) -> None:
    """Bring the deployment up on its hosts; on any failure remove what was started.

    A different version of the same deployment (another recipe hash) is replaced: up shows what
    changes, removes the old containers, then launches the new ones."""
    fmt = output_format(output)
    t0 = time.monotonic()
    from inkctl.execute.events import Finished, Info, JsonLines, Scrubber, ScrubbingSink
    from inkctl.execute.secrets import resolve_secrets, secret_values
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.inputs import plan_inputs
    from inkctl.plan.step import EnvFile, Put
    from inkctl.recipe.source import load_recipe

    loaded = load_recipe(recipe, overrides(set_), hosts)
    if loaded.hosts is None:
        raise UsageError("up needs hosts: pass --hosts FILE (an inventory) or list hosts: in the recipe")
    _require_trusted(loaded)
    plan = build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded))
    needed = [n for s in plan.steps() if isinstance(s, Put) and isinstance(s.content, EnvFile) for n in s.content.secret_names]
    secrets = resolve_secrets(loaded.recipe.secrets, needed)  # before any connection: fail early, start nothing
    scrub = Scrubber(secret_values(secrets))
    sink = ScrubbingSink(JsonLines() if fmt == "json" else _live(), scrub)
    for w in loaded.warnings:
        sink.emit(Info(text=f"{w.location}: {w.path + ': ' if w.path else ''}{w.message}", level="warning"))
    interrupt = threading.Event()
    previous = _on_signals(interrupt)
    said = []

    def healthy(outcome) -> None:  # before up stays attached (watchdog.after_boot): say it is up now
        if fmt == "text":
            _summary(plan, outcome, time.monotonic() - t0)
            said.append(True)

    try:
        outcome = _up(loaded, plan, sink, secrets, accept_new=accept_new_host_keys, keep=keep_on_failure,
                      timeout=timeout, skip=list(skip_check or []), interrupt=interrupt, detach=detach, on_healthy=healthy)
    except KeyboardInterrupt:
        started = interrupt.is_set() and getattr(interrupt, "launching", False)
        left = "\n".join(f"  {c.host}: {c.name} and {plan.host(c.host).state_dir}" for c in plan.containers)
        text = ("interrupted again during the rollback: containers of this run may be left:\n" + left +
                f"\nremove them with: inkctl down {recipe}" + (f" --hosts {hosts}" if hosts else "")
                ) if started else "interrupted before anything was started; nothing to undo"
        err = InkctlError(text, exit_code=EXIT_INTERRUPTED)
        sink.emit(Finished(ok=False, deployment=plan.deployment, seconds=round(time.monotonic() - t0, 3), message=err.message))
        sink.close()
        raise err from None
    except InkctlError as e:
        e.message, e.hint = scrub.text(e.message), scrub.text(e.hint) if e.hint else e.hint
        e.args = (e.message,)
        sink.emit(Finished(ok=False, deployment=plan.deployment, seconds=round(time.monotonic() - t0, 3),
                           message=e.message, hint=e.hint or ""))
        sink.close()
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    total = time.monotonic() - t0
    message = ("already running" if getattr(outcome, "already", False) else
               "detached: still booting" if outcome.detached else
               "detached from the watchdog" if getattr(outcome, "watched", False) else "up")
    sink.emit(Finished(ok=True, deployment=plan.deployment, seconds=round(total, 3), url=outcome.url,
                       healthy_after_s=None if outcome.healthy_after_s is None else round(outcome.healthy_after_s, 3),
                       message=message, hint=_follow(recipe, hosts) if outcome.detached else ""))
    sink.close()
    if fmt == "text" and not said:
        _summary(plan, outcome, total, follow=_follow(recipe, hosts))


def _follow(recipe: Path, hosts: Optional[Path]) -> str:
    """How to follow a deployment left booting, and how to remove it."""
    where = f" --hosts {hosts}" if hosts else ""
    return (f"follow it with: inkctl status {recipe}{where} / inkctl logs -f {recipe}{where}; "
            f"remove it with: inkctl down {recipe}{where}")


def _require_trusted(loaded) -> None:
    """Hotfix files and lock pins are checked locally before any host is touched."""
    from inkctl.plan import inputs

    check = getattr(inputs, "require_trusted", None)
    if check is not None:
        check(loaded)


def _live():
    from inkctl.cli.live import LiveDisplay

    return LiveDisplay()


def _on_signals(interrupt: threading.Event) -> dict:
    """Ctrl-C and SIGTERM set ``interrupt``; the runner stops at its next check and rolls back.

    The handler does not raise: an exception thrown at an arbitrary bytecode can leave a lock
    held (a ``with lock:`` half entered) and hang the rollback that follows. A second signal
    does raise, to abandon a rollback that hangs on a dead host.
    """
    def handler(signum, frame):
        if interrupt.is_set():
            raise KeyboardInterrupt
        interrupt.set()

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread (tests calling main() from a thread)
            pass
    return previous


def _up(loaded, plan, sink, secrets, *, accept_new: bool, keep: bool, timeout: float | None, skip: list[str],
        interrupt: threading.Event, detach: bool = False, on_healthy=None):
    from inkctl.execute.connect import close_all, connect_all
    from inkctl.execute.events import HostConnected, HostKeyAccepted, Info
    from inkctl.execute.runner import Outcome, Runner, launch

    def accepted(host, name, key_type, fp):
        from inkctl.execute.hostkeys import default_known_hosts

        sink.emit(HostKeyAccepted(host=host, name=name, key_type=key_type, fingerprint=fp, file=str(default_known_hosts())))

    _warm_imports()
    t = time.monotonic()
    transports = connect_all(list(loaded.hosts), accept_new=accept_new, on_accept=accepted,
                             on_host=lambda h, s, e: e is None and sink.emit(HostConnected(host=h, seconds=round(s, 3))))
    if interrupt.is_set():
        close_all(transports)
        raise KeyboardInterrupt
    n = len(transports)
    sink.emit(Info(text=f"connected to {n} host{'s' if n != 1 else ''} in {time.monotonic() - t:.2f} s"))
    lock = None
    try:
        # one round trip per host before anything starts: the deploy lock, the containers (the
        # deployment probe and the name check), the image (ensure_image and preflight) and
        # everything else preflight reads; the answers are judged here, in that order
        from inkctl.execute.deploylock import DeployLock
        from inkctl.execute.preflight import host_image, probe_hosts

        lock = DeployLock(plan, transports, "up")
        answers = probe_hosts(loaded.recipe, plan, transports, lock=lock)
        lock.taken({h: a.lock_answer() for h, a in answers.items()})  # another command at work explains everything else
        found = found_failed = image_failed = preflight_failed = None
        try:
            found = _existing(plan, answers)
        except InkctlError as e:
            found_failed = e  # an existing deployment explains a failed preflight best
        image = host_image(loaded.recipe, plan)
        try:
            report = _ensure_image(loaded, plan, transports, sink, answers, image)
            _refresh_image(report, answers, transports, plan, image)
        except InkctlError as e:
            image_failed = e
        if image_failed is None:
            try:
                _preflight(loaded.recipe, plan, transports, skip, sink, answers)
            except InkctlError as e:
                preflight_failed = e
        if found_failed is not None:
            raise found_failed
        if isinstance(found, Outcome):
            return found
        if image_failed is not None:
            raise image_failed
        replacing = found is not None
        if replacing:
            if interrupt.is_set():
                raise KeyboardInterrupt
            from inkctl.execute.replace import replace_old

            replace_old(found, transports, sink)  # the GPUs cannot hold both versions
            if preflight_failed is not None:  # most likely the old containers' ports and names
                preflight_failed = None
                _preflight(loaded.recipe, plan, transports, skip, sink)
        if preflight_failed is not None:
            raise preflight_failed
        if interrupt.is_set():
            raise KeyboardInterrupt
        interrupt.launching = True  # type: ignore[attr-defined]
        runner = Runner(plan, transports, sink, secrets=secrets, health_timeout_s=timeout, cancel=interrupt)
        try:
            with _watchdog(loaded.recipe, plan, transports, runner, sink):
                outcome = launch(runner, keep_on_failure=keep, detach=detach)
        except InkctlError as e:
            if replacing:
                e.message += f"\nthe previous version ({', '.join(found.old_hashes)}) had been removed before the launch"
                e.args = (e.message,)
            raise
        if outcome.detached or not (loaded.recipe.watchdog_on and loaded.recipe.watchdog.after_boot):
            return outcome
        lock.release()  # the deployment is up: down (or another up) may run while this one watches
        if on_healthy is not None:
            on_healthy(outcome)
        _watch_after_boot(loaded.recipe, plan, transports, sink, interrupt)
        outcome.watched = True  # type: ignore[attr-defined]
        return outcome
    finally:
        if lock is not None:
            lock.release()  # also after Ctrl-C: a lock must never outlive its command
        close_all(transports)


def _ensure_image(loaded, plan, transports, sink, answers, image: str):
    """Build the recipe's image where it is missing (patches.mode: build), or hold the hosts'
    images against the lock's pins. The deploy lock is already held; the probe's ``image
    inspect`` answers the first look at each host."""
    from inkctl.execute.build import ensure_image
    from inkctl.execute.transport import Result

    inspected = {}
    for h, a in answers.items():
        if a.sections is not None:
            out, err, rc = a.sections.get("image")
            inspected[h] = (image, Result(("image", "inspect", image), rc, out.encode(), err.encode(), 0.0))
    return ensure_image(loaded, plan, transports, sink, inspected=inspected)


def _refresh_image(report, answers, transports, plan, image: str) -> None:
    """Where the image was just built or delivered, the probe's image section predates it: read it again."""
    from concurrent.futures import ThreadPoolExecutor

    from inkctl.execute.probe import image_section

    stale = [h.host for h in report.hosts if h.action in ("built", "delivered") and answers[h.host].sections is not None]
    if not stale:
        return

    def one(host: str) -> None:
        res = transports[host].run((plan.host(host).runtime, "image", "inspect", image), timeout=60)
        s = answers[host].sections
        s.out["image"], s.err["image"], s.rc["image"] = image_section(res)

    with ThreadPoolExecutor(max_workers=len(stale), thread_name_prefix="image") as pool:
        list(pool.map(one, stale))


def _watch_after_boot(recipe, plan, transports, sink, interrupt: threading.Event) -> None:
    """``watchdog.after_boot``: stay attached, reading MemAvailable, until Ctrl-C (which detaches
    and leaves the deployment running). A trip kills the deployment's containers and fails."""
    from inkctl.execute.events import Info
    from inkctl.execute.watchdog import Watchdog

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
            if transports[h.name].run((h.runtime, "kill", *names), timeout=30).ok:
                killed += names
        except Exception:
            pass
    return killed


class _watchdog:
    """The boot memory watchdog during the launch, when the recipe wants it (unified memory).

    A trip kills that host's containers (the health wait then fails on them) and its reading
    series becomes the first line of the failure, since it is the cause."""

    def __init__(self, recipe, plan, transports, runner, sink):
        self.on = bool(getattr(recipe, "watchdog_on", False))
        self.args = (recipe, plan, transports, runner, sink)
        self.dog = None

    def __enter__(self):
        if not self.on:
            return self
        from inkctl.execute.events import Info
        from inkctl.execute.watchdog import Watchdog

        recipe, plan, transports, runner, sink = self.args

        def tripped(trip) -> None:
            runner.causes.append(trip.message)
            sink.emit(Info(text=trip.message, level="warning"))

        self.dog = Watchdog.for_recipe(recipe, plan, transports, on_trip=tripped).start()
        return self

    def __exit__(self, *exc) -> None:
        if self.dog is not None:
            self.dog.stop_event.set()  # its threads end at their next reading; nobody waits for them


def _warm_imports() -> None:
    """Import what the health wait needs while the connections wait on the network."""
    import threading

    def warm():
        try:
            import httpx  # noqa: F401  (imported for its side effect: warm)
        except ImportError:
            pass

    threading.Thread(target=warm, daemon=True, name="warm-imports").start()


def _preflight(recipe, plan, transports, skip: list[str], sink, answers=None) -> None:
    """The preflight hook: ``run_preflight`` raises InkctlError when a host is unfit.

    The agreed interface is only that name and that exception; a ``sink`` is passed when the
    function accepts one (so the check table shows in the live display and in JSON).
    """
    import inspect

    try:
        from inkctl.execute.preflight import run_preflight
    except ModuleNotFoundError as e:
        if e.name != "inkctl.execute.preflight":
            raise
        return
    kw = {"skip": set(skip)}
    if "sink" in inspect.signature(run_preflight).parameters:
        kw["sink"] = sink
    if answers is not None:
        kw["answers"] = answers
    run_preflight(recipe, plan, transports, **kw)


def _existing(plan, answers):
    """A second ``up`` must neither duplicate nor roll back the first one's containers.

    Returns an Outcome when the same deployment (same recipe hash) is already fully running and
    healthy; a Replacement when containers of another version (another recipe hash) are there;
    raises when the same version is there in another state; None when nothing is there.
    """
    from inkctl.execute.deployed import of_deployment, parse_ps, ps_failed
    from inkctl.execute.replace import Replacement
    from inkctl.execute.runner import Outcome

    items = []
    for h in plan.hosts:  # what the probe's ``ps --all`` listed, by the deployment's label
        a = answers[h.name]
        if a.error is not None:
            raise a.error
        out, err, rc = a.sections.get("containers")
        if rc != 0:
            raise ps_failed(h.name, h.runtime, rc, err)
        items += of_deployment(parse_ps(h.name, out), plan.deployment)
    if not items:
        return None
    if any(f.recipe_hash != plan.recipe_hash for f in items):
        return Replacement(plan, items)
    planned = {(c.host, c.name) for c in plan.containers}
    running_same = all(f.state == "running" and f.recipe_hash == plan.recipe_hash for f in items)
    have = {(f.host, f.name) for f in items}
    listing = "\n".join(f"  {f.host}: {f.name} ({f.state}{'' if f.recipe_hash == plan.recipe_hash else ', another recipe version'})"
                        for f in items)
    if running_same and have == planned:
        from inkctl.execute.health import check_once

        url = plan.health_url
        if url and check_once(url)[0]:
            o = Outcome(seconds=0.0, url=url.rsplit("/", 1)[0])
            o.already = True  # type: ignore[attr-defined]
            return o
        raise InkctlError(f"deployment {plan.deployment} is already running but {url} does not answer 200:\n{listing}\n"
                          "nothing was changed",
                          hint="see inkctl status / inkctl logs, or replace it: inkctl down RECIPE, then inkctl up RECIPE")
    raise InkctlError(f"deployment {plan.deployment} already has containers on its hosts:\n{listing}\nnothing was changed",
                      hint="remove them first: inkctl down RECIPE (with the same --hosts), then run up again")


def _summary(plan, outcome, total: float, follow: str = "") -> None:
    from inkctl.cli.render import console

    out = console()
    if getattr(outcome, "already", False):
        out.print(f"{plan.deployment} is already up at {outcome.url} (same recipe); nothing changed", markup=False)
        return
    if outcome.detached:
        out.print(f"detached: {plan.deployment} was left booting on {', '.join(h.name for h in plan.hosts)} "
                  f"(health: {outcome.url}); {follow}", markup=False)
        return
    healthy = f"healthy after {outcome.healthy_after_s:.1f} s, " if outcome.healthy_after_s is not None else ""
    out.print(f"{plan.deployment} is up: {outcome.url} ({healthy}{total:.1f} s in all)", markup=False)
    for c in plan.containers:
        out.print(f"  rank {c.rank} ({c.role}) {c.host}: {c.name}", markup=False)
    if outcome.smoke:
        ok = sum(1 for r in outcome.smoke if r.ok)
        ttfts = [r.ttft_s for r in outcome.smoke if r.ttft_s is not None]
        tps = [r.tokens_per_s for r in outcome.smoke if r.tokens_per_s]
        line = f"  smoke: {ok}/{len(outcome.smoke)} prompts answered"
        if ttfts:
            line += f", TTFT {min(ttfts):.2f}-{max(ttfts):.2f} s"
        if tps:
            line += f", {sum(tps) / len(tps):.1f} tok/s"
        out.print(line, markup=False)


# ---------------------------------------------------------------------------------- down

@app.command()
def down(
    recipe: Path = typer.Argument(..., help="Recipe file."),
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
) -> None:
    """Remove the deployment's containers (found by label) and its state directory on every host."""
    import json

    fmt = output_format(output)
    loaded, plan, _ = load_target(recipe, hosts, set_, "down")
    report = take_down(plan, loaded.hosts, accept_new=accept_new_host_keys)
    if fmt == "json":
        print(json.dumps({"deployment": plan.deployment, "ok": not report["failed"], **report}, indent=2))
    else:
        from inkctl.cli.render import console

        out = console()
        for h in plan.hosts:
            if h.name in report["removed"]:
                names = report["removed"][h.name]
                out.print(f"{h.name}: removed {', '.join(names)} and {h.state_dir}" if names
                          else f"{h.name}: nothing to remove (no container of {plan.deployment}; {h.state_dir} absent)", markup=False)
    if report["failed"]:
        lines = "\n".join(f"  {h}: {why}" for h, why in report["failed"].items())
        raise InkctlError(f"{plan.deployment}: could not clean {len(report['failed'])} host(s); what is there is unknown or left:\n{lines}",
                          hint="fix the host (or its network) and run inkctl down again; it only removes what is left")
    if fmt == "text":
        from inkctl.cli.render import console

        console().print(f"{plan.deployment} is down on {len(plan.hosts)} host{'s' if len(plan.hosts) != 1 else ''}", markup=False)


def take_down(plan, hosts, *, accept_new: bool = False) -> dict:
    """Probe and remove on every reachable host in parallel; report per host."""
    from concurrent.futures import ThreadPoolExecutor

    from inkctl.execute.connect import close_all, connect_each
    from inkctl.execute.deployed import probe_host
    from inkctl.execute.transport import HostError

    conn = connect_each(list(hosts), accept_new=accept_new)
    removed: dict[str, list[str]] = {}
    failed: dict[str, str] = {n: e.message.split(": ", 1)[-1] for n, e in conn.errors.items()}

    def one(h) -> None:
        tr = conn.transports[h.name]
        try:
            found = probe_host(h.name, tr, h.runtime, plan.deployment)
            names = [f.name for f in found]
            if names:
                argv = (h.runtime, "rm", "--force", *names)
                res = tr.run(argv, timeout=120)
                if not res.ok:
                    failed[h.name] = f"{h.runtime} rm failed with exit code {res.exit_code}: {res.err_text().strip()[-300:]}"
                    return
            res = tr.run(("rm", "-rf", "--", h.state_dir), timeout=60)
            if not res.ok:
                failed[h.name] = f"cannot remove {h.state_dir}: {res.err_text().strip()[-300:]}"
                return
            removed[h.name] = names
        except HostError as e:
            failed[h.name] = e.message.split(": ", 1)[-1]

    todo = [h for h in plan.hosts if h.name in conn.transports]
    lock = None
    try:
        if todo:
            from dataclasses import replace

            from inkctl.execute.deploylock import DeployLock

            lock = DeployLock(replace(plan, hosts=tuple(todo)), conn.transports, "down").acquire()
            with ThreadPoolExecutor(max_workers=min(64, len(todo)), thread_name_prefix="down") as pool:
                list(pool.map(one, todo))
    finally:
        if lock is not None:
            lock.release()
        close_all(conn.transports)
    order = [h.name for h in plan.hosts]
    return {"removed": {n: removed[n] for n in order if n in removed},
            "failed": {n: failed[n] for n in order if n in failed}}
