"""`up --slurm` takes `export slurm`'s options (declared once), bounds the wait of a pending job
and says why it waits; `weights` takes a job's nodes. Slurm's commands are fakes on PATH (a
process boundary) where one is needed."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from inkctl.errors import InkctlError

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "tests/e2e/recipes"


def inkctl(*args, env=None):
    e = dict(os.environ, COLUMNS="200", NO_COLOR="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], capture_output=True, text=True, env=e,
                          cwd=ROOT)


def test_up_and_export_share_one_declaration_of_each_slurm_option():
    from inkctl.cli import deploy
    from inkctl.cli.export import slurm as export_slurm
    from inkctl.cli.common import options

    up = inspect.signature(deploy.up).parameters
    export = inspect.signature(export_slurm.slurm).parameters
    for name, opt in (("partition", options.PartitionOpt), ("account", options.AccountOpt),
                      ("gpus_per_node", options.GpusOpt), ("container", options.ContainerOpt),
                      ("job_dir", options.JobDirOpt)):
        assert up[name].default is opt and export[name].default is opt, name
    assert up["time_limit"].default is options.TimeOpt and export["time"].default is options.TimeOpt
    text = inkctl("up", "--help").stdout
    for flag in ("--container", "--gpus-per-node", "--pending-timeout"):
        assert flag in text


@pytest.mark.parametrize("value, mode, runtime, gpus", [
    (None, "runtime", "docker", "all"), ("runtime", "runtime", "docker", "all"), ("podman", "runtime", "podman", "cdi"),
    ("docker", "runtime", "docker", "all"), ("pyxis", "pyxis", "docker", "all"), ("apptainer", "apptainer", "docker", "all"),
])
def test_container_option_picks_the_runtime_or_slurms_own(value, mode, runtime, gpus):
    from inkctl.cli.common.options import slurm_container
    from inkctl.recipe.reading.source import load_recipe

    got, sets = slurm_container(value, ["name=x"], E2E / "single.yaml")
    assert got == mode
    c = load_recipe(E2E / "single.yaml", sets).recipe.container
    assert (c.runtime, c.gpus) == (runtime, gpus)
    # and back: a podman recipe run on docker exposes GPUs docker's way
    got, sets = slurm_container("docker", ["container.runtime=podman", "container.gpus=cdi"], E2E / "single.yaml")
    c = load_recipe(E2E / "single.yaml", sets).recipe.container
    assert (got, c.runtime, c.gpus) == ("runtime", "docker", "all")


def test_export_container_podman_is_the_recipe_on_podman(tmp_path):
    """--container podman on a docker recipe: the script of that recipe with container.runtime podman."""
    a = inkctl("export", "slurm", E2E / "vllm-native-2.yaml", "--container", "podman")
    b = inkctl("export", "slurm", E2E / "vllm-native-2.yaml", "--set", "container.runtime=podman",
               "--set", "container.gpus=cdi")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout and "podman run" in a.stdout and "docker run" not in a.stdout


def test_slurm_options_without_slurm_are_refused():
    for args in (["--container", "pyxis"], ["--gpus-per-node", "0"], ["--pending-timeout", "5"]):
        r = inkctl("up", E2E / "single.yaml", *args)
        assert r.returncode == 2 and "go with --slurm" in r.stderr and "Traceback" not in r.stderr, args
    r = inkctl("up", E2E / "single.yaml", "--slurm", "--container", "lxc")
    assert r.returncode == 2 and "--container 'lxc': expected docker, nerdctl, podman, pyxis or apptainer" in r.stderr


def _fake_scontrol(tmp_path, line: str) -> dict:
    """An scontrol on PATH that answers `show job` with this line (and `show hostnames` with one per line)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "scontrol").write_text("#!/bin/sh\n"
                                   'if [ "$2" = hostnames ]; then echo "$3" | tr , "\\n"; exit 0; fi\n'
                                   f"echo '{line}'\n")
    (bin_ / "scontrol").chmod(0o755)
    return {"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}


def _one_line(e) -> str:
    return " ".join(str(e).split())


def test_pending_job_is_given_up_after_the_timeout_with_its_reason(tmp_path, monkeypatch):
    from inkctl.slurm import run as sr

    for k, v in _fake_scontrol(tmp_path, "JobId=7 JobName=inkctl-x JobState=PENDING Reason=Resources "
                                         "Partition=gpu NodeList=(null)").items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(sr, "POLL_S", 0.05)
    said: list[str] = []
    with pytest.raises(InkctlError) as e:
        sr.wait_running("7", "x", 2, said.append, threading.Event(), pending_timeout=0.3)
    assert "job 7 still pending after 0 s (reason Resources): the nodes it needs are busy" in _one_line(e.value)
    assert "squeue -p gpu" in (e.value.hint or "")
    assert all(len(ln) <= 73 for ln in str(e.value).splitlines())
    assert said == ["job 7: pending (Resources)"]


def test_hopeless_reason_fails_at_once_and_says_what_to_do(tmp_path, monkeypatch):
    from inkctl.slurm import run as sr

    for k, v in _fake_scontrol(tmp_path, "JobId=8 JobState=PENDING Reason=PartitionNodeLimit Partition=gpu "
                                         "NodeList=(null)").items():
        monkeypatch.setenv(k, v)
    with pytest.raises(InkctlError) as e:
        sr.wait_running("8", "x", 4, lambda _: None, threading.Event(), pending_timeout=None)
    assert "job 8 cannot start (reason PartitionNodeLimit): it asks for more nodes than the partition allows" \
        in _one_line(e.value)
    assert "--partition" in (e.value.hint or "")


@pytest.mark.parametrize("reason, needle", [
    ("ReqNodeNotAvail, UnavailableNodes:n3", "sinfo -R -p gpu"),
    ("Priority", "squeue -p gpu"),
    ("SomethingNew", "Slurm says: SomethingNew"),
])
def test_every_pending_reason_says_something(reason, needle):
    from inkctl.slurm.ctl import pending_why

    what, todo = pending_why(reason, "gpu", "9")
    assert needle in what + " " + todo


def test_weights_takes_the_nodes_of_a_job(tmp_path):
    env = _fake_scontrol(tmp_path, "JobId=5 JobState=PENDING Reason=Resources Partition=gpu NodeList=(null)")
    r = inkctl("weights", E2E / "single.yaml", "--slurm-job", "5", env=env)
    assert r.returncode == 2 and "job 5 is pending: it holds no nodes now" in r.stderr, r.stderr
    r = inkctl("weights", E2E / "single.yaml", "--slurm-job", "5", "--partition", "gpu", env=env)
    assert r.returncode == 2 and "choose one" in r.stderr
