"""Where a deployment runs, chosen here, not by the command line: one interface (``Backend``:
up, down, status, logs, watch) and the backends behind it, by name (``BACKENDS``):

- ``ssh``: the inventory's hosts, over SSH. One engine group (``api.up``, ``api.down``,
  ``api.status``, ``api.logs``, ``api.watching``), a recipe with ``fleet:`` or a gateway file
  (``api.fleet``, ``api.fleet_watch``): dispatched here, not handed in by the caller.
- ``slurm``: a job submitted from this login node (``api.slurm``); ``--slurm`` is the user's
  word for it (``Target.of(..., slurm=True)``).
- ``k8s``: Kubernetes, export only (``inkctl export k8s``): every command that would run it
  says so.

A Python caller names the target (``Target.of(recipe, hosts, sets, backend=...)``) and calls
``up``/``down``/``status``/``logs``/``watch`` here; each returns the backend's typed result
(the command line renders it by its type). All progress goes to one typed event stream
(``execute.events``: a ``Sink``); a cancel token (``threading.Event``) stops long work: the
command line sets it on Ctrl-C/SIGTERM (``cli/common/signals.py``); nothing here installs handlers.
A new backend is a class here with these five methods and a line in ``BACKENDS``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from inkctl.api.target import Target
from inkctl.errors import UsageError

if TYPE_CHECKING:
    from inkctl.api.observe.logs import LogsOptions
    from inkctl.api.observe.reach import OnAccept
    from inkctl.api.up import UpOptions
    from inkctl.api.watching import Watching
    from inkctl.execute.events import Sink

Display = Callable[[], "Sink"]


class LogView(Protocol):
    """Where ``logs`` puts what it reads: the ranks first (``ranks``), then each line (a
    ``LogLine``, or a Slurm job's labelled text line) and each note, masked."""

    def ranks(self, sources: list) -> None: ...

    def line(self, ln: Any) -> None: ...

    def note(self, text: str) -> None: ...


class Backend(Protocol):
    """What every backend does; its results are its own (the command line renders each type)."""

    name: str

    def up(self, target: Target, opts: UpOptions, display: Display, *, on_up: Callable[[Any], None] | None,
           watch_events: Sink | None, cancel: threading.Event) -> Any: ...

    def down(self, target: Target, *, accept_new: bool, events: Sink | None) -> Any: ...

    def status(self, target: Target, *, accept_new: bool, on_accept: OnAccept | None) -> Any: ...

    def logs(self, target: Target, opts: LogsOptions, view: LogView, *, on_accept: OnAccept | None,
             cancel: threading.Event | None = None) -> None: ...

    def watch(self, target: Target, how: Watching, events: Sink, *, cancel: threading.Event) -> None: ...


class SSH:
    """The inventory's hosts over SSH: one group, a fleet or a gateway file."""

    name = "ssh"

    def up(self, target: Target, opts: UpOptions, display: Display, *, on_up: Callable[[Any], None] | None = None,
           watch_events: Sink | None = None, cancel: threading.Event) -> Any:
        if opts.slurm is not None and opts.slurm.given():
            raise UsageError("--partition, --account, --time, --job-dir, --gpus-per-node, --container and "
                             "--pending-timeout go with --slurm")
        from inkctl.execute.hosts.warm import warm_imports

        warm_imports("paramiko")  # every kind connects; the recipe loads meanwhile
        what = _up_kind(target, opts)
        if what.kind != "group":
            from inkctl.api.fleet import fleet_of, load_gateway_fleet, up_fleet

            loaded, fleet = load_gateway_fleet(target, "up") if what.loaded is None else \
                (what.loaded, fleet_of(what.loaded))
            return up_fleet(loaded, fleet, display, target, opts, cancel=cancel)
        return _up_group(target, opts, display, on_up, watch_events, cancel)

    def down(self, target: Target, *, accept_new: bool = False, events: Sink | None = None) -> Any:
        from inkctl.api.target import kind_of

        what = kind_of(target, "down")
        if what.kind == "group":
            from inkctl.api.down import down

            return down(target, accept_new=accept_new)
        from inkctl.api.fleet import down_fleet

        return down_fleet(_fleet(target, what, "down")[1], accept_new=accept_new)

    def status(self, target: Target, *, accept_new: bool = False, on_accept: OnAccept | None = None) -> Any:
        from inkctl.api.target import kind_of

        what = kind_of(target, "status")
        if what.kind == "group":
            from inkctl.api.observe.status import status

            return status(target, accept_new=accept_new, on_accept=on_accept)
        from inkctl.api.fleet import fleet_status

        return fleet_status(*_fleet(target, what, "status"), accept_new)

    def logs(self, target: Target, opts: LogsOptions, view: LogView, *, on_accept: OnAccept | None = None,
             cancel: threading.Event | None = None) -> None:
        from inkctl.api.observe.logs import ranks, read_logs

        picked = ranks(target, opts)
        view.ranks(picked.sources)
        read_logs(picked, opts, view.line, view.note, on_accept=on_accept, cancel=cancel)

    def watch(self, target: Target, how: Watching, events: Sink, *, cancel: threading.Event) -> None:
        from inkctl.api.target import kind_of, plan_for
        from inkctl.api.watching import keep_watching, told

        what = kind_of(target, "watch")
        say = told(events)
        if what.kind == "group":
            assert what.loaded is not None
            plan, _ = plan_for(what.loaded, target)
            keep_watching(what.loaded, plan, target, how, say, cancel=cancel)
            return
        from inkctl.api.fleet_watch import watch_fleet

        loaded, fleet = _fleet(target, what, "watch")  # a gateway: each model's group on its own, and the gateway
        watch_fleet(loaded, fleet, how, say, target=target, cancel=cancel)


def _up_kind(target: Target, opts: UpOptions) -> Any:
    """What up brings up; a fleet or a gateway file refuses what only one group does."""
    from inkctl.recipe.reading.filekind import is_gateway_file

    if is_gateway_file(target.recipe):
        if opts.watch is not None or opts.detach or target.sets:
            raise UsageError("a gateway file: run up without --watch, --detach and --set")
        from inkctl.api.target import Kind

        return Kind("gateway", None)
    from inkctl.api.target import kind_of

    what = kind_of(target, "up")
    if what.kind == "fleet" and (opts.watch is not None or opts.detach):
        raise UsageError("a fleet: run up, then inkctl watch RECIPE (it supervises each replica on its own)")
    return what


def _fleet(target: Target, what: Any, command: str) -> tuple[Any, Any]:
    """(what was loaded, its FleetPlan) of a fleet recipe or a gateway file."""
    from inkctl.api.fleet import fleet_of, load_gateway_fleet

    return load_gateway_fleet(target, command) if what.loaded is None else (what.loaded, fleet_of(what.loaded))


def _up_group(target: Target, opts: UpOptions, display: Display, on_up: Callable[[Any], None] | None,
              watch_events: Sink | None, cancel: threading.Event) -> Any:
    """One group up; with ``opts.watch``, then supervised until a failure or ``cancel``."""
    from inkctl.api.up import up

    result = up(target, opts, display, on_up=on_up, cancel=cancel)
    if opts.watch is not None and not result.outcome.detached:
        from inkctl.api.target import load
        from inkctl.api.watching import keep_watching, told
        from inkctl.execute.events import Collect

        loaded = load(target, "up")
        keep_watching(loaded, result.plan, target, opts.watch, told(watch_events or Collect()), up_opts=opts,
                      cancel=cancel)
        result.watch_stopped = True
    return result


class Slurm:
    """A Slurm job from this login node (``--slurm``): its nodes come from the allocation."""

    name = "slurm"

    def up(self, target: Target, opts: UpOptions, display: Display, *, on_up: Callable[[Any], None] | None = None,
           watch_events: Sink | None = None, cancel: threading.Event) -> Any:
        from inkctl.api.slurm import SlurmRequest
        from inkctl.api.slurm import up as slurm_up

        if target.hosts or opts.watch is not None or opts.detach:
            raise UsageError("--slurm takes its nodes from the allocation: leave out --hosts, --watch and --detach")
        req = opts.slurm or SlurmRequest()
        slurm_target, slurm_opts = req.options(target, timeout=opts.timeout, keep=opts.keep, results_dir=opts.results_dir)
        return slurm_up(slurm_target, slurm_opts, display(), cancel=cancel)

    def down(self, target: Target, *, accept_new: bool = False, events: Sink | None = None) -> Any:
        from inkctl.api.slurm import down
        from inkctl.execute.events import Collect

        return down(_job(target), events or Collect())

    def status(self, target: Target, *, accept_new: bool = False, on_accept: OnAccept | None = None) -> Any:
        from inkctl.api.slurm import status

        return status(_job(target))

    def logs(self, target: Target, opts: LogsOptions, view: LogView, *, on_accept: OnAccept | None = None,
             cancel: threading.Event | None = None) -> None:
        from inkctl.api.slurm import logs

        logs(_job(target), view.line, follow=opts.follow, rank=opts.rank,
             tail=None if opts.tail in (None, "all") else int(opts.tail or 0), cancel=cancel)

    def watch(self, target: Target, how: Watching, events: Sink, *, cancel: threading.Event) -> None:
        from inkctl.api.slurm import watch

        watch(_job(target), how.interval, events, cancel=cancel)


def _job(target: Target) -> Target:
    """The target as a job's command reads it: the allocation's nodes, not an inventory."""
    return Target(target.recipe, None, target.sets, target.backend)


class Kubernetes:
    """Kubernetes: export only. The manifests are ``inkctl export k8s``'s; applying and following
    them is kubectl's (or a GitOps tool's)."""

    name = "k8s"

    def _refuse(self, target: Target, command: str) -> UsageError:
        return UsageError(f"{command} on Kubernetes: inkctl exports the manifests, it does not run them",
                          hint=f"inkctl export k8s {target.recipe} --out DIR, then kubectl apply -f DIR "
                               f"(and kubectl get/logs for what runs)")

    def up(self, target: Target, opts: UpOptions, display: Display, *, on_up: Callable[[Any], None] | None = None,
           watch_events: Sink | None = None, cancel: threading.Event) -> Any:
        raise self._refuse(target, "up")

    def down(self, target: Target, *, accept_new: bool = False, events: Sink | None = None) -> Any:
        raise self._refuse(target, "down")

    def status(self, target: Target, *, accept_new: bool = False, on_accept: OnAccept | None = None) -> Any:
        raise self._refuse(target, "status")

    def logs(self, target: Target, opts: LogsOptions, view: LogView, *, on_accept: OnAccept | None = None,
             cancel: threading.Event | None = None) -> None:
        raise self._refuse(target, "logs")

    def watch(self, target: Target, how: Watching, events: Sink, *, cancel: threading.Event) -> None:
        raise self._refuse(target, "watch")


BACKENDS: dict[str, Callable[[], Backend]] = {"ssh": SSH, "slurm": Slurm, "k8s": Kubernetes}


def pick(target: Target) -> Backend:
    """The backend the target names (``Target.backend``)."""
    try:
        return BACKENDS[target.backend]()
    except KeyError:
        raise UsageError(f"no backend {target.backend!r}: one of {', '.join(BACKENDS)}") from None


# ---- the commands, below the command line: the backend picked, then its method --------------

def up(target: Target, opts: UpOptions, display: Display, *, on_up: Callable[[Any], None] | None = None,
       watch_events: Sink | None = None, cancel: threading.Event | None = None) -> Any:
    """Bring it up where the target says: ``UpResult`` (one group), ``FleetUpResult`` (a fleet or
    a gateway file) or ``SlurmUpResult``. ``display()`` makes the event sink; with ``opts.watch``
    supervision follows, its events to ``watch_events``. Raises InkctlError (130: cancelled)."""
    return pick(target).up(target, opts, display, on_up=on_up, watch_events=watch_events,
                           cancel=cancel or threading.Event())


def down(target: Target, *, accept_new: bool = False, events: Sink | None = None) -> Any:
    """``DownResult``, ``FleetDownResult`` or ``SlurmDownResult``; each has ``failure()``
    (a Slurm job's: None), the error to end with."""
    return pick(target).down(target, accept_new=accept_new, events=events)


def status(target: Target, *, accept_new: bool = False, on_accept: OnAccept | None = None) -> Any:
    """``Status``, ``FleetStatus`` or ``SlurmStatus``; each has ``failure()``."""
    return pick(target).status(target, accept_new=accept_new, on_accept=on_accept)


def logs(target: Target, opts: LogsOptions, view: LogView, *, on_accept: OnAccept | None = None,
         cancel: threading.Event | None = None) -> None:
    """Every rank's log (or the job's output) to ``view``, masked; followed until ``cancel`` is set
    (or a KeyboardInterrupt) or every log has ended."""
    pick(target).logs(target, opts, view, on_accept=on_accept, cancel=cancel)


def watch(target: Target, how: Watching, events: Sink, *, cancel: threading.Event | None = None) -> None:
    """Supervise until ``cancel`` (returns) or a failure it does not restart from (raised)."""
    pick(target).watch(target, how, events, cancel=cancel or threading.Event())
