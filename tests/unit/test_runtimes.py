"""A container runtime is one module: registered by being in ``inkctl/runtimes/on_host/``, filling
every method of the ``Runtime`` protocol, and named nowhere else in inkctl."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from inkctl import runtimes
from inkctl.plan.deploy import build_plan
from inkctl.plan.step import Run
from inkctl.recipe.reading.source import load_recipe
from inkctl.runtimes.protocol import Runtime
from inkctl.runtimes.spec import ContainerSpec, Mount

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "inkctl"
RUNTIMES = PKG / "runtimes"
SPEC = ContainerSpec(name="c0", image="img:1", entrypoint="vllm", command=("serve", "m"),
                     labels=(("inkctl.deployment", "d"),), network="host", options=("--gpus", "all"),
                     mounts=(Mount("/hf", "/root/.cache/huggingface", True),), env=(("A", "1"),), env_file="/s/r0.env")
# one call of every method, as inkctl's callers make it
CALLS = {
    "run": ((SPEC,), {}), "run_once": ((SPEC,), {}), "exec": (("c0", "ray", "status"), {"detach": True}),
    "remove": (("c0", "c1"), {}), "wait": (("c0",), {}), "kill": (("c0",), {}),
    "logs": (("c0",), {"follow": True, "timestamps": True, "tail": 5, "since": "1m"}), "ps": ((), {"deployment": "d"}),
    "ps_names": (("inkctl-",), {}), "inspect": (("c0",), {}), "image_inspect": (("img:1",), {"format": "{{.Id}}"}),
    "tag": (("a", "b"), {}), "push": (("b",), {}), "create": (("img:1",), {"label": "k=v", "entrypoint": "true"}),
    "copy_out": (("c0", "/etc/x"), {}), "build": (("t:1", {"B": "2"}), {}), "load": ((), {}), "save": (("img:1",), {}),
}
# strings that are not a runtime's name though they spell one
ALLOWED = {
    "execute/image/local_daemon.py": "the control machine's docker daemon, through the docker SDK (--local)",
    "export/k8s_pod.py": "a field of the export's JSON (the flag as the plan has it)",
    "execute/deploy/runner.py": "docker's own error text (permission denied on its socket)",
}


def protocol_methods() -> set[str]:
    return {n for n, v in vars(Runtime).items() if inspect.isfunction(v) and not n.startswith("_")}


def test_the_protocol_is_what_mypy_holds_each_runtime_to():
    """Each runtime module declares ``RUNTIME: Runtime``; mypy (CI) checks the class against it."""
    for name in runtimes.names():
        text = (RUNTIMES / "on_host" / f"{name}.py").read_text()
        assert "\nRUNTIME: Runtime = " in text, name


def test_every_argv_method_is_called_here():
    argv_methods = protocol_methods() - {"ps_format", "findings", "not_answering", "relay"}
    assert set(CALLS) == argv_methods


@pytest.mark.parametrize("name", runtimes.names())
def test_each_registered_runtime_fills_every_method(name):
    rt = runtimes.get(name)
    assert isinstance(rt, Runtime) and rt.name == name and rt.default_gpus in ("all", "cdi")
    for method, (args, kw) in CALLS.items():
        argv = getattr(rt, method)(*args, **kw)
        assert isinstance(argv, tuple) and argv[0] == rt.command and all(isinstance(a, str) for a in argv), method
    assert "{{.Names}}" in rt.ps_format() and rt.ps_format().count("\t") == 3
    assert isinstance(rt.findings("all", []), list) and "h1" in rt.not_answering("h1")
    relay = rt.relay()
    assert relay["by"] in ("chain", "diff") and all(relay[k][0] == rt.command for k in ("save", "load", "tag", "inspect", "ls"))


def test_a_name_nobody_registered_is_refused():
    with pytest.raises(KeyError, match="known: docker, nerdctl, podman"):
        runtimes.get("lxc")


def test_a_runtime_is_registered_by_its_module_alone():
    """Each name is its module's file (``on_host/NAME.py``) and the recipe takes exactly those."""
    from inkctl.recipe.container import ContainerSpec as Section

    files = sorted(p.stem for p in (RUNTIMES / "on_host").glob("*.py") if not p.name.startswith("_"))
    assert sorted(runtimes.names()) == files and runtimes.names()[0] == runtimes.DEFAULT
    assert Section.model_json_schema()["properties"]["runtime"]["enum"] == list(runtimes.names())


def _strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_nothing_outside_the_runtimes_compares_a_runtimes_name():
    """No module outside inkctl/runtimes/ holds a runtime's name (docker, podman, nerdctl; pyxis,
    apptainer) as a string: every difference asks the runtime object. ``ALLOWED`` says why the
    few that spell one do."""
    words = {*runtimes.names(), *runtimes.in_task_names()}
    found = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        if rel.startswith("runtimes/") or rel in ALLOWED:
            continue
        found += [f"{rel}:{line}: {s!r}" for line, s in _strings(p) if s.strip().lower() in words]
    assert not found, "ask inkctl.runtimes.get(name) instead:\n" + "\n".join(found)


def test_inside_the_package_each_name_is_written_in_its_own_module():
    own = {f"on_host/{n}.py": n for n in runtimes.names()} | {"task.py": None, "__init__.py": runtimes.DEFAULT}
    for p in sorted(RUNTIMES.rglob("*.py")):
        rel = p.relative_to(RUNTIMES).as_posix()
        names = {s for _, s in _strings(p) if s in runtimes.names()}
        assert names <= ({own[rel]} if own.get(rel) else set()), f"{rel} names {names}"


def test_the_allow_list_is_still_needed():
    words = set(runtimes.names())
    for rel in ALLOWED:
        assert any(s.strip().lower() in words for _, s in _strings(PKG / rel)), f"{rel} no longer needs to be allowed"


def test_nerdctl_plans_through_the_registry_alone():
    """A third runtime is one file: a recipe naming nerdctl validates and plans with nerdctl's argv."""
    loaded = load_recipe(ROOT / "examples" / "vllm-single-docker.yaml", ["container.runtime=nerdctl"], None)
    r = loaded.recipe
    assert r.container.runtime == "nerdctl"
    from inkctl.recipe.checks.rules import recipe_findings

    assert not [p for p in recipe_findings(r) if p.severity == "error"]
    plan = build_plan(r)
    (start,) = [s for s in plan.steps() if isinstance(s, Run) and s.container is not None]
    assert start.argv[:3] == ("nerdctl", "run", "--detach") and start.argv == runtimes.get("nerdctl").run(start.container)
    assert {h.runtime for h in plan.hosts} == {"nerdctl"}
    assert all(t.argv[0] == "nerdctl" for t in plan.teardown if t.argv[0] != "rm")
    nerdctl = runtimes.get("nerdctl")
    assert nerdctl.ps_format().split("\t")[1] == "{{.Status}}"  # no .State in nerdctl's ps
    assert "--force-rm" not in nerdctl.build("t:1", {}) and nerdctl.relay()["whole"]


def test_podman_differs_only_where_it_must():
    docker, podman = runtimes.get("docker"), runtimes.get("podman")
    assert podman.run(SPEC)[1:] == docker.run(SPEC)[1:]
    assert podman.remove("a") == ("podman", "rm", "--force", "a", "--ignore")
    assert [p.path for p in podman.findings("all", [])] == ["container.gpus"]
    assert [p.severity for p in podman.findings("cdi", [])] == ["warning"] and not podman.findings("cdi", ["label=disable"])
    assert not docker.findings("all", []) and "systemctl start docker" in docker.not_answering("h1")
    assert podman.relay()["by"] == "diff" and docker.relay()["by"] == "chain" and podman.relay()["whole_if"] is None


FAKE_RUNTIME = """#!/bin/sh
# answers what the relay's host side asks a runtime: info, image ls, image inspect (two images)
echo "$0 $*" >> "$CALLS"
case "$1 $2" in
  "info --format") echo "$DRIVER_STATUS" ;;
  "image ls") printf 'sha256:i1\\nsha256:i2\\n' ;;
  "image inspect") shift 4; for i in "$@"; do
      [ "$i" = sha256:i1 ] && echo '["sha256:base","sha256:mid"]'; [ "$i" = sha256:i2 ] && echo '["sha256:other"]'; done ;;
esac
"""


@pytest.mark.parametrize("name, status, by, whole", [
    ("docker", "[]", "chain", False), ("docker", '[["driver-type","io.containerd.snapshotter.v1"]]', "chain", True),
    ("podman", "", "diff", False), ("nerdctl", "", "diff", True)])
def test_the_relays_host_side_runs_what_its_runtime_gives_it(tmp_path, monkeypatch, name, status, by, whole):
    """relay_host.layers with each runtime's ``relay()`` data, against a stand-in program of that
    name on the PATH: chain ids for docker's store, diff ids for podman's, nothing asked of a
    runtime that loads whole archives only."""
    from inkctl.execute.image.relay_host import chain_ids, layers

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / name).write_text(FAKE_RUNTIME)
    (bin_ / name).chmod(0o755)
    calls = tmp_path / "calls"
    monkeypatch.setenv("PATH", f"{bin_}:/usr/bin:/bin")
    monkeypatch.setenv("CALLS", str(calls))
    monkeypatch.setenv("DRIVER_STATUS", status)
    said = layers(runtimes.get(name).relay(), None)
    assert said["by"] == by and bool(said["whole"]) == whole
    asked = calls.read_text() if calls.exists() else ""
    if whole:
        assert said["have"] == [] and "image ls" not in asked
    else:
        keys = [*chain_ids(["sha256:base", "sha256:mid"]), "sha256:other"] if by == "chain" else \
            ["sha256:base", "sha256:mid", "sha256:other"]
        assert said["have"] == sorted(keys) and f"{name} image inspect" in asked


def test_a_status_for_a_state_reads_as_the_state():
    """nerdctl's ``ps`` has no ``.State``: its status column (``Up``, ``Exited (137) ...``) reads
    as docker's state does."""
    from inkctl.execute.state.deployed import parse_ps

    up, gone = parse_ps("h1", "inkctl-x-r0\tUp\tx\tabc\ninkctl-x-r1\tExited (137) 2 minutes ago\tx\tabc\n")
    assert (up.state, up.running, up.deployment) == ("running", True, "x") and gone.state == "exited"
