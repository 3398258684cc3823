"""The runtime command builder, the container-state parsers and the fan-out primitive."""

from __future__ import annotations

import threading
from pathlib import Path
from datetime import datetime, timedelta, timezone

import pytest

from inkctl.execute.state.deployed import parse_inspect_lines, parse_ps, parse_time
from inkctl.execute.hosts.fanout import each, on_hosts
from inkctl.execute.hosts.transport import HostError
from inkctl import runtimes
from inkctl.plan.deploy import build_plan
from inkctl.plan.step import Run
from inkctl.recipe.reading.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]


def test_podman_remove_ignores_a_missing_container_and_docker_is_not_given_the_flag():
    assert runtimes.get("podman").remove("a", "b") == ("podman", "rm", "--force", "a", "b", "--ignore")
    assert runtimes.get("docker").remove("a") == ("docker", "rm", "--force", "a")


def test_the_runtimes_differ_where_they_must():
    assert "--pull=never" in runtimes.get("podman").build("t:1", {}) and "--pull=never" not in runtimes.get("docker").build("t:1", {})
    assert runtimes.get("docker").build("t:1", {"B": "2", "A": "1"}) == (
        "docker", "build", "--force-rm", "--tag", "t:1", "--build-arg", "A=1", "--build-arg", "B=2", "-")
    assert '{{index .Labels "inkctl.deployment"}}' in runtimes.get("podman").ps_format()
    assert '{{.Label "inkctl.deployment"}}' in runtimes.get("docker").ps_format()
    assert runtimes.get("docker").logs("c", follow=True, tail=50) == ("docker", "logs", "--follow", "--tail", "50", "c")
    assert runtimes.get("podman").exec("c", "ray", "status", detach=True) == ("podman", "exec", "--detach", "c", "ray", "status")


def test_a_container_run_step_carries_the_spec_its_argv_was_made_from():
    loaded = load_recipe(ROOT / "recipes" / "inkling-8x-h200-podman-vllm.yaml",
                         ["container.ports=[{host: 18000, container: 8000}]"], None)
    r = loaded.recipe
    plan = build_plan(r)
    (step,) = [s for s in plan.steps() if isinstance(s, Run) and s.container is not None]
    spec = step.container
    assert step.argv == runtimes.get(r.container.runtime).run(spec)
    assert spec.image == r.engine.image.ref and (18000, 8000) in spec.ports and spec.network != "host"
    assert spec.mounts[0].target == "/hf" and spec.mounts[0].source.endswith("/.cache/huggingface/hub")
    assert set(r.container.env) <= set(spec.env_names)


def test_one_timestamp_parser_keeps_the_offset():
    utc = datetime(2026, 11, 29, 16, 21, 24, 123456, tzinfo=timezone.utc)
    assert parse_time("2026-11-29T16:21:24.123456789Z") == utc
    assert parse_time("2026-11-29T18:21:24.123456789+02:00") == utc
    assert parse_time("2026-11-29 18:21:24.123456789 +0200 CEST") == utc
    assert parse_time("0001-01-01T00:00:00Z") is None
    assert parse_time("2026-11-29T16:21:24Z") - parse_time("2026-11-29T16:21:24+01:00") == timedelta(hours=1)


def test_ps_and_inspect_lines_read_into_one_model():
    (c,) = parse_ps("h1", "inkctl-x-r0\tUp 2 minutes\tx\tabc123\n")
    assert (c.host, c.name, c.state, c.deployment, c.recipe_hash, c.running) == ("h1", "inkctl-x-r0", "running", "x", "abc123", True)
    (bare,) = parse_ps("h1", "other\texited\t\t\n")
    assert bare.deployment is None and bare.recipe_hash is None
    seen = parse_inspect_lines("h2", "/inkctl-x-r1|exited|137|2026-11-29T16:21:24.5+01:00\n")
    w = seen["inkctl-x-r1"]
    assert (w.host, w.state, w.exit_code) == ("h2", "exited", 137)
    assert w.finished_at == datetime(2026, 11, 29, 15, 21, 24, 500000, tzinfo=timezone.utc)


def test_fan_out_runs_every_host_at_once_and_sorts_ok_from_failed():
    gate = threading.Barrier(3, timeout=10)  # passes only when all three run at the same time

    def one(host: str) -> str:
        gate.wait()
        if host == "h2":
            raise HostError(host, "unreachable", "connection lost")
        return host.upper()

    res = on_hosts(one, ["h1", "h2", "h3"])
    assert res.ok == {"h1": "H1", "h3": "H3"} and list(res.ok) == ["h1", "h3"]
    assert res.failed["h2"].reason == "connection lost" and res.failed["h2"].message == "h2: connection lost"


def test_fan_out_lets_other_errors_through_and_keeps_order():
    assert each(lambda x: x * 2, [3, 1, 2]) == [6, 2, 4]
    with pytest.raises(ZeroDivisionError):
        on_hosts(lambda h: 1 // 0, ["h1", "h2"])
