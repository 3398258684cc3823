"""``logs`` below the command line: the ranks asked for (``execute.supervise.logs.sources``),
their hosts connected (``api/observe/reach.py``), every rank's log read at once (a snapshot merged by
time) or followed until Ctrl-C. Every line and note is masked before the caller sees it:
engines echo their environment."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple, Optional

from inkctl.api.observe.reach import OnAccept, close, connect
from inkctl.api.target import Target, load_target
from inkctl.errors import InkctlError, UsageError

if TYPE_CHECKING:
    from inkctl.execute.hosts.transport import Transport
    from inkctl.execute.supervise.logs import LogLine, Source
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded


@dataclass(frozen=True)
class LogsOptions:
    follow: bool = False  # follow every rank until Ctrl-C
    tail: Optional[str] = None  # lines from the end of each rank's log: a number or "all"
    since: Optional[str] = None  # only lines since this time (10m, 2026-11-29T16:00:00)
    rank: Optional[int] = None  # only this rank
    host: Optional[str] = None  # only this host
    accept_new: bool = False  # trust new host keys


class Ranks(NamedTuple):
    """The deployment and the ranks whose logs are asked for."""

    loaded: Loaded
    plan: Plan
    sources: list[Source]


def ranks(target: Target, opts: LogsOptions) -> Ranks:
    """Load and plan; the ranks ``opts.rank`` and ``opts.host`` pick (none: a UsageError that
    names the ranks there are)."""
    from inkctl.execute.supervise.logs import sources

    loaded, plan, _ = load_target(target, "logs")
    srcs = sources(plan, rank=opts.rank, host=opts.host)
    if not srcs:
        rank, host = opts.rank, opts.host
        have = ", ".join(f"{c.host}/{c.rank}" for c in plan.containers)
        raise UsageError(f"no rank matches{f' --rank {rank}' if rank is not None else ''}{f' --host {host}' if host else ''}",
                         hint=f"this deployment has {have}")
    return Ranks(loaded, plan, srcs)


def read_logs(picked: Ranks, opts: LogsOptions, line: Callable[[LogLine], None], note: Callable[[str], None],
              on_accept: OnAccept | None = None, cancel: threading.Event | None = None) -> None:
    """Hand every line of the picked ranks' logs to ``line`` (a snapshot: in time order) and
    what went wrong (an unreachable host, a log that ended) to ``note``, both masked. Raises
    InkctlError after a snapshot some rank's log could not be read in."""
    from inkctl.execute.deploy.preflight import Unreachable
    from inkctl.scrub import active

    def masked(ln: LogLine) -> None:
        line(replace(ln, line=active().text(ln.line)))

    def said(text: str) -> None:
        note(active().text(text))

    wanted = {s.host for s in picked.sources}
    assert picked.loaded.hosts is not None  # load_target needs hosts
    transports = connect([h for h in picked.loaded.hosts if h.name in wanted], opts.accept_new, on_accept)
    try:
        unreachable = {name: t.error for name, t in transports.items() if isinstance(t, Unreachable)}
        for name, error in unreachable.items():
            said(f"{name}: {error.reason}")
        if opts.follow:
            _follow(transports, picked.sources, opts, masked, said, cancel)
            return
        failed = _snapshot(transports, picked.sources, opts, list(unreachable), masked, said) or bool(unreachable)
    finally:
        close(transports)
    if failed:
        raise InkctlError("some ranks' logs could not be read (see above)")


def _snapshot(transports: dict[str, Transport], srcs: list[Source], opts: LogsOptions, unreachable: list[str],
              line: Callable[[LogLine], None], note: Callable[[str], None]) -> bool:
    """True when some rank's log could not be read (an unreachable host is noted once, above)."""
    from inkctl.execute.supervise.logs import snapshot

    lines, errors = snapshot(transports, srcs, tail=opts.tail, since=opts.since)
    for ln in lines:
        line(ln)
    for e in errors:
        if not any(e.startswith(f"{n}/") for n in unreachable):
            note(e)
    return bool(errors)


def _follow(transports: dict[str, Transport], srcs: list[Source], opts: LogsOptions,
            line: Callable[[LogLine], None], note: Callable[[str], None], cancel: threading.Event | None) -> None:
    """Until ``cancel`` or Ctrl-C (or every log ended): each line as it comes, each log's end as a note."""
    from inkctl.execute.supervise.logs import Follow, LogLine

    f = Follow(transports, srcs, tail=opts.tail, since=opts.since).start()
    try:
        for item in f.until(cancel):
            if isinstance(item, LogLine):
                line(item)
            elif item.error:
                note(f"{item.source.prefix}: log ended: {item.error}")
            else:
                note(f"{item.source.prefix}: log ended (exit {item.exit_code})")
    except KeyboardInterrupt:  # a caller without a cancel token: stopped all the same
        return
    finally:
        f.stop()
