"""A fleet's rolling update end to end: two replicas of the fake engine on GPU subsets of one
8-GPU host behind the REAL vllm-router, a client sending completions through the router the
whole time.

- a changed recipe: every replica replaced one at a time, no request failed, both on the new
  argv, the old containers gone, both in the router;
- a new version that fails to boot: the rollout stops at replica 0, which runs the old version
  again (in the router); replica 1 untouched (same container);
- Ctrl-C while replica 1's new version boots: replica 0 on the new version, replica 1 back on
  the old, both in the router, exit 130;
- with a surge (room for one more replica): a replica of the new version first, removed last;
- the same rolling update behind the real sglang-router (another worker API: queued changes);
- a gateway file that swaps a model onto a dropped one's GPUs and port.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.conftest import no_traceback

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster():
    """One 8x H200 docker host with the vllm-router image: a cluster of this module's own
    (net id INKCTL_E2E_NET_ID + 120), removed when the module ends."""
    if os.geteuid() != 0:
        pytest.skip("the test cluster needs root (network namespaces, dockerd)")
    from tests.cluster import Cluster
    from tests.cluster import router_image

    c = Cluster.up(2, podman_hosts=(), profiles={"h1": "h200x8", "h2": "h200x8"},
                   net_id=int(os.environ.get("INKCTL_E2E_NET_ID", "0")) + 120)
    router_image.load(c, ["h1"], kind="vllm")
    router_image.load(c, ["h1"])  # sglang-router: its worker list changes are queued (202)
    yield c
    c.down()


ROUTER = {"kind": "vllm", "policy": "round_robin", "port": 30090, "prometheus_port": 29010,
          "health_check_interval_s": 2, "image": "vllm/vllm-router:latest"}


def _chat(url: str, prompt: str, timeout: float = 30) -> dict:
    body = json.dumps({"model": "fake", "messages": [{"role": "user", "content": prompt}], "max_tokens": 8}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


class Loop:
    """Two clients sending completions through the router until stopped: (ok, failed, errors)."""

    def __init__(self, url: str):
        self.url, self.ok, self.failed, self.errors = url, 0, 0, []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(2)]

    def _run(self, k: int) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            try:
                assert "choices" in _chat(self.url, f"client {k} request {i}")
                self.ok += 1
            except Exception as e:  # noqa: BLE001 - counted: the test asserts there are none
                self.failed += 1
                self.errors.append(repr(e)[:200])

    def __enter__(self) -> "Loop":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)


def _argv(url: str) -> list[str]:
    return json.loads(urllib.request.urlopen(url + "/inkctl/fake/argv", timeout=5).read())["argv"]


def _listed(router: str) -> list[str]:
    return sorted(json.loads(urllib.request.urlopen(router + "/list_workers", timeout=5).read())["urls"])


def _ids(cluster, deployment: str) -> list[str]:
    r = cluster.docker("h1", "ps", "--all", "--filter", f"label=inkctl.deployment={deployment}",
                       "--format", "{{.ID}} {{.Names}} {{.State}}")
    return sorted(x for x in r.stdout.split("\n") if x)


@pytest.fixture
def fleet(cluster, inkctl, inventory, recipe):
    """(recipe(**changes) -> path, inventory, router URL, replica URLs); the fleet is up on the
    first version when the test starts, and down when it ends."""
    inv = inventory("h1", h1={"gpus": "0,1,2,3"})
    env = {"FAKE_ITL": "0.02"}

    def make(name="e2e-roll", **changes):
        base = {"container": {"env": dict(env)}, "fleet": {"router": ROUTER}}
        for k, v in changes.items():
            base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) else v
        return recipe("fleet", name=name, **base)

    first = make()
    r = inkctl("up", first, "--hosts", inv, timeout=240)
    assert r.rc == 0, r
    a = cluster.hosts[0].address
    yield make, inv, f"http://{a}:{ROUTER['port']}", [f"http://{a}:18000", f"http://{a}:18010"]
    inkctl("down", first, "--hosts", inv, timeout=120)


def test_rolling_update_under_load_fails_no_request(cluster, inkctl, fleet):
    make, inv, router, reps = fleet
    assert _listed(router) == reps
    old_ids = {d: _ids(cluster, d) for d in ("e2e-roll-r0", "e2e-roll-r1")}
    router_ids = _ids(cluster, "e2e-roll-router")
    new = make(engine={"args": {"tensor_parallel": 2, "port": 18000, "max_model_len": 4096}})
    # plan, before: each replica's step says what it replaces, against the launch the first up recorded here
    p = inkctl("plan", new, "--hosts", inv)
    assert p.rc == 0, p
    for d in ("e2e-roll-r0", "e2e-roll-r1"):
        part = p.out[p.out.index(f"replica {d[-1]} ({d}):"):]
        assert "against its last local launch (bench-results/launches/" + d in " ".join(part.split()), p.out
        assert "rank 0 (h1):\n        + --max-model-len 4096" in part, p.out
    with Loop(router) as loop:
        time.sleep(1.0)
        r = inkctl("up", new, "--hosts", inv, timeout=240)
        time.sleep(1.0)
    assert r.rc == 0, r
    assert no_traceback(r.out)
    out = " ".join(r.out.split())
    assert "rolling update of e2e-roll: 2 of 2 replicas run another version" in out, r.out
    assert out.index("replica 0 (e2e-roll-r0) runs the new version") < out.index("replica 1 (e2e-roll-r1): out of the router")
    assert "+ --max-model-len 4096" in r.out  # what changes, per rank
    assert loop.failed == 0, loop.errors[:5]
    assert loop.ok >= 20, loop.ok
    for u in reps:
        argv = _argv(u)
        assert argv[argv.index("--max-model-len") + 1] == "4096", argv
    for d, before in old_ids.items():
        now = _ids(cluster, d)
        assert len(now) == 1 and now[0].endswith("running") and now != before, (before, now)  # old ones gone
    assert _ids(cluster, "e2e-roll-router") == router_ids  # the router kept serving, untouched
    assert _listed(router) == reps
    # the copies of the old version are gone too
    assert not any(p.endswith(".rollback") for p in os.listdir(cluster.host("h1").state_dir))
    # the rolling path recorded what each replica runs now: plan of the same recipe replaces nothing
    p = inkctl("plan", new, "--hosts", inv)
    assert " ".join(p.out.split()).count("the same version as its last local launch") == 2, p.out


def test_a_new_version_that_fails_to_boot_is_rolled_back(cluster, inkctl, fleet):
    make, inv, router, reps = fleet
    r1_before = _ids(cluster, "e2e-roll-r1")
    bad = make(engine={"args": {"tensor_parallel": 2, "port": 18000, "max_model_len": 4096}},
               container={"env": {"FAKE_ITL": "0.02", "FAKE_READY_AFTER": "2", "FAKE_CRASH_AFTER": "0.5"}})
    with Loop(router) as loop:
        r = inkctl("up", bad, "--hosts", inv, timeout=240)
    assert r.rc == 1, r
    assert no_traceback(r.out)
    out = " ".join(r.out.split())
    assert "rolling update of e2e-roll stopped at replica 0 (e2e-roll-r0): its new version failed" in out, r.out
    assert "e2e-roll-r0: back on the old version, in the router" in out
    assert "untouched, on the old version, in the router: e2e-roll-r1" in out
    assert "--max-model-len" not in _argv(reps[0])  # the old version again
    assert _ids(cluster, "e2e-roll-r1") == r1_before  # untouched: the same container
    assert _listed(router) == reps
    assert loop.failed == 0, loop.errors[:5]


def test_ctrl_c_mid_rollout_leaves_a_consistent_fleet(cluster, inkctl, fleet):
    make, inv, router, reps = fleet
    slow = make(engine={"args": {"tensor_parallel": 2, "port": 18000, "max_model_len": 4096}},
                container={"env": {"FAKE_ITL": "0.02", "FAKE_READY_AFTER": "4"}})
    p = inkctl.start("up", slow, "--hosts", inv, env={"PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    # progress goes to stderr, the summary to stdout
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stderr.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any("replica 1 (e2e-roll-r1): drained" in x for x in list(lines)):
        time.sleep(0.1)
    time.sleep(1.5)  # replica 1's new version is booting (FAKE_READY_AFTER)
    p.send_signal(2)
    try:
        p.wait(120)
    finally:
        if p.poll() is None:
            p.kill()
    reader.join(10)
    text = " ".join((p.stdout.read() + "".join(lines)).split())
    assert p.returncode == 130, text[-3000:]
    assert "e2e-roll-r1: back on the old version, in the router" in text, text[-3000:]
    assert "on the new version, in the router: e2e-roll-r0" in text
    assert "--max-model-len" in _argv(reps[0]) and "--max-model-len" not in _argv(reps[1])
    assert _listed(router) == reps
    for d in ("e2e-roll-r0", "e2e-roll-r1"):
        assert [x.split()[-1] for x in _ids(cluster, d)] == ["running"]


def _gateway(tmp_path, name: str, second: str) -> Path:
    """A gateway file: alpha on h1's GPUs 0,1 and ``second`` (beta or gamma) on 2,3, each a copy
    of tests/e2e/recipes/gw-beta.yaml serving its own model."""
    import yaml

    from tests.e2e.conftest import RECIPES

    for m in ("alpha", second):
        doc = yaml.safe_load((RECIPES / "gw-beta.yaml").read_text())
        doc.update(name=f"e2e-swap-{m}", model={"repo": f"test/fake-{m}", "served_name": m})
        doc.setdefault("container", {})["env"] = {"FAKE_ITL": "0.02"}
        (tmp_path / f"{m}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    gw = {"name": "e2e-swap", "gateway": {"port": 30095, "prometheus_port": 29015, "health_check_interval_s": 2},
          "models": [{"recipe": "alpha.yaml", "hosts": ["h1"], "gpus": "0,1"},
                     {"recipe": f"{second}.yaml", "hosts": ["h1"], "gpus": "2,3"}]}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(gw, sort_keys=False))
    return p


def test_a_gateway_swap_frees_the_dropped_models_slot_first(cluster, inkctl, inventory, tmp_path):
    """beta dropped and gamma put on its GPUs and port: up drains and removes beta first, then
    starts gamma; alpha keeps answering the whole time, its container untouched."""
    inv = inventory("h1", h1={"gpus": "0,1,2,3,4,5,6,7"})
    first = _gateway(tmp_path, "gw1", "beta")
    r = inkctl("up", first, "--hosts", inv, timeout=300)
    assert r.rc == 0, r
    a = cluster.hosts[0].address
    url = f"http://{a}:30095"
    alpha_ids = _ids(cluster, "e2e-swap-alpha")
    second = _gateway(tmp_path, "gw2", "gamma")
    p = inkctl("plan", second, "--hosts", inv)
    assert p.rc == 0, p
    assert "models no longer in the file go FIRST" in " ".join(p.stdout.split()), p.stdout
    try:
        failed = []
        stop = threading.Event()

        def alpha_loop() -> None:
            while not stop.is_set():
                body = json.dumps({"model": "alpha", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
                req = urllib.request.Request(url + "/v1/chat/completions", body.encode(), {"content-type": "application/json"})
                try:
                    urllib.request.urlopen(req, timeout=30).read()
                except Exception as e:  # noqa: BLE001 - counted
                    failed.append(repr(e)[:200])

        t = threading.Thread(target=alpha_loop, daemon=True)
        t.start()
        try:
            r = inkctl("up", second, "--hosts", inv, timeout=300)
        finally:
            stop.set()
            t.join(60)
        assert r.rc == 0, r
        assert no_traceback(r.out)
        out = " ".join(r.out.split())
        assert "beta at http://" in out and "no longer in the gateway file: off the gateway, draining" in out, r.out
        progress = " ".join(r.stderr.split())  # progress on stderr, in order; the summary is stdout's
        assert progress.index("e2e-swap-beta is no longer in the gateway file: removed") < progress.index("e2e-swap-gamma"), r.stderr
        body = json.dumps({"model": "gamma", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}).encode()
        req = urllib.request.Request(url + "/v1/chat/completions", body, {"content-type": "application/json"})
        assert json.loads(urllib.request.urlopen(req, timeout=30).read())["model"] == "gamma"
        assert _ids(cluster, "e2e-swap-beta") == []
        assert _ids(cluster, "e2e-swap-alpha") == alpha_ids
        assert failed == [], failed[:5]
    finally:
        inkctl("down", second, "--hosts", inv, timeout=120)


def test_a_surge_keeps_every_replica_serving(cluster, inkctl, inventory, fleet):
    """fleet.rollout.surge with room for one more replica (GPUs 4,5): a replica of the new version
    there first, in the router; then the two replaced one at a time; then the extra one out,
    drained and removed. No request fails."""
    make, _inv, router, reps = fleet
    roomy = inventory("h1", h1={"gpus": "0,1,2,3,4,5"})
    new = make(engine={"args": {"tensor_parallel": 2, "port": 18000, "max_model_len": 4096}},
               fleet={"router": ROUTER, "rollout": {"surge": True}})
    p = inkctl("plan", new, "--hosts", roomy)
    assert p.rc == 0 and "first (fleet.rollout.surge): one more replica of the new version, e2e-roll-r2 on h1:4,5" \
        in " ".join(p.stdout.split()), p.stdout
    with Loop(router) as loop:
        time.sleep(1.0)
        r = inkctl("up", new, "--hosts", roomy, timeout=300)
        time.sleep(1.0)
    assert r.rc == 0, r
    progress = " ".join(r.stderr.split())
    assert progress.index("surge: e2e-roll-r2 serves and is in the router") < progress.index(
        "replica 0 (e2e-roll-r0): out of the router"), r.stderr
    assert progress.index("replica 1 (e2e-roll-r1) runs the new version") < progress.index(
        "surge: e2e-roll-r2 out of the router, drained and removed"), r.stderr
    assert loop.failed == 0, loop.errors[:5]
    for u in reps:
        assert "--max-model-len" in _argv(u)
    assert _ids(cluster, "e2e-roll-r2") == []
    assert _listed(router) == reps


def test_rolling_update_behind_sglang_router(cluster, inkctl, inventory, recipe):
    """sglang-router 0.3 takes a replica out and back in through DELETE/POST /workers, queued:
    the rollout waits for each change; no request fails."""
    inv = inventory("h1", h1={"gpus": "0,1,2,3"})
    first = recipe("fleet", name="e2e-rolls", container={"env": {"FAKE_ITL": "0.02"}})
    r = inkctl("up", first, "--hosts", inv, timeout=240)
    assert r.rc == 0, r
    a = cluster.hosts[0].address
    router, reps = f"http://{a}:30080", [f"http://{a}:18000", f"http://{a}:18010"]
    try:
        new = recipe("fleet", name="e2e-rolls", container={"env": {"FAKE_ITL": "0.02"}},
                     engine={"args": {"tensor_parallel": 2, "port": 18000, "max_model_len": 4096}})
        with Loop(router) as loop:
            time.sleep(1.0)
            r = inkctl("up", new, "--hosts", inv, timeout=240)
            time.sleep(1.0)
        assert r.rc == 0, r
        assert "rolling update of e2e-rolls: 2 of 2 replicas" in " ".join(r.stderr.split()), r.stderr
        assert loop.failed == 0, loop.errors[:5]
        assert loop.ok >= 20
        for u in reps:
            assert "--max-model-len" in _argv(u)
        listed = json.loads(urllib.request.urlopen(router + "/workers", timeout=5).read())["workers"]
        assert sorted((w["url"], w["is_healthy"]) for w in listed) == [(u, True) for u in reps]
    finally:
        inkctl("down", first, "--hosts", inv, timeout=120)
