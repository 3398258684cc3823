"""The runner on scripted transports: order, barriers, failures, rollback, secrets, events.

A ScriptedHost answers each argv from a small rule table and records what it was asked, so
each test states what hosts did and asserts on what inkctl did in return.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time

import pytest

from inkctl.errors import EXIT_INTERRUPTED
from inkctl.execute.events import Collect
from inkctl.execute.events import (HealthProgress, RollbackFinished, RollbackStarted, Scrubber, ScrubbingSink,
                                   StageStarted, StepFailed)
from inkctl.execute.supervise.health import HealthTimeout
from inkctl.execute.deploy.runner import LaunchFailed, Runner, StepError, launch
from inkctl.execute.deploy.secrets import render_env_file
from inkctl.secret import resolve_secrets
from inkctl.execute.hosts.transport import HostError, Result
from inkctl.errors import InkctlError
from inkctl.plan.deploy import build_plan
from inkctl.plan.step import EnvFile, Plan, PlannedHost, Put, Run, SecretRef, Stage, WaitFor
from inkctl.recipe.hosts import Host
from inkctl.recipe.model import Recipe


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released): health waits there fail fast and
    never leave this machine."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        return s.getsockname()[1]


PORT = closed_port()


def recipe(**over) -> Recipe:
    doc = {
        "name": "t", "model": {"repo": "org/m"},
        "hardware": {"accelerator": "h200", "compute_capability": "9.0", "nodes": 2, "gpus_per_host": 1},
        "engine": {"kind": "vllm", "version": "v1", "image": {"ref": "img:1"}, "args": {"tensor_parallel": 2, "port": PORT}},
        "smoke": {"enabled": False},
    }
    doc.update(over)
    return Recipe.model_validate(doc)


HOSTS = [Host(name="a", address="127.0.0.2"), Host(name="b", address="127.0.0.3")]


class ScriptedHost:
    def __init__(self, name, rules=None, barrier=None, journal=None):
        self.name, self.rules, self.barrier = name, rules or [], barrier
        self.journal = journal if journal is not None else []  # ("start" | "end", host, argv), shared to see order
        self.calls: list[tuple] = []
        self.files: dict[str, tuple[bytes, int]] = {}
        self.lock = threading.Lock()

    def run(self, argv, *, timeout=None, stdin=None):
        with self.lock:
            self.calls.append(("run", tuple(argv), time.monotonic()))
            if argv[:2] == ("sh", "-c") and argv[3] == "inkctl-launch":  # a run step's files, as a tar on stdin
                self._unpack(argv[4], stdin)
        self.journal.append(("start", self.name, tuple(argv)))
        try:
            return self._answer(argv)
        finally:
            self.journal.append(("end", self.name, tuple(argv)))

    def _answer(self, argv):
        if self.barrier is not None:
            self.barrier.wait(timeout=10)  # all hosts must be inside run() at once
        for match, answer in self.rules:
            if match(tuple(argv)):
                if isinstance(answer, Exception):
                    if getattr(answer, "cause", None) == "unreachable":
                        self.gone = True  # its connection died: alive() says so from now on
                    raise answer
                code, out, err = answer(tuple(argv)) if callable(answer) else answer
                return Result(tuple(argv), code, out.encode(), err.encode(), 0.0)
        return Result(tuple(argv), 0, b"", b"", 0.0)

    def _unpack(self, base, data):
        import io
        import tarfile

        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                if m.isfile():
                    self.calls.append(("put", f"{base}/{m.name}", time.monotonic()))
                    self.files[f"{base}/{m.name}"] = (tar.extractfile(m).read(), m.mode)

    def put(self, path, content, mode):
        with self.lock:
            self.calls.append(("put", path, time.monotonic()))
            self.files[path] = (content, mode)

    def stream(self, argv, on_line, stop=None):
        """A log stream stays open (the container runs) unless ``ended`` names the container."""
        if argv[-1] in getattr(self, "ended", ()):
            on_line("RuntimeError: CUDA error (streamed)")
            return 0
        while stop is not None and not stop.wait(0.05):
            pass
        return -1

    gone = False

    def alive(self) -> bool:
        return not self.gone

    def close(self):
        pass

    def argvs(self):
        return [c[1] for c in self.calls if c[0] == "run"]


def is_run(argv):
    """A container start, also behind the launch's file writer (sh -c WRITE_THEN_RUN inkctl-launch DIR argv...)."""
    if len(argv) > 5 and argv[:2] == ("sh", "-c") and argv[3] == "inkctl-launch":
        argv = argv[5:]
    return len(argv) > 1 and argv[1] == "run"


def simple_plan(steps_a, steps_b=(), teardown=True) -> Plan:
    hosts = (PlannedHost("a", "127.0.0.1", 0, "docker", "/s/a"), PlannedHost("b", "127.0.0.2", 1, "docker", "/s/b"))
    stages = (Stage("one", "first", tuple(steps_a) + tuple(steps_b)),)
    td = (Run(host="a", rank=0, purpose="remove", argv=("docker", "rm", "--force", "c0"), ok_codes=(0, 1)),
          Run(host="b", rank=1, purpose="remove", argv=("docker", "rm", "--force", "c1"), ok_codes=(0, 1))) if teardown else ()
    return Plan(deployment="t", recipe_hash="h", hosts=hosts, stages=stages, containers=(), teardown=td)


def test_native_ranks_start_together_in_one_stage_each_writing_its_files_in_the_same_command():
    plan = build_plan(recipe(health={"timeout_s": 0.5, "interval_s": 0.1}), HOSTS)
    gate = threading.Barrier(2)  # both hosts must be inside their one launch command at once
    a, b = ScriptedHost("a", barrier=gate), ScriptedHost("b", barrier=gate)
    sink = Collect()
    with pytest.raises(HealthTimeout) as e:
        Runner(plan, {"a": a, "b": b}, sink).run()  # nothing serves health: the wait fails after the launches
    assert f"http://127.0.0.2:{PORT}/health" in e.value.message
    assert [e.name for e in sink.of(StageStarted)][:2] == ["launch", "health"]
    for h, t in (("a", a), ("b", b)):
        assert [c for c in t.calls if c[0] == "run" and is_run(c[1])] == [c for c in t.calls if c[0] == "run"]  # one command
        assert list(t.files) == [f"{plan.host(h).state_dir}/plan.json"]  # the record, written by that command
        record = json.loads(t.files[f"{plan.host(h).state_dir}/plan.json"][0])
        assert record["runs"][0]["argv"] == list(t.argvs()[0][5:])  # the record holds the argv that ran


def test_ray_keeps_its_order():
    plan = build_plan(recipe(engine={"kind": "vllm", "version": "v1", "image": {"ref": "img:1"}, "multinode": "ray",
                                     "args": {"tensor_parallel": 2}}), HOSTS)
    assert [st.name for st in plan.stages] == ["ray-head", "ray-head-ready", "ray-workers", "ray-cluster-ready", "serve", "health"]
    assert [s.host for s in plan.stages[0].steps] == ["a"] and [s.host for s in plan.stages[2].steps] == ["b"]


def test_parallel_within_a_stage():
    steps = [Run(host=h, rank=i, purpose="x", argv=("true",)) for i, h in enumerate("ab")]
    plan = simple_plan(steps)
    barrier = threading.Barrier(2)
    a, b = ScriptedHost("a", barrier=barrier), ScriptedHost("b", barrier=barrier)
    Runner(plan, {"a": a, "b": b}, Collect()).run()  # a serial runner breaks the barrier and fails
    assert not barrier.broken


def test_failed_step_names_host_rank_purpose_code_and_stderr_then_rolls_back_only_touched_hosts():
    plan = simple_plan([Run(host="a", rank=0, purpose="start the head", argv=("docker", "run", "img"))])
    a = ScriptedHost("a", [(is_run, (125, "", "line1\ndocker: Error response from daemon: boom\n"))])
    b = ScriptedHost("b")
    sink = Collect()
    with pytest.raises(LaunchFailed) as e:
        launch(Runner(plan, {"a": a, "b": b}, sink))
    msg = e.value.message
    assert "a (rank 0): start the head failed with exit code 125" in msg
    assert "| docker: Error response from daemon: boom" in msg
    assert "rolled back" in msg and "on a" in msg
    assert ("docker", "rm", "--force", "c0") in a.argvs()
    assert b.calls == []  # nothing started on b: nothing removed there
    assert sink.of(RollbackStarted)[0].hosts == ("a",)
    assert sink.of(StepFailed)[0].host == "a"


def test_keep_on_failure_leaves_things_and_says_so():
    plan = build_plan(recipe(), HOSTS)
    a = ScriptedHost("a")
    b = ScriptedHost("b", [(is_run, (1, "", "nope"))])
    with pytest.raises(LaunchFailed) as e:
        launch(Runner(plan, {"a": a, "b": b}, Collect()), keep_on_failure=True)
    assert "--keep-on-failure" in e.value.message and "a: inkctl-t-r0" in e.value.message
    assert "inkctl down" in e.value.hint
    assert not any(argv[1] == "rm" for argv in a.argvs())


def test_unreachable_host_is_named_and_the_others_are_rolled_back():
    plan = build_plan(recipe(), HOSTS)
    a = ScriptedHost("a")
    b = ScriptedHost("b", [(is_run, HostError("b", "unreachable", "connection lost during a command"))])
    with pytest.raises(LaunchFailed) as e:
        launch(Runner(plan, {"a": a, "b": b}, Collect()))
    msg = e.value.message
    assert "b: connection lost" in msg
    assert "could NOT remove" in msg and "b: inkctl-t-r1, /var/lib/inkctl/t and the deploy lock (host unreachable" in msg
    assert ("docker", "rm", "--force", "inkctl-t-r0") in a.argvs()
    assert e.value.left and e.value.left[0].startswith("b: inkctl-t-r1")  # the CLI says how to clean up
    assert e.value.lock_kept  # b was lost: its deploy lock could not be released


def test_a_host_whose_command_timed_out_but_answers_is_rolled_back_not_left():
    """A timed-out step counts its host lost, but a connection that still stands is asked to
    remove what this run started (a slow docker under load is not a dead host)."""
    plan = build_plan(recipe(), HOSTS)
    a = ScriptedHost("a")
    b = ScriptedHost("b", [(is_run, HostError("b", "timeout", "timed out after 120 s: docker run ..."))])
    with pytest.raises(LaunchFailed) as e:
        launch(Runner(plan, {"a": a, "b": b}, Collect()))
    assert "timed out after 120 s" in e.value.message
    assert "could NOT remove" not in e.value.message and "rolled back" in e.value.message
    assert ("docker", "rm", "--force", "inkctl-t-r1") in b.argvs()
    assert not e.value.left and not e.value.lock_kept


def test_interrupt_rolls_back_and_exits_130():
    plan = simple_plan([Run(host="a", rank=0, purpose="x", argv=("docker", "run", "i")),
                        WaitFor(host="b", rank=1, purpose="wait", argv=("false",), timeout_s=30)])
    a, b = ScriptedHost("a"), ScriptedHost("b", [(lambda v: v == ("false",), (1, "", ""))])
    runner = Runner(plan, {"a": a, "b": b}, Collect())
    threading.Timer(0.3, lambda: runner.cancel.set()).start()  # what the barrier does on Ctrl-C
    with pytest.raises(LaunchFailed) as e:
        launch(runner)
    assert e.value.exit_code == EXIT_INTERRUPTED and "interrupted" in e.value.message
    assert ("docker", "rm", "--force", "c0") in a.argvs()


def test_wait_for_counts_expect():
    n = {"i": 0}

    def answer(argv):
        n["i"] += 1
        return 0, " node_1\n" + (" node_2\n" if n["i"] >= 3 else ""), ""

    step = WaitFor(host="a", rank=0, purpose="wait for 2 nodes", argv=("ray", "status"), timeout_s=5, interval_s=0.01,
                   expect=" node_", expect_count=2)
    a = ScriptedHost("a", [(lambda v: v[0] == "ray", answer)])
    Runner(simple_plan([step]), {"a": a, "b": ScriptedHost("b")}, Collect()).run()
    assert n["i"] == 3


def test_wait_for_timeout_says_what_it_saw():
    step = WaitFor(host="a", rank=0, purpose="wait for 2 nodes", argv=("ray", "status"), timeout_s=0.2, interval_s=0.05,
                   expect=" node_", expect_count=2)
    a = ScriptedHost("a", [(lambda v: v[0] == "ray", (0, " node_1\n", ""))])
    with pytest.raises(StepError) as e:
        Runner(simple_plan([step]), {"a": a, "b": ScriptedHost("b")}, Collect()).run()
    assert "timed out after 0.2 s" in e.value.message and "1 of 2 times" in e.value.message


def test_env_file_gets_the_secret_and_nothing_else_does(monkeypatch):
    monkeypatch.setenv("HF_TOKEN_SRC", "hf_supersecret")
    secrets = resolve_secrets({"HF_TOKEN": type("S", (), {"env": "HF_TOKEN_SRC", "file": None, "describe": lambda s: "env"})()})
    put = Put(host="a", rank=0, purpose="env", path="/s/a/rank0.env", content=EnvFile((("HF_TOKEN", SecretRef("HF_TOKEN")), ("X", "1"))), mode=0o600)
    fail = Run(host="a", rank=0, purpose="start", argv=("docker", "run", "i"))
    a = ScriptedHost("a", [(is_run, (1, "", "token hf_supersecret rejected"))])
    collect = Collect()
    sink = ScrubbingSink(collect, Scrubber([s.reveal() for s in secrets.values()]))
    with pytest.raises(LaunchFailed) as e:
        launch(Runner(simple_plan([put, fail]), {"a": a, "b": ScriptedHost("b")}, sink, secrets=secrets))
    assert a.files["/s/a/rank0.env"] == (b"HF_TOKEN=hf_supersecret\nX=1\n", 0o600)
    assert all("hf_supersecret" not in repr(ev) for ev in collect.events)  # the scrubber's net
    assert "hf_supersecret" in e.value.message  # up scrubs errors too (see api/up.py) ...
    assert "hf_supersecret" not in Scrubber(["hf_supersecret"]).text(e.value.message)  # ... with this


def test_missing_secrets_are_all_named_with_where_they_were_looked_for(tmp_path, monkeypatch):
    from inkctl.recipe.container import SecretSource

    monkeypatch.delenv("NOPE_VAR", raising=False)
    with pytest.raises(InkctlError) as e:
        resolve_secrets({"A": SecretSource(env="NOPE_VAR"), "B": SecretSource(file=str(tmp_path / "missing"))})
    msg = e.value.message
    assert "2 secrets could not be resolved" in msg and "nothing was started" in msg
    assert "A: environment variable NOPE_VAR is not set" in msg and f"B: file {tmp_path / 'missing'} does not exist" in msg
    (tmp_path / "tok").write_text("abcdefgh\nsecond line ignored\n")
    assert resolve_secrets({"B": SecretSource(file=str(tmp_path / "tok"))})["B"].reveal() == "abcdefgh"
    assert render_env_file(EnvFile((("B", SecretRef("B")),)), resolve_secrets({"B": SecretSource(file=str(tmp_path / "tok"))})) == b"B=abcdefgh\n"


def test_a_secret_too_short_to_mask_is_refused_with_the_reason(tmp_path):
    from inkctl.recipe.container import SecretSource

    (tmp_path / "tok").write_text("x\n")
    with pytest.raises(InkctlError) as e:
        resolve_secrets({"B": SecretSource(file=str(tmp_path / "tok"))})
    msg = e.value.message
    assert "B: the value from" in msg and "has 1 character;" in msg
    assert "shorter than 8 characters would shred the output" in msg


def test_sha256_is_verified_before_upload():
    good = b"print('hi')\n"
    step = Put(host="a", rank=0, purpose="upload hotfix x.py", path="/s/a/hotfix/x.py", content=good,
               sha256=hashlib.sha256(b"other").hexdigest())
    a = ScriptedHost("a")
    with pytest.raises(StepError) as e:
        Runner(simple_plan([step]), {"a": a, "b": ScriptedHost("b")}, Collect()).run()
    assert "is pinned to sha256" in e.value.message and "nothing was uploaded" in e.value.message
    assert a.files == {}
    ok = Put(host="a", rank=0, purpose="u", path="/p", content=good, sha256=hashlib.sha256(good).hexdigest())
    Runner(simple_plan([ok]), {"a": a, "b": ScriptedHost("b")}, Collect()).run()
    assert a.files["/p"][0] == good


def test_health_fails_fast_on_an_exited_rank_with_its_code_and_logs(monkeypatch):
    """No HTTP server answers; rank 1's container has exited: the wait fails on the first inspect."""
    plan = build_plan(recipe(health={"timeout_s": 30, "interval_s": 0.2}), HOSTS)

    def inspect(argv):
        return 0, "".join(f"/{c}|{'exited' if c.endswith('r1') else 'running'}|{3 if c.endswith('r1') else 0}|0001-01-01T00:00:00Z\n" for c in argv[4:]), ""

    def logs(argv):
        return 0, "".join(f"line {i}\n" for i in range(80)) + "RuntimeError: CUDA error\n", ""

    rules = [(lambda v: v[1] == "inspect", inspect), (lambda v: v[1] == "logs", logs)]
    a, b = ScriptedHost("a", rules), ScriptedHost("b", rules)
    b.ended = ("inkctl-t-r1",)  # its log stream ends: the container exited
    sink = Collect()
    t0 = time.monotonic()
    with pytest.raises(LaunchFailed) as e:
        launch(Runner(plan, {"a": a, "b": b}, sink))
    took = time.monotonic() - t0
    assert took < 6, f"{took:.2f} s"  # on the first inspects (about 2 s here, loaded), not the 30 s timeout
    msg = e.value.message
    assert "rank 1 on b (container inkctl-t-r1) exited with code 3" in msg
    assert "RuntimeError: CUDA error" in msg and "line 31" in msg and "line 30\n" not in msg  # the last 50 lines
    assert "rolled back" in msg and set(sink.of(RollbackFinished)[0].removed) == {"a", "b"}
    assert sink.of(HealthProgress)[-1].ranks[1].phase == "exited"


def test_health_timeout_message(monkeypatch):
    plan = build_plan(recipe(health={"timeout_s": 0.6, "interval_s": 0.1}), HOSTS)
    ok = [(lambda v: v[1] == "inspect", lambda v: (0, "".join(f"/{c}|running|0|0001-01-01T00:00:00Z\n" for c in v[4:]), ""))]
    with pytest.raises(LaunchFailed) as e:
        launch(Runner(plan, {"a": ScriptedHost("a", ok), "b": ScriptedHost("b", ok)}, Collect()))
    assert f"timed out after 0.6 s waiting for http://127.0.0.2:{PORT}/health" in e.value.message


def test_scrubber_masks_nested_values():
    from inkctl.execute.events import RankState

    s = Scrubber(["tok123", "tok"])
    ev = HealthProgress(url="u", elapsed=1, timeout=2, ranks=(RankState("a", 0, "c", "loading", "key=tok123 tok"),))
    assert s(ev).ranks[0].last_line == "key=*** ***"
    assert s({"a": ["tok123"]}) == {"a": ["***"]}


def test_health_answered_early_starts_no_remote_process():
    """Healthy before FOLLOW_AFTER_S: no log stream, no inspect on any host (each is a remote
    process per rank); a rank that had died by then is still found (test above)."""
    import http.server

    from inkctl.execute.supervise.health import FOLLOW_AFTER_S, HealthWait
    from inkctl.plan.step import WaitHealth

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        class Counting(ScriptedHost):
            streams = 0

            def stream(self, argv, on_line, stop=None):
                Counting.streams += 1
                return super().stream(argv, on_line, stop)

        a = Counting("a", [(lambda v: "inspect" in v, (0, "/c0|running|0|0001-01-01T00:00:00Z\n", ""))])
        b = Counting("b", [(lambda v: "inspect" in v, (0, "/c1|running|0|0001-01-01T00:00:00Z\n", ""))])
        step = WaitHealth(host="a", purpose="wait", url=f"http://127.0.0.1:{srv.server_port}/health", timeout_s=10,
                          interval_s=0.05, watch=(("a", "c0", 0), ("b", "c1", 1)))
        secs = HealthWait(step, {"a": a, "b": b}, "docker", Collect().emit, threading.Event()).run()
        assert secs < FOLLOW_AFTER_S
        # no log stream; one inspect per host: healthy means every rank verified running
        assert Counting.streams == 0
        assert [v[:2] for v in a.argvs()] == [("docker", "inspect")] and [v[:2] for v in b.argvs()] == [("docker", "inspect")]
    finally:
        srv.shutdown()


def test_one_removal_for_rollback_down_and_replace(monkeypatch):
    """The rollback runs the plan's teardown, and down and a replacement run the steps
    plan.removal makes for what they find, all through takedown.remove_from_host: a host that
    cannot remove a container says the same thing whichever command asked."""
    from inkctl.execute.deploy import takedown
    from inkctl.execute.deploy.takedown import RemovalFailed, remove_from_host
    from inkctl.plan.removal import removal

    monkeypatch.setattr(takedown, "RETRY_PAUSE_S", 0.0)
    plan = build_plan(recipe(), HOSTS)
    assert plan.teardown == tuple(s for c, h in zip(plan.containers, plan.hosts)
                                  for s in removal(c.host, "docker", [c.name], h.state_dir, rank=c.rank, missing_ok=True))
    refuses = [(lambda a: a[:2] == ("docker", "rm"), (125, "", "Error: device or resource busy"))]
    a, b = ScriptedHost("a", refuses), ScriptedHost("b")
    runner = Runner(plan, {"a": a, "b": b}, Collect())
    runner.touched = {"a", "b"}
    cleaned, left = runner.rollback("test")
    assert cleaned == ["b"]
    assert left == ["a: remove the container failed with exit code 125 (3 tries): Error: device or resource busy"]
    assert [c[1] for c in b.calls] == [s.argv for s in plan.teardown if s.host == "b"]

    down = ScriptedHost("a", refuses)
    with pytest.raises(RemovalFailed) as info:
        remove_from_host(down, removal("a", "docker", ["t-0", "t-old"], "/srv/t"))
    assert info.value.message == "a: remove the containers failed with exit code 125 (3 tries): Error: device or resource busy"
    assert [c[1] for c in down.calls] == [("docker", "rm", "--force", "t-0", "t-old")] * 3


def test_a_removal_the_engine_refuses_once_is_asked_again(monkeypatch):
    """docker under load refuses now and then what it does a moment later ("did not receive an
    exit event", a channel sshd turns away): the step is asked again while the host answers; a
    host that does not answer is not asked three times."""
    from inkctl.execute.deploy import takedown
    from inkctl.execute.deploy.takedown import remove_from_host
    from inkctl.execute.hosts.transport import HostError
    from inkctl.plan.removal import removal

    monkeypatch.setattr(takedown, "RETRY_PAUSE_S", 0.0)
    answers = iter([(1, "", "Error response from daemon: cannot remove container: could not kill: "
                               "tried to kill container, but did not receive an exit event"), (0, "", "")])
    flaky = ScriptedHost("a", [(lambda a: a[:2] == ("docker", "rm"), lambda _a: next(answers))])
    remove_from_host(flaky, removal("a", "docker", ["t-0"], "/srv/t"))
    assert [c[1][:2] for c in flaky.calls] == [("docker", "rm"), ("docker", "rm"), ("rm", "-rf")]

    # a rollback allows exit 1 (the container may never have started), but only for "no such container"
    answers = iter([(1, "", "Error response from daemon: cannot remove container: could not kill"), (0, "", "")])
    rollback = ScriptedHost("a", [(lambda a: a[:2] == ("docker", "rm"), lambda _a: next(answers))])
    remove_from_host(rollback, removal("a", "docker", ["t-0"], "/srv/t", missing_ok=True))
    assert [c[1][:2] for c in rollback.calls] == [("docker", "rm"), ("docker", "rm"), ("rm", "-rf")]
    never = ScriptedHost("a", [(lambda a: a[:2] == ("docker", "rm"), (1, "", "Error response from daemon: No such container: t-0"))])
    remove_from_host(never, removal("a", "docker", ["t-0"], "/srv/t", missing_ok=True))
    assert [c[1][:2] for c in never.calls] == [("docker", "rm"), ("rm", "-rf")]

    refused = iter([HostError("a", "command", "the host refused to start a command: ChannelException")])

    def once(_a):
        for e in refused:
            raise e
        return 0, "", ""
    turned_away = ScriptedHost("a", [(lambda a: a[:2] == ("rm", "-rf"), once)])
    remove_from_host(turned_away, removal("a", "docker", [], "/srv/t"))
    assert [c[1][:2] for c in turned_away.calls] == [("rm", "-rf"), ("rm", "-rf")]

    gone = ScriptedHost("a", [(lambda a: True, HostError("a", "unreachable", "connection lost"))])
    with pytest.raises(HostError):
        remove_from_host(gone, removal("a", "docker", ["t-0"], "/srv/t"))
    assert len(gone.calls) == 1
