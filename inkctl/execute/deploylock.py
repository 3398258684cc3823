"""The deploy lock: one `up`, `down` or `build` per deployment at a time, on every host.

A lock is a directory ``<state_dir>/locks/<deployment>.lock`` made with ``mkdir`` (atomic on
POSIX filesystems) holding ``holder.json``: who (user@machine, pid), which command, since
when, and a random token. Only the token's owner releases it; ``inkctl lock release`` breaks
a stale one knowingly. Acquiring is all-or-nothing across hosts: if one host is held, the
locks taken on the others are released before the error is raised.
"""

from __future__ import annotations

import getpass
import json
import os
import posixpath
import secrets as _random
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from inkctl.errors import InkctlError
from inkctl.plan.step import Plan

# mkdir -p the parent, mkdir the lock (fails if held), then write the holder record.
_ACQUIRE = ('mkdir -p -- "$1" && { mkdir -- "$2" 2>/dev/null || exit 75; } && '
            'printf "%s" "$3" > "$2/holder.json" && printf "%s" "$4" > "$2/token"')
# only the token's owner removes the lock
_RELEASE = '[ "$(cat -- "$1/token" 2>/dev/null)" = "$2" ] && rm -rf -- "$1"'
HELD = 75


class LockHeld(InkctlError):
    pass


@dataclass(frozen=True)
class Holder:
    who: str
    pid: int
    command: str
    since: str

    def describe(self) -> str:
        return f"{self.who} (pid {self.pid}) running `{self.command}` since {self.since}"


def lock_dir(plan: Plan, host: str) -> str:
    deployment_dir = plan.host(host).state_dir  # <state_dir>/<deployment>
    return posixpath.join(posixpath.dirname(deployment_dir), "locks", f"{plan.deployment}.lock")


def _holder_from(text: str) -> Holder | None:
    try:
        d = json.loads(text)
        return Holder(who=d["who"], pid=int(d["pid"]), command=d["command"], since=d["since"])
    except (ValueError, KeyError, TypeError):
        return None


def _parallel(fn, hosts):
    with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        return dict(zip(hosts, pool.map(fn, hosts)))


class DeployLock:
    def __init__(self, plan: Plan, transports: dict, command: str):
        self.plan, self.transports, self.command = plan, transports, command
        self.token = _random.token_hex(16)
        self.held_on: list[str] = []

    def _record(self) -> str:
        return json.dumps({"who": f"{getpass.getuser()}@{socket.gethostname()}", "pid": os.getpid(),
                           "command": self.command, "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, sort_keys=True)

    def acquire(self) -> "DeployLock":
        record = self._record()
        hosts = [h.name for h in self.plan.hosts]

        def one(host: str):
            d = lock_dir(self.plan, host)
            res = self.transports[host].run(("sh", "-c", _ACQUIRE, "sh", posixpath.dirname(d), d, record, self.token),
                                          timeout=30)
            if res.ok:
                return None
            if res.exit_code == HELD:
                cur = self.transports[host].run(("cat", f"{d}/holder.json"), timeout=30)
                holder = _holder_from(cur.text())
                return holder.describe() if holder else f"an unreadable holder record ({d})"
            return f"cannot take the lock: {res.err_text().strip() or f'exit {res.exit_code}'}"

        results = _parallel(one, hosts)
        self.held_on = [h for h, why in results.items() if why is None]
        refused = {h: why for h, why in results.items() if why is not None}
        if refused:
            self.release()
            lines = "\n".join(f"  {h}: held by {why}" for h, why in refused.items())
            raise LockHeld(f"deployment {self.plan.deployment} is locked:\n{lines}",
                           hint="wait for that command to finish; if it is gone, `inkctl lock release RECIPE --hosts FILE`")
        return self

    def release(self) -> None:
        hosts, self.held_on = self.held_on, []

        def one(host: str):
            try:
                self.transports[host].run(("sh", "-c", _RELEASE, "sh", lock_dir(self.plan, host), self.token), timeout=30)
            except Exception:  # a lost host keeps its lock; `inkctl lock status` shows it
                pass

        if hosts:
            _parallel(one, hosts)

    def __enter__(self) -> "DeployLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def status(plan: Plan, transports: dict) -> dict[str, Holder | None]:
    def one(host: str):
        res = transports[host].run(("cat", f"{lock_dir(plan, host)}/holder.json"), timeout=30)
        return _holder_from(res.text()) if res.ok else None

    return _parallel(one, [h.name for h in plan.hosts])


def release(plan: Plan, transports: dict) -> dict[str, bool]:
    """Break the lock on every host, whoever holds it. Returns host -> whether one was there."""
    def one(host: str):
        d = lock_dir(plan, host)
        res = transports[host].run(("sh", "-c", 'test -d "$1" || exit 3; rm -rf -- "$1"', "sh", d), timeout=30)
        return res.ok

    return _parallel(one, [h.name for h in plan.hosts])
