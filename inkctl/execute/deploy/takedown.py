"""Take a deployment down: what ``inkctl down`` does on every host it can reach.

Each host is asked what the deployment has there (by label), and exactly that is removed,
with the deployment's state directory; unreachable hosts are reported, not guessed at.
``remove_from_host`` is the one removal: it runs the steps ``plan.removal`` makes, for
``down``, for ``up`` replacing an old version, and for ``up`` rolling back (the plan's
teardown).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from inkctl.execute.hosts.transport import HostError, Transport
from inkctl.plan.removal import removal
from inkctl.plan.step import Run

REMOVE_TIMEOUT_S = 120.0
# A removal step is idempotent (``rm -f``, ``rm -rf``), and a container engine under load refuses
# now and then what it does a moment later ("did not receive an exit event", "removal already in
# progress", a channel sshd turns away): a step that fails while the connection stands is asked again.
ATTEMPTS = 3
RETRY_PAUSE_S = 1.0


class RemovalFailed(HostError):
    """The host answered, but a removal step failed (its exit code and stderr in ``reason``)."""


@dataclass
class TakeDown:
    """What ``down`` did: host -> the containers removed there; host -> why it could not."""

    removed: dict[str, list[str]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)  # stale locks taken over

    @property
    def ok(self) -> bool:
        return not self.failed


def remove_from_host(t: Transport, steps: list[Run] | tuple[Run, ...], *, timeout: float = REMOVE_TIMEOUT_S) -> None:
    """Run one host's removal steps (``plan.removal``) in order, each asked again (``ATTEMPTS``)
    when it fails while the host answers. Raises RemovalFailed when a step still fails (what was
    left is the rest), HostError when the host does not answer."""
    for s in steps:
        _remove_step(t, s, timeout)


def _gone(err: str) -> bool:
    """A removal's non-zero exit that says the thing was not there (what a rollback allows):
    asked again otherwise, since the engine may have refused a container that still runs."""
    return not err.strip() or "no such" in err.lower()


def _remove_step(t: Transport, s: Run, timeout: float) -> None:
    for attempt in range(1, ATTEMPTS + 1):
        last = attempt == ATTEMPTS
        try:
            res = t.run(s.argv, timeout=timeout)
        except HostError as e:
            if last or e.cause in ("timeout", "unreachable") or not t.alive():
                raise
            time.sleep(RETRY_PAUSE_S)
            continue
        if res.exit_code == 0 or (res.exit_code in s.ok_codes and (last or _gone(res.err_text()))):
            return
        if last:
            raise RemovalFailed(t.name, "command", f"{s.purpose} failed with exit code {res.exit_code}"
                                f"{f' ({ATTEMPTS} tries)' if ATTEMPTS > 1 else ''}: {res.err_text().strip()[-300:]}")
        time.sleep(RETRY_PAUSE_S)


def take_down(plan, hosts, *, accept_new: bool = False) -> TakeDown:
    """Probe and remove on every reachable host in parallel; report per host."""
    from dataclasses import replace

    from inkctl.execute.hosts.connect import close_all, connect_each
    from inkctl.execute.state.deployed import list_deployment
    from inkctl.execute.state.deploylock import DeployLock
    from inkctl.execute.hosts.fanout import on_hosts

    conn = connect_each(list(hosts), accept_new=accept_new)
    failed: dict[str, str] = {n: e.reason for n, e in conn.errors.items()}
    removed: dict[str, list[str]] = {}

    def one(name: str) -> list[str]:
        h, tr = plan.host(name), conn.transports[name]
        names = [f.name for f in list_deployment(name, tr, h.runtime, plan.deployment)]
        remove_from_host(tr, removal(name, h.runtime, names, h.state_dir))
        return names

    todo = [h for h in plan.hosts if h.name in conn.transports]
    lock = None
    try:
        if todo:
            lock = DeployLock(replace(plan, hosts=tuple(todo)), conn.transports, "down").acquire()
            res = on_hosts(one, [h.name for h in todo], name="down")
            removed = res.ok
            failed.update({n: e.reason for n, e in res.failed.items()})
    finally:
        if lock is not None:
            lock.release()
        close_all(conn.transports)
    order = [h.name for h in plan.hosts]
    return TakeDown(removed={n: removed[n] for n in order if n in removed},
                    failed={n: failed[n] for n in order if n in failed},
                    notices=list(lock.notices) if lock is not None else [])
