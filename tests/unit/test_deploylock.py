"""The deploy lock on real files through the local transport (a process boundary, not a mock)."""

from __future__ import annotations

import pytest

from inkctl.execute.state.deploylock import DeployLock, LockHeld, lock_dir, release, status
from inkctl.execute.hosts.local import LocalTransport
from inkctl.plan.step import Plan, PlannedHost


def _plan(tmp_path, n=2) -> Plan:
    hosts = tuple(PlannedHost(name=f"h{i}", address="localhost", rank=i, runtime="docker",
                              state_dir=str(tmp_path / f"h{i}" / "dep")) for i in range(n))
    return Plan(deployment="dep", recipe_hash="x", hosts=hosts, stages=(), containers=())


def _transports(plan):
    return {h.name: LocalTransport(h.name) for h in plan.hosts}


def test_second_holder_is_refused_and_named(tmp_path):
    plan = _plan(tmp_path)
    tr = _transports(plan)
    with DeployLock(plan, tr, "inkctl up a.yaml"):
        with pytest.raises(LockHeld) as e:
            DeployLock(plan, tr, "inkctl up b.yaml").acquire()
        assert "deployment dep is locked" in e.value.message
        assert "running `inkctl up a.yaml`" in e.value.message
        assert "h0: held by" in e.value.message and "h1: held by" in e.value.message
        assert "inkctl lease release" in e.value.hint
    # released on exit: a new holder gets it
    with DeployLock(plan, tr, "inkctl down"):
        pass
    assert not (tmp_path / "h0" / "locks" / "dep.lock").exists()


def test_partial_acquire_is_rolled_back(tmp_path):
    plan = _plan(tmp_path)
    tr = _transports(plan)
    other = _plan(tmp_path, 2)
    # someone holds only h1
    holder = DeployLock(Plan(deployment="dep", recipe_hash="x", hosts=(other.hosts[1],), stages=(), containers=()),
                        tr, "inkctl build")
    holder.acquire()
    with pytest.raises(LockHeld):
        DeployLock(plan, tr, "inkctl up").acquire()
    # h0 was taken and given back, h1 still belongs to the first holder
    assert not (tmp_path / "h0" / "locks" / "dep.lock").exists()
    assert (tmp_path / "h1" / "locks" / "dep.lock").exists()
    holder.release()
    assert not (tmp_path / "h1" / "locks" / "dep.lock").exists()


def test_only_the_owner_releases(tmp_path):
    plan = _plan(tmp_path, 1)
    tr = _transports(plan)
    a = DeployLock(plan, tr, "inkctl up").acquire()
    b = DeployLock(plan, tr, "inkctl up")
    b.held_on = ["h0"]  # pretend; its token differs
    b.release()
    assert (tmp_path / "h0" / "locks" / "dep.lock").exists()
    a.release()
    assert not (tmp_path / "h0" / "locks" / "dep.lock").exists()


def test_status_and_forced_release(tmp_path):
    plan = _plan(tmp_path)
    tr = _transports(plan)
    DeployLock(plan, tr, "inkctl up stale.yaml").acquire()  # never released: a stale lock
    st = status(plan, tr)
    assert st["h0"].command == "inkctl up stale.yaml" and st["h1"] is not None
    assert release(plan, tr) == {"h0": True, "h1": True}
    assert status(plan, tr) == {"h0": None, "h1": None}
    assert release(plan, tr) == {"h0": False, "h1": False}
    assert lock_dir(plan, "h0").endswith("/h0/locks/dep.lock")


def test_taken_in_the_probe_is_all_or_nothing(tmp_path):
    """up takes the lock inside its combined probe; a host that failed there makes the others give it back."""
    from inkctl.execute.state.deploylock import _ACQUIRE
    from inkctl.execute.hosts.transport import HostError

    plan = _plan(tmp_path)
    tr = _transports(plan)
    lock = DeployLock(plan, tr, "inkctl up")
    assert tr["h0"].run(("sh", "-c", _ACQUIRE, "sh", *lock.probe_args("h0"))).ok
    lost = HostError("h1", "unreachable", "connection lost")
    with pytest.raises(HostError, match="connection lost"):
        lock.taken({"h0": ("", "", 0), "h1": lost})
    assert not (tmp_path / "h0" / "locks" / "dep.lock").exists()
    # held elsewhere: named from the record the probe printed, and given back here
    other = DeployLock(plan, tr, "inkctl down").acquire()
    assert tr["h0"].run(("sh", "-c", _ACQUIRE, "sh", *lock.probe_args("h0"))).exit_code == 75
    with pytest.raises(LockHeld, match="running `inkctl down`"):
        lock.taken({"h0": (other.record(), "", 75), "h1": (other.record(), "", 75)})
    other.release()
    assert not (tmp_path / "h0" / "locks" / "dep.lock").exists()
