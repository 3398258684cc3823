"""The deploy lock: one `up`, `down` or `build` per deployment at a time, on every host.

A lock is a directory ``<state_dir>/locks/<deployment>.lock`` made with ``mkdir`` (atomic on
POSIX filesystems) holding ``holder.json``: who (user@machine, pid), which command, since
when, and a random token. Only the token's owner releases it; ``inkctl lease release`` breaks
a stale one knowingly. Acquiring is all-or-nothing across hosts: if one host is held, the
locks taken on the others are released before the error is raised.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import posixpath
import secrets as _random
import socket
import time
from dataclasses import dataclass

from inkctl.execute.hosts.fanout import each
from inkctl.errors import InkctlError
from inkctl.plan.step import Plan

# mkdir -p the parent (where it is missing), mkdir the lock (fails if held), then write the holder record.
_ACQUIRE = ('{ [ -d "$1" ] || mkdir -p -- "$1"; } && { mkdir -- "$2" 2>/dev/null || exit 75; } && '
            'printf "%s" "$3" > "$2/holder.json" && printf "%s" "$4" > "$2/token"')
# The same acquisition as one section of a host's combined probe (``probe.HOST_PROBE``): the
# values arrive in $lock_parent, $lock_dir, $lock_record and $lock_token; it leaves its exit
# code in $lock_rc and prints the holder record when the lock is held (no second round trip).
PROBE_SECTION = ("take_lock() (\n" + _ACQUIRE + "\n)\n"
                 'take_lock "$lock_parent" "$lock_dir" "$lock_record" "$lock_token"; lock_rc=$?\n'
                 'if [ "$lock_rc" = 75 ]; then cat -- "$lock_dir/holder.json"; echo; fi')
# a stale lock is replaced only if its holder record is still the one judged stale ($3)
_TAKE_OVER = ('[ "$(cat -- "$2/holder.json" 2>/dev/null)" = "$5" ] || exit 75; rm -rf -- "$2" && ' + _ACQUIRE.replace('"$3"', '"$6"')
              .replace('"$4"', '"$7"'))
# only the token's owner removes the lock; a lock whose token is gone but whose holder record is
# this command's ($3) is its own too: a release cut off after removing the token (or an acquisition
# cut off before writing it) must not leave it held
_RELEASE = ('tok=$(cat -- "$1/token" 2>/dev/null); '
            'if [ "$tok" = "$2" ] || { [ -z "$tok" ] && [ "$(cat -- "$1/holder.json" 2>/dev/null)" = "$3" ]; }; '
            'then rm -rf -- "$1"; else exit 1; fi')
HELD = 75

log = logging.getLogger(__name__)


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


def this_machine() -> str:
    return f"{getpass.getuser()}@{socket.gethostname()}"


def pid_gone(pid: int) -> bool:
    """No inkctl runs under ``pid`` on this machine (a reused pid running something else counts as gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"inkctl" not in f.read()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def stale(holder: "Holder | None") -> bool:
    """The holder ran on this machine, as this user, and its process is gone."""
    return holder is not None and holder.who == this_machine() and holder.pid != os.getpid() and pid_gone(holder.pid)


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
    return dict(zip(hosts, each(fn, hosts, name="lock")))


class DeployLock:
    def __init__(self, plan: Plan, transports: dict, command: str):
        self.plan, self.transports, self.command = plan, transports, command
        self.token = _random.token_hex(16)
        self.held_on: list[str] = []
        self._record_text: str | None = None
        self.notices: list[str] = []  # stale locks taken over, for the command to print

    def _record(self) -> str:
        return json.dumps({"who": this_machine(), "pid": os.getpid(),
                           "command": self.command, "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, sort_keys=True)

    def record(self) -> str:
        """The holder record this command writes (the same on every host)."""
        if self._record_text is None:
            self._record_text = self._record()
        return self._record_text

    def probe_args(self, host: str) -> tuple[str, str, str, str]:
        """The values of ``PROBE_SECTION`` for ``host``: lock_parent, lock_dir, lock_record, lock_token."""
        d = lock_dir(self.plan, host)
        return posixpath.dirname(d), d, self.record(), self.token

    def _refusal(self, host: str, code: int, holder_text: str, err: str) -> str | None:
        """Why ``host`` did not give the lock (None: taken); ``holder_text`` is read only when held."""
        if code == 0:
            return None
        if code == HELD:
            holder = _holder_from(holder_text)
            if holder is not None and stale(holder) and self._take_over(host, holder_text):
                self.notices.append(f"{host}: took over a stale deploy lock: {holder.describe()} (that process is gone)")
                return None
            return holder.describe() if holder else f"an unreadable holder record ({lock_dir(self.plan, host)})"
        return f"cannot take the lock: {err.strip() or f'exit {code}'}"

    def _take_over(self, host: str, holder_text: str) -> bool:
        parent, d, record, token = self.probe_args(host)
        try:
            res = self.transports[host].run(("sh", "-c", _TAKE_OVER, "sh", parent, d, "", "", holder_text.strip(),
                                             record, token), timeout=30)
        except Exception:
            return False
        return res.exit_code == 0

    def acquire(self) -> "DeployLock":
        hosts = [h.name for h in self.plan.hosts]

        def one(host: str):
            res = self.transports[host].run(("sh", "-c", _ACQUIRE, "sh", *self.probe_args(host)), timeout=30)
            holder = ""
            if res.exit_code == HELD:
                holder = self.transports[host].run(("cat", f"{lock_dir(self.plan, host)}/holder.json"), timeout=30).text()
            return self._refusal(host, res.exit_code, holder, res.err_text())

        self._settle(_parallel(one, hosts))
        return self

    def taken(self, answers: dict[str, tuple[str, str, int] | BaseException]) -> "DeployLock":
        """Settle an acquisition made by ``PROBE_SECTION``: per host its (stdout, stderr, exit code),
        or the exception that cut the host off. All-or-nothing, as ``acquire``: the locks taken are
        given back when another host refused (LockHeld) or failed (that error is raised)."""
        failed = {h: a for h, a in answers.items() if isinstance(a, BaseException)}
        why = {h: self._refusal(h, a[2], a[0], a[1]) for h, a in answers.items() if not isinstance(a, BaseException)}
        if failed:
            self.held_on = [h for h, w in why.items() if w is None]
            self.release()
            raise next(iter(failed.values()))
        self._settle(why)
        return self

    def give_back(self, answers: dict) -> None:
        """``up`` stops before settling an acquisition made by the combined probe (a host did not
        connect, or Ctrl-C): release where the probes' answers say the lock was taken."""
        self.held_on = [h for h, a in answers.items() if a.error is None and a.sections.get("lock")[2] == 0]
        self.release()

    def _settle(self, results: dict[str, str | None]) -> None:
        self.held_on = [h for h, why in results.items() if why is None]
        refused = {h: why for h, why in results.items() if why is not None}
        if refused:
            self.release()
            lines = "\n".join(f"  {h}: held by {why}" for h, why in refused.items())
            raise LockHeld(f"deployment {self.plan.deployment} is locked:\n{lines}",
                           hint="wait for that command to finish; if it is gone, `inkctl lease release RECIPE --hosts FILE`")

    def release(self) -> None:
        """Give the lock back where this command holds it: through the file channel when the
        transport has one (no shell is started on the host), else with one command."""
        hosts, self.held_on = self.held_on, []

        def one(host: str):
            t, d = self.transports[host], lock_dir(self.plan, host)
            try:
                token = t.read(f"{d}/token")
                if token is not None and token.decode("utf-8", "replace") == self.token:
                    t.remove_dir(d)
                return
            except Exception as e:
                log.debug("%s: releasing the deploy lock %s by file failed (%s); trying a command", host, d, e)
            try:
                res = t.run(("sh", "-c", _RELEASE, "sh", d, self.token, self.record()), timeout=30)
            except Exception as e:  # a lost host keeps its lock; `inkctl lease status` shows it
                log.warning("%s: the deploy lock %s was not released: %s", host, d, e)
                return
            if res.exit_code != 0:  # not ours any more (taken over), or already gone
                log.debug("%s: the deploy lock %s was not this command's to release (exit %s)", host, d, res.exit_code)

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
