"""Nothing is swallowed without a trace: a log-line check that raises is logged and the rank's
log is still followed; a deploy lock that could not be given back is logged. The transports
here stand in for a host at the process boundary (an SSH session)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from inkctl.execute.hosts.transport import HostError, Result
from inkctl.execute.state.deploylock import DeployLock
from inkctl.execute.supervise.health import HealthWait
from inkctl.plan.deploy import build_plan
from inkctl.plan.step import WaitHealth
from inkctl.recipe.hosts import Host
from inkctl.recipe.reading.source import load_recipe

LINES = ["NCCL INFO Bootstrap", "a line the checker chokes on", "NCCL INFO Using network Socket", "last"]


class Logs:
    """A host whose container log has LINES."""

    name = "h1"

    def stream(self, argv, on_line, stop=None):
        for line in LINES:
            on_line(line)
        return 0


def test_a_failing_line_check_is_logged_and_the_log_still_followed(caplog):
    seen: list[str] = []

    def check(watched, line):
        if "chokes" in line:
            raise ValueError("a bug in the checker")
        seen.append(line)
        return None

    step = WaitHealth(host="h1", purpose="health", url="http://127.0.0.1:1/health", timeout_s=1,
                      watch=(("h1", "c0", 0),))
    wait = HealthWait(step, {"h1": Logs()}, "docker", emit=lambda e: None, cancel=threading.Event(),
                      on_line=check)
    with caplog.at_level(logging.DEBUG, logger="inkctl"):
        wait._follow(wait.watched[0])
    assert seen == [LINES[0], LINES[2], LINES[3]]  # the lines after the failure still arrive
    assert list(wait.watched[0].lines) == LINES
    (record,) = [r for r in caplog.records if "log-line check failed" in r.getMessage()]
    assert record.levelno == logging.ERROR and "rank 0 on h1" in record.getMessage()
    assert record.exc_info[0] is ValueError


class LostHost:
    name = "h1"

    def read(self, path):
        raise HostError("h1", "unreachable", "connection lost")

    def run(self, argv, timeout=None):
        raise HostError("h1", "unreachable", "connection lost")


class Refuses:
    """No file channel, and the release command finds another command's token there (it took
    the lock over): not an error."""

    name = "h1"

    def read(self, path):
        raise HostError("h1", "command", "no file channel")

    def run(self, argv, timeout=None):
        return Result(argv=tuple(argv), exit_code=1, stdout=b"", stderr=b"", seconds=0.0)


def _plan():
    loaded = load_recipe(Path(__file__).resolve().parents[2] / "examples" / "vllm-single-docker.yaml")
    return build_plan(loaded.recipe, [Host(name="h1", address="127.0.0.1", user="root")])


def test_a_lock_that_was_not_released_says_so(caplog):
    lock = DeployLock(_plan(), {"h1": LostHost()}, "inkctl up")
    lock.held_on = ["h1"]
    with caplog.at_level(logging.DEBUG, logger="inkctl"):
        lock.release()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "h1: the deploy lock" in warnings[0].getMessage()
    assert "was not released" in warnings[0].getMessage() and "connection lost" in warnings[0].getMessage()
    assert lock.held_on == []


def test_a_lock_no_longer_ours_is_not_a_warning(caplog):
    lock = DeployLock(_plan(), {"h1": Refuses()}, "inkctl up")
    lock.held_on = ["h1"]
    with caplog.at_level(logging.DEBUG, logger="inkctl"):
        lock.release()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
