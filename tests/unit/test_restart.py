"""The one restart loop (``api.watching.restart``) that ``watch --restart`` runs for a deployment
and for each of a fleet's groups: a failed down is reported and nothing is started over what it
left; an up that cannot succeed says why (its message and hint, not its last line); the hour's
budget ends it, naming the last failure; the cancel token stops it during the backoff.
The cycle (down, then up) is the caller's; on the test cluster it is the real one
(tests/e2e/test_backend.py)."""

from __future__ import annotations

import threading

import pytest

from inkctl.api.watching import DownFailed, Voice, Watching, restart
from inkctl.errors import EXIT_INVALID, InkctlError
from inkctl.execute.events import Collect, Supervision
from inkctl.execute.supervise.watch import RestartBudget


def _run(cycle, *, per_hour: int = 3, stop: threading.Event | None = None, named: bool = False):
    sink = Collect()
    how = Watching(restart=True, max_restarts_per_hour=per_hour, backoff=0)
    try:
        return restart("dep", how, RestartBudget(per_hour=per_hour, first_s=0), Voice(sink), cycle,
                       stop or threading.Event(), named=named), sink.of(Supervision)
    except InkctlError as e:
        return e, sink.of(Supervision)


def test_a_failed_down_is_reported_and_nothing_is_started_over_it():
    calls: list[str] = []

    def cycle() -> None:
        calls.append("down")
        raise DownFailed("dep: could not clean 1 host(s); what is there is unknown or left:\n  h1: unreachable",
                         hint="fix the host (or its network) and run inkctl down again")

    err, said = _run(cycle, per_hour=1)
    assert calls == ["down"]  # once: the budget of one restart an hour is spent by it
    assert [(e.kind, e.message) for e in said] == [
        ("restart", "restarting dep in 0 s: down, then up"),
        ("restart_failed", "down failed: dep: could not clean 1 host(s); what is there is unknown or left: "
                           "h1: unreachable (hint: fix the host (or its network) and run inkctl down again); "
                           "not starting it again over what is left"),
        ("restart_refused", "1 restarts within the last hour: giving up")]
    assert isinstance(err, InkctlError) and err.message.startswith("dep: 1 restarts within an hour; not restarting again "
                                                                   "(the last: down failed: dep: could not clean")


def test_an_up_that_cannot_succeed_says_its_message_and_hint_not_its_last_line():
    def cycle() -> None:
        raise InkctlError("1 secret could not be resolved on this machine (nothing was started):\n"
                          "  HF_TOKEN: environment variable HF_TOKEN is not set (or empty) on this machine",
                          hint="export the variable, then run again", exit_code=EXIT_INVALID)

    err, said = _run(cycle, named=True)
    assert isinstance(err, InkctlError) and err.exit_code == EXIT_INVALID
    assert err.message.startswith("dep: up refused to start: 1 secret could not be resolved")
    assert "environment variable HF_TOKEN is not set" in err.message and "(hint: export the variable" in err.message
    assert said[-1].kind == "restart_failed" and said[-1].message.startswith("dep: up failed (exit 2): 1 secret")


def test_an_up_that_fails_is_tried_again_until_it_comes_back():
    tries: list[int] = []

    def cycle() -> None:
        tries.append(1)
        if len(tries) < 2:
            raise InkctlError("the health wait timed out", exit_code=1)

    ok, said = _run(cycle)
    assert ok is True and len(tries) == 2
    assert [e.kind for e in said] == ["restart", "restart_failed", "restart", "restarted"]


def test_the_cancel_token_stops_it_during_the_backoff():
    stop = threading.Event()
    stop.set()
    ok, said = _run(lambda: pytest.fail("cycled after the stop"), stop=stop)
    assert ok is False and said == []


def test_a_restart_takes_the_options_of_the_deployments_latest_up_from_the_run_records(tmp_path, monkeypatch):
    from pathlib import Path

    from inkctl import runlog
    from inkctl.api.up import UpOptions, note_options
    from inkctl.api.watching import up_options_of

    monkeypatch.setenv("INKCTL_RUNS_DIR", str(tmp_path / "runs"))
    for deployment, opts in (("d", UpOptions(timeout=77.0, skip=("memory",), keep=True, results_dir=Path("r"))),
                             ("other", UpOptions(timeout=5.0))):
        runlog.start("up", ["up", f"{deployment}.yaml"])
        runlog.note(deployment=deployment)
        note_options(opts)
        runlog.finish(0)
    how = Watching(restart=True, allow_socket_fallback=True)
    got = up_options_of("d", how)
    assert (got.timeout, got.skip, got.keep, got.results_dir) == (77.0, ("memory",), True, Path("r"))
    assert got.allow_socket_fallback and got.watch == how  # the watch's own word added; up returns once healthy
    none = up_options_of("never-up", Watching())
    assert (none.timeout, none.skip, none.keep) == (None, (), False)
