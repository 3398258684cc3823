"""At-start hotfixes ("Inkling on Two DGX Sparks") on the simulated cluster with the fake engine image.

A correct hotfix runs inside the container before the engine; a missing, altered or failing
one keeps the engine from starting, with the wrapper's exit code (96/97/98) and its line. What
can be known before touching a host (unpinned, missing or drifted files) is refused by `up`,
`build` and `validate --strict` before anything starts.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from inkctl.plan.hotfix import EXIT_ALTERED, EXIT_FAILED, EXIT_MISSING
from tests.cluster.proc import wait_for
from tests.e2e._images import Workspace, ok_json
from tests.e2e.conftest import containers

pytestmark = pytest.mark.cluster
DEPLOYMENT = "e2e-hotfix"
CONTAINER = f"inkctl-{DEPLOYMENT}-r0"
MARKER = "/tmp/inkctl-hotfix-marker"
ARGV_DUMP = "/tmp/inkctl-fake-engine.json"  # the fake engine writes it when it starts


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def failing(doc: dict) -> None:
    doc["patches"]["hotfixes"][0].update(name="hotfix-fail.py", source="hotfix-fail.py")


def in_container(cluster, host: str, *argv: str):
    return cluster.docker(host, "exec", CONTAINER, *argv)


def test_hotfix_runs_inside_the_container_before_the_engine(cluster, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-hotfix.yaml", ("hotfix-marker.py",))
    inv = inventory("h1")
    ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))
    try:
        up = inkctl("up", ws.recipe, "--hosts", inv, timeout=300)
        assert up.rc == 0, up
        marker = in_container(cluster, "h1", "cat", MARKER)
        assert marker.returncode == 0 and marker.stdout.startswith("hotfix ran at"), marker.stderr
        times = in_container(cluster, "h1", "python3", "-c", "import os,sys; print(*(os.stat(p).st_mtime_ns for p in sys.argv[1:]))",
                             MARKER, ARGV_DUMP)
        hotfix_ns, engine_ns = map(int, times.stdout.split())
        assert hotfix_ns <= engine_ns  # the hotfix finished before the engine started
        logs = cluster.docker("h1", "logs", CONTAINER)
        assert "inkctl-hotfix: all hotfixes verified; starting the engine" in logs.stderr + logs.stdout
    finally:
        inkctl("down", ws.recipe, "--hosts", inv)


def test_failing_hotfix_keeps_the_engine_from_starting(cluster, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-hotfix.yaml", ("hotfix-fail.py",))
    ws.edit(failing)
    inv = inventory("h1")
    ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))
    try:
        up = inkctl("up", ws.recipe, "--hosts", inv, "--keep-on-failure", timeout=300)
        assert up.rc == 1, up
        assert f"exited with code {EXIT_FAILED}" in up.stderr, up
        assert "inkctl-hotfix: hotfix-fail.py failed with exit 3" in up.stderr, up
        state = cluster.docker("h1", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", CONTAINER)
        assert state.stdout.split() == ["exited", str(EXIT_FAILED)]
        assert cluster.docker("h1", "cp", f"{CONTAINER}:{ARGV_DUMP}", "-").returncode != 0  # the engine never ran
    finally:
        inkctl("down", ws.recipe, "--hosts", inv)


def _launch_planned(cluster, inkctl, ws, inv, tamper):
    """Do what `up` would, by hand, from `inkctl plan --output json`: upload the wrapper (and the
    hotfix, as ``tamper`` leaves it), then run the planned `docker run` argv itself."""
    plan = ok_json(inkctl("plan", ws.recipe, "--hosts", inv, "-o", "json"))
    steps = [s for st in plan["stages"] for s in st["steps"]]
    puts = {s["path"].rsplit("/", 1)[1]: s for s in steps if s["kind"] == "put"}
    puts.update({f["path"].rsplit("/", 1)[1]: f for s in steps for f in s.get("files", ())})  # written by the launch
    files = {"entry.sh": puts["entry.sh"]["content"].encode(), "hotfix-marker.py": ws.patch("hotfix-marker.py").read_bytes()}
    tamper(files)
    for name, content in files.items():
        path = puts[name]["path"]
        cluster.exec("h1", ["sh", "-c", 'mkdir -p "${1%/*}" && cat > "$1"', "sh", path], input=content.decode(), check=True)
    [launch] = [s for s in steps if s["kind"] == "run" and s["argv"][1] == "run"]
    cluster.exec("h1", launch["argv"], check=True)

    def exited():  # the wrapper decides within a second
        state = cluster.docker("h1", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", CONTAINER).stdout.split()
        return state if state and state[0] == "exited" else None

    state = wait_for(f"{CONTAINER} to exit", exited, timeout=60)
    logs = cluster.docker("h1", "logs", CONTAINER)
    return state, logs.stdout + logs.stderr, plan


@pytest.mark.parametrize("case", ["missing", "altered"])
def test_missing_or_altered_hotfix_on_the_host_stops_the_container(cluster, inkctl, inventory, tmp_path, case):
    ws = Workspace(tmp_path, "build-hotfix.yaml", ("hotfix-marker.py",))
    inv = inventory("h1")
    pin = ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))["pins"]["hotfix:hotfix-marker.py"]
    evil = b"import os; os.system('echo pwned')\n"

    def tamper(files):
        if case == "missing":
            del files["hotfix-marker.py"]
        else:
            files["hotfix-marker.py"] = evil

    try:
        state, logs, _ = _launch_planned(cluster, inkctl, ws, inv, tamper)
        if case == "missing":
            assert state == ["exited", str(EXIT_MISSING)], logs
            assert "inkctl-hotfix: hotfix-marker.py is missing" in logs
        else:
            assert state == ["exited", str(EXIT_ALTERED)], logs
            assert f"inkctl-hotfix: hotfix-marker.py was altered: expected sha256 {pin}, found {sha(evil)}" in logs
        assert "pwned" not in logs and "starting the engine" not in logs
    finally:
        cluster.docker("h1", "rm", "--force", CONTAINER)
        cluster.exec("h1", ["rm", "-rf", "--", f"{cluster.host('h1').state_dir}/{DEPLOYMENT}"])


def test_untrusted_hotfix_is_refused_before_anything_starts(cluster, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-hotfix.yaml", ("hotfix-marker.py",))
    inv = inventory("h1")
    unpinned = inkctl("up", ws.recipe, "--hosts", inv, timeout=300)
    assert unpinned.rc == 2, unpinned
    assert "hotfix-marker.py: not pinned" in unpinned.stderr, unpinned
    assert containers(cluster, "h1", DEPLOYMENT) == []

    old = ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))["pins"]["hotfix:hotfix-marker.py"]
    assert inkctl("validate", "--strict", ws.recipe).rc == 0  # the lock settles "not pinned"
    ws.patch("hotfix-marker.py").write_text("print('changed after the lock')\n")
    new = sha(ws.patch("hotfix-marker.py").read_bytes())
    for argv in (("up", ws.recipe, "--hosts", inv), ("build", ws.recipe, "--hosts", inv), ("validate", "--strict", ws.recipe)):
        res = inkctl(*argv, timeout=300)
        assert res.rc == 2, res
        assert "hotfix:hotfix-marker.py" in res.out and f"{old} -> {new}" in res.out, res
    assert containers(cluster, "h1", DEPLOYMENT) == []
    assert json.loads(ws.lock.read_text())["pins"]["hotfix:hotfix-marker.py"] == old  # nothing re-pinned behind our back
