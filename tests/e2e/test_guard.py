"""Guarding the boot and the fleet, for real: the memory watchdog, the deploy lock, replacing a
changed deployment, Ctrl-C, building before launching, and faults (a host lost mid-launch, a
full disk during a build). Every assertion is about what is (or is not) on the hosts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster.proc import wait_for
from tests.e2e.conftest import containers, finish, no_traceback, unfold

pytestmark = pytest.mark.cluster
PORT = 18000


@pytest.fixture(autouse=True)
def _no_stale_locks(cluster):
    """A test that failed half-way (or killed its inkctl) must not leave the next one locked out."""
    yield
    import shutil

    for h in cluster.hosts:
        for d in (Path(h.state_dir) / "locks").glob("e2e-*.lock"):
            shutil.rmtree(d, ignore_errors=True)


def lock_dir(cluster, host: str, deployment: str) -> Path:
    return Path(cluster.host(host).state_dir) / "locks" / f"{deployment}.lock"


def state_dir(cluster, host: str, deployment: str) -> Path:
    return Path(cluster.host(host).state_dir) / deployment


def no_lock_anywhere(cluster, deployment: str, hosts=("h1", "h2")) -> None:
    for h in hosts:
        assert not lock_dir(cluster, h, deployment).exists(), f"{h}: the deploy lock outlived the command"


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def running(cluster, p: subprocess.Popen, host: str, deployment: str, rank: int) -> bool:
    if p.poll() is not None:
        raise AssertionError(f"inkctl ended early: rc={p.returncode}\n{p.stdout.read()}\n{p.stderr.read()}")
    return containers(cluster, host, deployment) == [f"inkctl-{deployment}-r{rank} running"]


# ------------------------------------------------------------------------- the boot watchdog

def test_watchdog_kills_a_boot_below_the_floor_and_rolls_back(cluster, inkctl, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-dog", container={"env": {"FAKE_READY_AFTER": "30"}},
                 watchdog={"enabled": True, "mem_available_min_gib": 100000, "consecutive": 2, "interval_s": 0.5})
    r = inkctl("up", rec, "--hosts", inventory("h1", "h2"), env={"PYTHONFAULTHANDLER": "1"})
    assert r.rc == 1, (r, r.stderr)
    assert r.seconds < 20, (r, r.stderr)  # well before the 60 s health timeout (and the 30 s boot)
    m = re.search(r"watchdog: MemAvailable ([\d.]+) GiB < 100000 GiB for 2 reads on (h[12]) \(rank ([01])\)", r.stderr)
    assert m, r.stderr
    assert int(m.group(3)) == int(m.group(2)[1]) - 1  # h1 holds rank 0, h2 rank 1
    series = re.search(r"MemAvailable readings \(GiB\): ([\d. >-]+)", r.stderr)
    assert series and len(series.group(1).split("->")) >= 2, r
    assert "rolled back" in r.stderr and no_traceback(r.out), r
    for h in ("h1", "h2"):
        assert containers(cluster, h, "e2e-dog") == []
        assert not state_dir(cluster, h, "e2e-dog").exists()
    no_lock_anywhere(cluster, "e2e-dog")


@pytest.fixture
def follow(inkctl):
    """follow(*args) starts inkctl and reads its output as it comes; killed if the test ends first."""
    started = []

    def start(*args, env=None):
        f = Follow(inkctl.start(*args, env={"PYTHONFAULTHANDLER": "1", **(env or {})}))
        started.append(f)
        return f

    yield start
    for f in started:
        if f.p.poll() is None:
            f.p.kill()
            f.p.wait(timeout=10)


class Follow:
    """A started inkctl whose output is read as it comes (to wait for a line, then signal it)."""

    def __init__(self, p: subprocess.Popen):
        import threading

        self.p, self.out, self.err = p, [], []
        self.readers = [threading.Thread(target=lambda s=stream, i=into: i.extend(iter(s.readline, "")), daemon=True)
                        for stream, into in ((p.stdout, self.out), (p.stderr, self.err))]
        for t in self.readers:
            t.start()

    def drained(self) -> None:
        """The process has ended: wait until its readers have read all it wrote (EOF on both pipes)."""
        for t in self.readers:
            t.join(timeout=10)

    @property
    def text(self) -> str:
        return "".join(self.out) + "".join(self.err)

    def saw(self, needle: str) -> bool:
        if needle in self.text:
            return True
        if self.p.poll() is not None:
            self.drained()
            if needle in self.text:
                return True
            raise AssertionError(f"inkctl ended (rc={self.p.returncode}) without printing {needle!r}:\n{self.text}")
        return False

    def end(self, timeout: float = 60) -> int:
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER (inkctl.start sets it): every thread's stack
            self.p.wait(timeout=10)
            self.drained()
            raise AssertionError(f"inkctl did not end:\n{''.join(self.out)[-4000:]}\n--- stderr\n{''.join(self.err)[-16000:]}")
        finally:
            if self.p.poll() is None:
                self.p.kill()
        self.drained()
        return self.p.returncode


def real(name: str) -> str:
    """The command a stand-in hides (found on the hosts' standard PATH)."""
    import shutil

    from tests.cluster.host import STD_PATH

    return shutil.which(name, path=STD_PATH)


@pytest.fixture
def stand_in(cluster):
    """stand_in("h1", "cat", script): a command of that name first on the host's session PATH
    (a fault or a probe for one test); removed when the test ends."""
    made = []

    def put(host: str, name: str, script: str) -> Path:
        p = Path(cluster.host(host).bin_dir) / name
        assert not p.exists(), f"{p} exists: not a stand-in of this test"
        p.write_text(script)
        p.chmod(0o755)
        made.append(p)
        return p

    put.real = real
    yield put
    for p in made:
        p.unlink(missing_ok=True)


def meminfo_gib(gib: float) -> str:
    kb = int(gib * 1024 * 1024)
    return f"MemTotal:       {128 * 1024 * 1024} kB\nMemFree:        {kb} kB\nMemAvailable:   {kb} kB\n"


@pytest.fixture
def meminfo(stand_in, tmp_path):
    """/proc/meminfo on h1 as inkctl's `cat /proc/meminfo` sees it: every read is logged (a
    timestamp in ``reads``), ``slow(s)`` delays each read, ``fake(gib)`` answers MemAvailable=gib."""
    d = tmp_path / "meminfo"
    d.mkdir()
    stand_in("h1", "cat", f"""#!/bin/sh
if [ "$1" = /proc/meminfo ]; then
  date +%s.%N >> {d}/reads
  if [ -f {d}/slow ]; then sleep "$(/bin/cat {d}/slow)"; fi
  if [ -f {d}/fake ]; then exec /bin/cat {d}/fake; fi
fi
exec {real("cat")} "$@"
""")

    class M:
        reads = d / "reads"

        @staticmethod
        def slow(seconds: float) -> None:
            (d / "slow").write_text(str(seconds))

        @staticmethod
        def fake(gib: float) -> None:
            (d / "fake.tmp").write_text(meminfo_gib(gib))
            (d / "fake.tmp").rename(d / "fake")

        @staticmethod
        def read_times() -> list[float]:
            return [float(x) for x in M.reads.read_text().split()] if M.reads.exists() else []

    return M


def test_watchdog_readings_never_block_the_health_display(cluster, inkctl, inventory, recipe, meminfo):
    meminfo.slow(3)  # each reading takes 3 s; the display must still move every ~second
    rec = recipe("single", name="e2e-dogslow", container={"env": {"FAKE_READY_AFTER": "7", "FAKE_LOG_EVERY": "0.5"}},
                 watchdog={"enabled": True, "mem_available_min_gib": 0.001, "consecutive": 2, "interval_s": 0.5})
    r = inkctl("up", rec, "--hosts", inventory("h1"), "--output", "json")
    assert r.rc == 0, r
    ev = events(r.stdout)
    progress = [e["ts"] for e in ev if e["event"] == "health_progress"]
    assert len(progress) >= 5, r
    gaps = [b - a for a, b in zip(progress, progress[1:])]
    assert max(gaps) < 2.5, gaps  # a reading (3 s) never held the display
    during = [t for t in meminfo.read_times() if progress[0] <= t <= progress[-1]]
    assert len(during) >= 2, (during, progress)  # and readings did happen meanwhile
    assert inkctl("down", rec, "--hosts", inventory("h1")).rc == 0


def test_watchdog_after_boot_detaches_on_ctrl_c_and_kills_on_a_trip(cluster, inkctl, follow, inventory, recipe, meminfo):
    meminfo.fake(100)
    rec = recipe("single", name="e2e-after", smoke={"enabled": False},
                 watchdog={"enabled": True, "after_boot": True, "mem_available_min_gib": 8, "consecutive": 2,
                           "interval_s": 0.5})
    inv = inventory("h1")
    f = follow("up", rec, "--hosts", inv)
    wait_for("a watchdog reading", lambda: f.saw("watchdog: MemAvailable h1 100.0 GiB"), timeout=60)
    assert "e2e-after is up: http://" in "".join(f.out) and "Ctrl-C detaches" in f.text, f.text
    assert not lock_dir(cluster, "h1", "e2e-after").exists()  # released while it watches
    f.p.send_signal(signal.SIGINT)
    assert f.end() == 0, f.text
    assert "detached: e2e-after keeps running" in f.text
    assert containers(cluster, "h1", "e2e-after") == ["inkctl-e2e-after-r0 running"]  # left running
    assert inkctl("down", rec, "--hosts", inv).rc == 0

    f = follow("up", rec, "--hosts", inv)
    wait_for("a watchdog reading", lambda: f.saw("watchdog: MemAvailable h1 100.0 GiB"), timeout=60)
    meminfo.fake(4)  # the load transient of "Inkling on Two DGX Sparks", after boot
    assert f.end(timeout=30) == 1, f.text
    assert "after boot: watchdog: MemAvailable 4.0 GiB < 8 GiB for 2 reads on h1 (rank 0); killed inkctl-e2e-after-r0" in f.text
    assert re.search(r"readings \(GiB\): 100\.0 -> .*4\.0 -> 4\.0", f.text), f.text
    assert "Traceback" not in f.text
    assert containers(cluster, "h1", "e2e-after") == ["inkctl-e2e-after-r0 exited"]  # killed, kept for its logs
    assert not lock_dir(cluster, "h1", "e2e-after").exists()


# ------------------------------------------------------------------------------- the lock

def test_a_second_up_is_refused_naming_the_holder(cluster, inkctl, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-locked", container={"env": {"FAKE_READY_AFTER": "60"}})
    inv = inventory("h1", "h2")
    p = inkctl.start("up", rec, "--hosts", inv, env={"PYTHONFAULTHANDLER": "1"})
    try:
        wait_for("rank 1 of e2e-locked to run", lambda: running(cluster, p, "h2", "e2e-locked", 1), timeout=60)
        for h in ("h1", "h2"):
            assert json.loads((lock_dir(cluster, h, "e2e-locked") / "holder.json").read_text())["pid"] == p.pid
        second = inkctl("up", rec, "--hosts", inv)
        assert second.rc == 1, second
        assert "deployment e2e-locked is locked" in second.stderr, second
        assert re.search(rf"h1: held by \S+@\S+ \(pid {p.pid}\) running `up` since \d{{4}}-\d\d-\d\dT", second.stderr), second
        assert "h2: held by" in second.stderr and "inkctl lease release" in second.out
        st = inkctl("lease", "status", rec, "--hosts", inv)
        assert st.rc == 0 and st.stdout.count(f"(pid {p.pid}) running `up`") == 2, st
        # the first up was not disturbed
        assert containers(cluster, "h1", "e2e-locked") == ["inkctl-e2e-locked-r0 running"]
        p.send_signal(signal.SIGTERM)
        _, err = finish(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and "rolled back" in err, err
    no_lock_anywhere(cluster, "e2e-locked")
    assert containers(cluster, "h1", "e2e-locked") == [] and containers(cluster, "h2", "e2e-locked") == []


def test_a_stale_lock_is_shown_and_released(cluster, inkctl, inventory, recipe):
    rec = recipe("vllm-native-2", name="e2e-stale", container={"env": {"FAKE_READY_AFTER": "60"}})
    inv = inventory("h1", "h2")
    p = inkctl.start("up", rec, "--hosts", inv)
    wait_for("rank 1 of e2e-stale to run", lambda: running(cluster, p, "h2", "e2e-stale", 1), timeout=60)
    p.kill()  # SIGKILL: no rollback, no release: the lock is stale
    p.communicate(timeout=10)
    st = inkctl("lease", "status", rec, "--hosts", inv)
    assert st.rc == 0, st
    for h in ("h1", "h2"):
        assert f"e2e-stale {h}: held by" in st.stdout and f"(pid {p.pid}) running `up` since" in st.stdout, st
    holders = {h: (lock_dir(cluster, h, "e2e-stale") / "holder.json").read_text() for h in ("h1", "h2")}
    rel = inkctl("lease", "release", rec, "--hosts", inv)
    assert rel.rc == 0 and "e2e-stale h1: released" in rel.stdout and "e2e-stale h2: released" in rel.stdout, rel
    no_lock_anywhere(cluster, "e2e-stale")
    again = inkctl("lease", "release", rec, "--hosts", inv)
    assert again.rc == 0 and "h1: was not held" in again.stdout, again
    assert "h1: free" in inkctl("lease", "status", rec, "--hosts", inv).stdout
    # the dead up's lock again: the next up from this machine takes it over (its holder is gone),
    # then refuses on what that up left running, and gives the lock back
    for h, text in holders.items():
        lock_dir(cluster, h, "e2e-stale").mkdir(parents=True)
        (lock_dir(cluster, h, "e2e-stale") / "holder.json").write_text(text)
    taken = inkctl("up", rec, "--hosts", inv)
    assert taken.rc == 1 and "nothing was changed" in taken.stderr, taken
    for h in ("h1", "h2"):
        assert f"{h}: took over a stale deploy lock" in taken.out and f"(pid {p.pid}) running `up`" in taken.out, taken
    no_lock_anywhere(cluster, "e2e-stale")
    d = inkctl("down", rec, "--hosts", inv)  # the killed up's containers
    assert d.rc == 0, d
    assert containers(cluster, "h1", "e2e-stale") == [] and containers(cluster, "h2", "e2e-stale") == []
    no_lock_anywhere(cluster, "e2e-stale")


# ------------------------------------------------------------------------------- replacing

def record(cluster, host: str, deployment: str) -> dict:
    return json.loads((state_dir(cluster, host, deployment) / "plan.json").read_text())


def hash_label(cluster, host: str, container: str) -> str:
    return cluster.docker(host, "inspect", "--format", '{{index .Config.Labels "inkctl.recipe-hash"}}', container,
                          check=True).stdout.strip()


def test_a_changed_recipe_shows_what_changes_and_replaces_the_deployment(cluster, inkctl, inventory, recipe, tmp_path):
    inv = inventory("h1", "h2")
    v1 = recipe("vllm-native-2", name="e2e-change", engine={"args": {"max_model_len": 4096}})
    up1 = inkctl("up", v1, "--hosts", inv)
    assert up1.rc == 0, up1
    no_lock_anywhere(cluster, "e2e-change")  # released after a success too
    old = hash_label(cluster, "h1", "inkctl-e2e-change-r0")
    rec = record(cluster, "h2", "e2e-change")
    assert rec["recipe_hash"] == old and [r["rank"] for r in rec["runs"]] == [1]
    assert rec["runs"][0]["argv"][rec["runs"][0]["argv"].index("--max-model-len") + 1] == "4096"

    same = inkctl("up", v1, "--hosts", inv)
    assert same.rc == 0 and "already up" in same.stdout, same

    v2 = tmp_path / "v2" / "e2e-change.yaml"
    v2.parent.mkdir()
    v2.write_text(v1.read_text().replace("max_model_len: 4096", "max_model_len: 8192"))
    up2 = inkctl("up", v2, "--hosts", inv)
    assert up2.rc == 0, up2
    new = hash_label(cluster, "h1", "inkctl-e2e-change-r0")
    assert new != old and hash_label(cluster, "h2", "inkctl-e2e-change-r1") == new
    assert f"recipe hash {old} -> {new}); replacing it" in up2.stderr, up2
    # one deployment (no fleet): replaced where it stands, and said to be down meanwhile
    assert "warning: e2e-change does not serve while its new version boots" in " ".join(up2.stderr.split()), up2
    diff = up2.stderr[up2.stderr.index("what changes"):]
    for rank, host in ((0, "h1"), (1, "h2")):
        block = diff[diff.index(f"rank {rank} ({host}):"):]
        assert block.split("\n")[1:3] == ["      - --max-model-len 4096", "      + --max-model-len 8192"], up2
    assert "recipe-hash" not in diff.split("stage ")[0]
    assert record(cluster, "h1", "e2e-change")["recipe_hash"] == new
    assert containers(cluster, "h1", "e2e-change") == ["inkctl-e2e-change-r0 running"]
    assert containers(cluster, "h2", "e2e-change") == ["inkctl-e2e-change-r1 running"]

    # no record (a deployment older than the record): say the hashes differ, replace anyway
    (state_dir(cluster, "h1", "e2e-change") / "plan.json").unlink()
    up3 = inkctl("up", v1, "--hosts", inv)
    assert up3.rc == 0, up3
    assert f"recipe hash {new} -> {old}" in up3.stderr
    assert "h1: no plan record" in up3.stderr and "the recipe hashes differ" in up3.stderr, up3
    assert "- --max-model-len 8192" in up3.stderr  # h2 still had its record
    assert hash_label(cluster, "h1", "inkctl-e2e-change-r0") == old

    # a replacement that fails is rolled back like any launch: nothing of either version is left
    v4 = recipe("vllm-native-2", name="e2e-change", engine={"args": {"max_model_len": 4096}},
                container={"env": {"FAKE_CRASH_AFTER": "0.5", "FAKE_READY_AFTER": "30"}})
    up4 = inkctl("up", v4, "--hosts", inv)
    assert up4.rc == 1, up4
    assert "+ --env FAKE_CRASH_AFTER=0.5" in up4.stderr, up4
    assert "rolled back" in up4.stderr and "had been removed before the launch" in up4.stderr, up4
    for h in ("h1", "h2"):
        assert containers(cluster, h, "e2e-change") == []
        assert not state_dir(cluster, h, "e2e-change").exists()
    no_lock_anywhere(cluster, "e2e-change")


# ------------------------------------------------------------------------------- Ctrl-C

def test_detach_leaves_the_boot_running_and_says_how_to_follow_it(cluster, inkctl, follow, inventory, recipe):
    rec = recipe("single", name="e2e-detach", container={"env": {"FAKE_READY_AFTER": "60", "FAKE_LOG_EVERY": "1"}})
    inv = inventory("h1")
    f = follow("up", rec, "--hosts", inv, "--detach")
    wait_for("the health wait", lambda: f.saw("health: wait for") and containers(cluster, "h1", "e2e-detach") == ["inkctl-e2e-detach-r0 running"],
         timeout=60)
    f.p.send_signal(signal.SIGINT)
    assert f.end() == 0, f.text
    out = "".join(f.out)
    assert "detached: e2e-detach was left booting on h1" in out, f.text
    out = unfold(out)  # a command folded over lines pastes as one
    assert f"inkctl status {rec}" in out and f"inkctl logs -f {rec}" in out and f"inkctl down {rec}" in out
    assert "rolling back" not in f.text
    assert containers(cluster, "h1", "e2e-detach") == ["inkctl-e2e-detach-r0 running"]
    no_lock_anywhere(cluster, "e2e-detach", ("h1",))
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_a_second_ctrl_c_abandons_a_hanging_rollback_and_says_what_may_remain(cluster, inkctl, follow, inventory, recipe,
                                                                              stand_in, tmp_path):
    hang = tmp_path / "hang-rm"
    stand_in("h2", "docker", f"""#!/bin/sh
if [ "$1" = rm ] && [ -f {hang} ]; then sleep 50; fi
exec {real("docker")} "$@"
""")
    rec = recipe("vllm-native-2", name="e2e-twice-int", container={"env": {"FAKE_READY_AFTER": "60"}})
    inv = inventory("h1", "h2")
    f = follow("up", rec, "--hosts", inv)
    wait_for("the health wait", lambda: f.saw("health: wait for") and containers(cluster, "h2", "e2e-twice-int") == ["inkctl-e2e-twice-int-r1 running"],
         timeout=60)
    hang.touch()  # h2's docker rm now hangs: the rollback cannot finish there
    f.p.send_signal(signal.SIGINT)
    wait_for("the rollback", lambda: f.saw("rolling back on h1, h2"), timeout=30)
    t0 = time.monotonic()
    f.p.send_signal(signal.SIGINT)
    assert f.end(timeout=30) == 130, f.text
    assert time.monotonic() - t0 < 10, f.text  # at once, not after the hanging docker rm
    assert "interrupted again during the rollback: containers of this run may be left:" in f.text
    assert "h2: inkctl-e2e-twice-int-r1" in f.text and f"remove them with: inkctl down {rec} --hosts {inv}" in unfold(f.text)
    assert "Traceback" not in f.text
    hang.unlink()
    no_lock_anywhere(cluster, "e2e-twice-int")  # released even then
    # h1 was rolled back meanwhile: its 'docker rm' was sent before the second Ctrl-C, and the
    # daemon finishes a removal it has begun even after the client is gone ('removing' for a moment)
    wait_for("h1's removal", lambda: containers(cluster, "h1", "e2e-twice-int") == [], timeout=30)


# ------------------------------------------------------------------------------- up builds

def test_up_builds_the_image_first_and_a_second_up_does_not(cluster, inkctl, inventory, tmp_path):
    from tests.e2e._images import Built, Workspace

    ws = Workspace(tmp_path, "build-replace.yaml", ("debian_version",))
    def on_h1(doc: dict) -> None:  # h1 stands in for a GB10
        doc["engine"]["args"]["port"] = PORT
        doc["hardware"] = {"accelerator": "dgx-spark-gb10", "compute_capability": "12.1", "nodes": 1, "gpus_per_host": 1,
                           "unified_memory": True}

    ws.edit(on_h1)
    inv = inventory("h1")
    assert inkctl("lock", ws.recipe, "--hosts", inv).rc == 0  # trust on first use
    tag = json.loads(inkctl("build", ws.recipe, "--emit", tmp_path / "ctx", "-o", "json").stdout)["image"]
    built = Built(cluster)
    built.fresh(tag, "h1")
    try:
        r = inkctl("up", ws.recipe, "--hosts", inv)
        assert r.rc == 0, r
        assert f"h1: building {tag}" in r.stderr and r.stderr.index("building") < r.stderr.index("stage 1/"), r
        image_id = cluster.docker("h1", "image", "inspect", "--format", "{{.Id}}", tag, check=True).stdout.strip()
        used = cluster.docker("h1", "inspect", "--format", "{{.Config.Image}} {{.Image}}", "inkctl-e2e-build-replace-r0",
                              check=True).stdout.split()
        assert used == [tag, image_id], used
        again = inkctl("up", ws.recipe, "--hosts", inv)
        assert again.rc == 0 and "already up" in again.stdout, again
        assert "building" not in again.stderr
        assert cluster.docker("h1", "image", "inspect", "--format", "{{.Id}}", tag).stdout.strip() == image_id
        assert inkctl("down", ws.recipe, "--hosts", inv).rc == 0
    finally:
        built.clean()


# ------------------------------------------------------------------------------- faults

def test_a_host_cut_off_mid_launch_rolls_back_the_others_and_names_it(cluster, inkctl, inventory, recipe, stand_in,
                                                                      tmp_path):
    started = tmp_path / "worker-run"
    stand_in("h2", "docker", f"""#!/bin/sh
if [ "$1" = run ] && [ ! -f {started} ]; then touch {started}; sleep 3; fi
exec {real("docker")} "$@"
""")
    rec = recipe("vllm-native-2", name="e2e-cut", container={"env": {"FAKE_READY_AFTER": "60"}})
    inv = inventory("h1", "h2")
    p = inkctl.start("up", rec, "--hosts", inv, env={"PYTHONFAULTHANDLER": "1"})
    try:
        wait_for("the worker's docker run", started.exists, timeout=60)  # on its way, 3 s from starting
        # every rank starts in one stage: the head may still be starting when the worker's run begins
        wait_for("the head to run", lambda: containers(cluster, "h1", "e2e-cut") == ["inkctl-e2e-cut-r0 running"],
                 timeout=30)
        cluster.cut("h2")
        out, err = finish(p, timeout=120)
    finally:
        cluster.heal("h2")
    assert p.returncode == 1, err
    assert re.search(r"h2.*(unreachable|connection lost|timed out)", err), err
    assert "rolled back: removed the deployment's containers and files on h1" in err, err
    assert "could NOT remove:\n  h2:" in err and "Traceback" not in err, err
    assert containers(cluster, "h1", "e2e-cut") == [] and not state_dir(cluster, "h1", "e2e-cut").exists()
    no_lock_anywhere(cluster, "e2e-cut", ("h1",))
    assert f"once the host is back, run: inkctl down {rec} --hosts {inv}" in unfold(err), err  # h2 kept the lock: it was cut off
    assert lock_dir(cluster, "h2", "e2e-cut").exists()
    d = inkctl("down", rec, "--hosts", inv)  # once h2 is back, down finishes the job (the lock's holder is gone)
    assert d.rc == 0, d
    assert "h2: took over a stale deploy lock" in d.out and f"(pid {p.pid}) running `up`" in d.out, d
    assert containers(cluster, "h2", "e2e-cut") == []
    no_lock_anywhere(cluster, "e2e-cut")


def test_a_full_disk_during_a_build_names_the_host(cluster, inkctl, inventory, tmp_path):
    from tests.e2e._images import Built, Workspace

    host = cluster.host("h4")
    ws = Workspace(tmp_path, "build-replace.yaml", ("debian_version",))
    inv = inventory("h4")
    assert inkctl("lock", ws.recipe, "--hosts", inv).rc == 0
    tag = json.loads(inkctl("build", ws.recipe, "--emit", tmp_path / "ctx", "-o", "json").stdout)["image"]
    built = Built(cluster)
    built.fresh(tag, "h4")
    assert os.path.ismount(host.data_root)
    st = os.statvfs(host.data_root)
    used_kb = (st.f_blocks - st.f_bfree) * st.f_frsize // 1024
    size = subprocess.run(["findmnt", "-no", "OPTIONS", host.data_root], capture_output=True, text=True).stdout
    old = re.search(r"size=(\d+k)", size).group(1)
    subprocess.run(["mount", "-o", f"remount,size={used_kb + 64}k", host.data_root], check=True)  # full
    try:
        r = inkctl("build", ws.recipe, "--hosts", inv, timeout=180)
    finally:
        subprocess.run(["mount", "-o", f"remount,size={old}", host.data_root], check=True)
        built.clean()
    assert r.rc == 1, (r, r.stderr)
    assert "h4:" in r.stderr and "no space left on device" in r.stderr.lower(), r
    assert "Traceback" not in r.out
    assert cluster.docker("h4", "image", "inspect", tag).returncode != 0  # nothing tagged
