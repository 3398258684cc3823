"""Issue 9's pure pieces: GPU selection argv, the NVIDIA_VISIBLE_DEVICES rule, fatal engine lines,
restart backoff and budget, stale deploy locks, the one scrubber, the systemd unit."""

from __future__ import annotations

import os

import pytest

from inkctl.execute.state.deploylock import Holder, stale, this_machine
from inkctl.execute.supervise.ranks import RankSeen, fatal_line, first_down
from inkctl.execute.supervise.watch import RestartBudget
from inkctl.plan.container import gpu_args
from inkctl.scrub import Scrubber


def test_gpu_indices_become_the_runtimes_own_flags():
    assert gpu_args("all", None) == ["--gpus", "all"]
    assert gpu_args("all", "0,1") == ["--gpus", '"device=0,1"']  # docker reads --gpus as CSV: the list is quoted
    assert gpu_args("cdi", "0,1") == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"]
    assert gpu_args("cdi", None) == ["--device", "nvidia.com/gpu=all"]
    assert gpu_args("none", "0") == []


def test_nvidia_visible_devices_beside_gpus_is_an_error_with_a_hint():
    from inkctl.recipe.model import Recipe
    from inkctl.recipe.checks.rules import recipe_findings
    import yaml
    from pathlib import Path

    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "e2e" / "recipes" / "single.yaml").read_text())
    doc["container"]["env"] = {"NVIDIA_VISIBLE_DEVICES": "0,1"}
    found = {p.path: p for p in recipe_findings(Recipe.model_validate(doc))}
    p = found["container.env.NVIDIA_VISIBLE_DEVICES"]
    assert p.severity == "error" and "--gpus" in p.message and "inventory" in p.hint
    doc["container"]["gpus"] = "none"
    assert "container.env.NVIDIA_VISIBLE_DEVICES" not in {p.path for p in recipe_findings(Recipe.model_validate(doc))}


@pytest.mark.parametrize("line,kind", [
    ("[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3135, remote process exited", "NCCL error"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "CUDA error"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out of memory"),
    ("ERROR 12-01 [core.py:708] EngineCore encountered a fatal error: boom", "engine died"),
    ("INFO 12-01 [loader.py:1] Loading weights took 3.2 seconds", None),
    ("vm:1:1 [0] NCCL INFO Using network Socket", None),
])
def test_fatal_engine_lines(line, kind):
    assert fatal_line(line) == kind


def test_the_first_rank_to_stop_is_the_cause():
    from inkctl.execute.state.deployed import parse_inspect_lines

    seen = parse_inspect_lines("h1", "/a|exited|1|2026-12-01T16:00:01.5+01:00\n/b|exited|137|2026-12-01T15:00:01.2Z\n"
                                     "/c|running|0|0001-01-01T00:00:00Z\njunk\n")
    ranks = [RankSeen("h1", i, n, state=c.state, exit_code=c.exit_code, finished=c.finished_at)
             for i, (n, c) in enumerate(sorted(seen.items()))]
    assert seen["c"].finished_at is None and len(seen) == 3
    # a died at 15:00:01.5 UTC (its offset kept), b at 15:00:01.2 UTC: b was first
    assert first_down(ranks).container == "b"


def test_restarts_back_off_and_stop_at_the_hourly_budget():
    b = RestartBudget(per_hour=3, first_s=5, max_s=12)
    assert b.next_delay(0) == 5
    b.spend(0)
    assert b.next_delay(1) == 10
    b.spend(1)
    assert b.next_delay(2) == 12  # capped
    b.spend(2)
    assert b.next_delay(3) is None  # three within the hour
    assert b.next_delay(3601) == 10  # the first one has aged out


def test_a_lock_is_stale_only_when_its_holder_ran_here_and_is_gone():
    gone = 2 ** 22 + 12345  # above pid_max's default: no such process
    assert stale(Holder(this_machine(), gone, "up", "now"))
    assert not stale(Holder("someone@elsewhere", gone, "up", "now"))  # another machine: cannot know
    assert not stale(Holder(this_machine(), os.getpid(), "up", "now"))  # this very command
    assert not stale(None)


def test_the_scrubber_masks_every_value_longest_first():
    s = Scrubber(["hf_abcdefgh", "hf_abcdefgh_longer"])
    assert s.text("a hf_abcdefgh_longer b hf_abcdefgh") == "a *** b ***"
    assert s({"x": ["hf_abcdefgh"]}) == {"x": ["***"]}


def test_the_systemd_unit_runs_watch_restart_with_absolute_paths(tmp_path):
    from inkctl.api.export import unit_text

    rec = tmp_path / "my recipe.yaml"
    unit = unit_text(rec, tmp_path / "hosts.yaml", ["engine.args.port=8001"], python="/usr/bin/python3", user="ops",
                     deployment="d", max_restarts=2)
    start = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    assert start.startswith("ExecStart=/usr/bin/python3 -m inkctl watch") and "--restart" in start
    assert f"'{rec}'" in start and f"--hosts {tmp_path / 'hosts.yaml'}" in start and "--max-restarts-per-hour 2" in start
    assert "User=ops" in unit and "Restart=on-failure" in unit and "WantedBy=multi-user.target" in unit
    assert "$$HOME" in unit_text(tmp_path / "$HOME.yaml", None, [], python="p", user=None, deployment="d", max_restarts=1)


class _Flaky:
    """A host whose connection stands (keepalives answered) but whose commands fail as told."""

    def __init__(self, fails: int, alive: bool = True):
        self.fails, self._alive = fails, alive

    def alive(self) -> bool:
        return self._alive

    def run(self, argv, timeout=None, stdin=None):
        from inkctl.execute.hosts.transport import HostError, Result

        if self.fails:
            self.fails -= 1
            raise HostError("h3", "unreachable", "connection lost before the command reported its exit status")
        return Result(argv=tuple(argv), exit_code=0, stdout=b"/inkctl-x-r0|running|0|0001-01-01T00:00:00Z\n", stderr=b"",
                      seconds=0.0)


def _supervisor(transport):
    from types import SimpleNamespace

    from inkctl.execute.supervise.watch import Supervisor

    host = SimpleNamespace(name="h3", runtime="podman")
    plan = SimpleNamespace(hosts=[host], containers=[SimpleNamespace(host="h3", rank=0, name="inkctl-x-r0")],
                           host=lambda name: host, health_url=None)
    recipe = SimpleNamespace(hardware=SimpleNamespace(unified_memory=False), watchdog_on=False)
    return Supervisor(plan=plan, transports={"h3": transport}, recipe=recipe, interval=0.2)


def test_a_failed_read_on_a_standing_connection_is_no_lost_host():
    """The ghost of issue 18: "h3 lost ... no answer for 4.5 s" 27 ms after the first ok, from one
    failed command on a connection that still stood."""
    s = _supervisor(_Flaky(fails=2))
    assert s._turn({}) is None and s._turn({}) is None  # two failed reads: asked again, nothing declared
    assert s._turn({}) is None  # it answers again: the count starts over
    s = _supervisor(_Flaky(fails=5))
    assert s._turn({}) is None and s._turn({}) is None
    f = s._turn({})
    assert f is not None and f.cause == "host-unanswering" and "no answer for" not in f.message
    assert "connection lost before the command reported its exit status" in f.message
    lost = _supervisor(_Flaky(fails=1, alive=False))._turn({})
    assert lost.cause == "host-lost" and "no answer for" in lost.message
