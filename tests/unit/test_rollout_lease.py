"""A rolling update changes hosts outside ``up``'s own bring-up too: the old version kept aside,
brought back when the new one fails, the surge replica removed. Each takes the deployment's
deploy lease (``execute.state.deploylock``) as ``up`` and ``down`` do, and a lease held by
another command stops it with that command named, touching nothing. On real files through the
local transport (a process boundary, not a mock), docker and podman on its PATH refusing everything; the
router URL is on loopback, where nothing listens."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inkctl.execute.deploy import rolling
from inkctl.execute.hosts.local import LocalTransport
from inkctl.execute.state.deploylock import DeployLock, LockHeld, status
from inkctl.plan.record import record_text
from inkctl.plan.replicas.fleet import build_fleet
from inkctl.plan.replicas.rollout import aside
from inkctl.recipe.hosts import Host
from inkctl.recipe.reading.source import load_recipe

RECIPE = Path(__file__).resolve().parents[1] / "e2e" / "recipes" / "fleet.yaml"


@pytest.fixture(autouse=True)
def no_container_runtime(monkeypatch, tmp_path):
    """docker and podman, for the local commands, are programs that refuse everything: a
    regression that starts the old version without the lease fails here rather than starting a
    container on this machine."""
    import os
    import shutil

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("docker", "podman"):
        f = bin_dir / name
        f.write_text("#!/bin/sh\necho 'no container runtime in this test' >&2\nexit 125\n")
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    assert shutil.which("docker") == str(bin_dir / "docker")


class Events:
    def __init__(self):
        self.texts: list[str] = []

    def emit(self, event) -> None:
        self.texts.append(getattr(event, "text", "") or "")

    def close(self) -> None:
        pass


def _fleet(tmp_path):
    doc = yaml.safe_load(RECIPE.read_text())
    doc["fleet"]["rollout"] = {"surge": True, "drain_timeout_s": 1}
    p = tmp_path / "fleet.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    here = Host(name="here", address="localhost", local=True, gpus="0,1,2,3,4,5", state_dir=str(tmp_path / "state"))
    return build_fleet(load_recipe(p).recipe, [here])


def _held(plan, command="inkctl up other.yaml"):
    return DeployLock(plan, {h.name: LocalTransport(h.name) for h in plan.hosts}, command).acquire()


def _holder(plan) -> str:
    got = status(plan, {h.name: LocalTransport(h.name) for h in plan.hosts})
    return got["here"].command if got["here"] else ""


def test_the_rollback_waits_for_the_lease_and_touches_nothing_without_it(tmp_path):
    fleet = _fleet(tmp_path)
    rep = fleet.replicas[0]
    state = rep.plan.host("here").state_dir
    Path(aside(state)).mkdir(parents=True)  # the old version's copy, which a rollback puts back
    records = {"here": record_text(rep.plan.deployment, "old", "here", rep.plan.stages)}
    holder = _held(rep.plan)
    try:
        why = rolling._restore(fleet, rep, records, Events(), accept_new=False)
        assert "its old version was not started again: deployment e2e-fleet-r0 is locked" in why
        assert "running `inkctl up other.yaml`" in why
        assert Path(aside(state)).is_dir() and not Path(state).exists()  # nothing restored
        assert _holder(rep.plan) == "inkctl up other.yaml"  # still the other command's
    finally:
        holder.release()


def test_keeping_the_old_version_aside_takes_the_lease(tmp_path):
    fleet = _fleet(tmp_path)
    rep = fleet.replicas[1]
    state = rep.plan.host("here").state_dir
    Path(state).mkdir(parents=True)
    Path(state, "plan.json").write_text(record_text(rep.plan.deployment, "old", "here", rep.plan.stages))
    holder = _held(rep.plan)
    try:
        with pytest.raises(LockHeld):
            rolling._keep_aside(rep, accept_new=False)
        assert not Path(aside(state)).exists()
    finally:
        holder.release()
    kept = rolling._keep_aside(rep, accept_new=False)  # free: copied, its record read, the lease given back
    assert Path(aside(state), "plan.json").is_file() and '"runs"' in kept["here"]
    assert _holder(rep.plan) == ""


def test_the_surge_replicas_removal_takes_the_lease_and_says_when_it_could_not(tmp_path):
    fleet = _fleet(tmp_path)
    s = fleet.surge
    assert s is not None and s.name == "e2e-fleet-r2"
    holder = _held(s.plan)
    events = Events()
    try:
        rolling._surge_down(fleet, s, events, accept_new=False)
    finally:
        holder.release()
    said = "\n".join(events.texts)
    assert "surge: e2e-fleet-r2 was not removed (here: deployment e2e-fleet-r2 is locked" in said
    assert "removed" not in said.replace("was not removed", "")
