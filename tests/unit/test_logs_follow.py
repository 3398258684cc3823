"""``logs -f`` stops on Ctrl-C within a second, however many ranks it follows.

The streams stand in for SSH channels that are slow to notice the stop (a busy host, a slow
network): each takes 3 s to give up. Before, stop() waited up to 5 s for each stream in turn.
"""

from __future__ import annotations

import threading
import time

from inkctl.execute.supervise.logs import Follow, LogLine, Source


class SlowToStop:
    """A transport whose stream sends a line, then notices the stop only after ``lag`` seconds."""

    def __init__(self, lag: float):
        self.lag = lag
        self.started = threading.Semaphore(0)

    def stream(self, argv, on_line, stop: threading.Event) -> int:
        on_line(f"{argv[-1]} attached")
        self.started.release()
        stop.wait()
        time.sleep(self.lag)
        return -1


def test_stop_returns_within_a_second_for_sixteen_ranks():
    t = SlowToStop(lag=3.0)
    srcs = [Source(f"h{i}", i, f"c{i}", "docker") for i in range(16)]
    f = Follow({s.host: t for s in srcs}, srcs).start()
    for _ in srcs:
        assert t.started.acquire(timeout=60)  # every stream attached (bounded only against a hang)
    lines = []
    while len(lines) < len(srcs):
        item = f.items.get(timeout=60)
        assert isinstance(item, LogLine)
        lines.append(item.line)
    assert sorted(lines) == sorted(f"c{i} attached" for i in range(16))
    t0 = time.monotonic()
    f.stop()
    took = time.monotonic() - t0
    # the spec is 1 s; 16 streams x 3 s of lag joined one after another would be 48 s (5 s each before)
    assert took < 2.0, f"stop() took {took:.2f} s"  # 0.8 s deadline; slack for a loaded machine


class Talking:
    """A transport whose stream sends a line every 10 ms until it is told to stop."""

    def __init__(self):
        self.stopped = threading.Event()

    def stream(self, argv, on_line, stop: threading.Event) -> int:
        n = 0
        while not stop.wait(0.01):
            on_line(f"{argv[-1]} line {n}")
            n += 1
        self.stopped.set()
        return -1


def test_the_cancel_token_ends_following_between_lines_and_stops_every_stream():
    """``logs -f`` ends on the command line's cancel token (set by the first Ctrl-C): the loop looks
    at it between lines, so no KeyboardInterrupt lands inside a print or a lock, and every stream
    is stopped before it returns."""
    from inkctl.api.observe.logs import LogsOptions, _follow

    t = Talking()
    srcs = [Source("h1", 0, "c0", "docker"), Source("h2", 1, "c1", "docker")]
    cancel, seen, notes = threading.Event(), [], []

    def line(ln):
        seen.append(ln.line)
        if len(seen) == 20:
            cancel.set()

    done = threading.Thread(target=_follow, args=({"h1": t, "h2": t}, srcs, LogsOptions(follow=True), line,
                                                    notes.append, cancel), daemon=True)
    done.start()
    done.join(timeout=30)  # bounded only against a hang
    assert not done.is_alive(), "following did not end on the cancel token"
    assert len(seen) >= 20 and notes == []
    assert t.stopped.is_set()  # the streams were told to stop, not left running


def test_following_a_slurm_jobs_output_ends_on_the_cancel_token(tmp_path, monkeypatch):
    """``logs --slurm -f`` reads the job's output file as it grows until the job ends, or until the
    command line's cancel token is set (Ctrl-C): Slurm's own client commands stand in on PATH."""
    import os
    from types import SimpleNamespace

    from inkctl.slurm import run as sr

    out = tmp_path / "job.out"
    out.write_text("0: first\n1: second\n")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "squeue").write_text("#!/bin/sh\necho 9\n")
    (bin_ / "scontrol").write_text(f"#!/bin/sh\necho 'JobId=9 JobName=inkctl-x JobState=RUNNING Reason=None "
                                   f"NodeList=(null) StdOut={out}'\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    stop, seen = threading.Event(), []
    t = threading.Thread(target=sr.follow_output, args=(SimpleNamespace(name="x"), seen.append),
                         kwargs=dict(follow=True, rank=None, tail=None, stop=stop), daemon=True)
    t.start()
    end = time.monotonic() + 30
    while len(seen) < 2 and time.monotonic() < end:
        time.sleep(0.05)
    with out.open("a") as f:
        f.write("1: third, while following\n")
    while len(seen) < 3 and time.monotonic() < end:
        time.sleep(0.05)
    assert seen == ["0: first", "1: second", "1: third, while following"]
    assert t.is_alive()  # the job runs on: still following
    stop.set()
    t.join(timeout=10)
    assert not t.is_alive(), "following the job's output did not end on the cancel token"
