"""A fleet end to end: replicas of the fake engine behind the REAL sglang-router (PyPI wheel in
an image built for the test hosts), on a cluster of five docker hosts with 8 H200s each.

- 2 replicas x 2 hosts (h1..h4, two GPUs each) and 2 replicas on one host (h5, GPUs 0-3);
- a streamed completion through the router; requests reach both replicas (their /metrics count);
- kill one replica's head: the next 20 requests through the router all succeed;
  ``watch --restart`` brings back only that replica, the others' containers untouched;
- cut a host of one replica: the router keeps serving;
- ``bench`` through the router records replicas and policy; ``top``; ``down`` leaves nothing;
- bad input (more replicas than hosts or GPUs, an unknown router kind): located, nothing started;
- the real vllm-router in front of two replicas; fleet.replicas lowered to 1: up removes the
  second replica, the first keeps running untouched;
- a gateway file: two models on GPU subsets of one host behind one vllm-router endpoint that
  routes by the request's model; each model's requests reach its own engine.
"""

from __future__ import annotations

import json
import subprocess
import os
import threading
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from tests.e2e.conftest import containers, no_traceback

pytestmark = pytest.mark.cluster

PROFILES = {f"h{i}": "h200x8" for i in range(1, 6)}


@pytest.fixture(scope="module")
def cluster():
    """Five docker hosts, all 8x H200, and the router image on them: a cluster of this module's
    own (net id INKCTL_E2E_NET_ID + 100), so the session's 4-host cluster keeps its shape for
    the other modules; removed when the module ends."""
    if os.geteuid() != 0:
        pytest.skip("the test cluster needs root (network namespaces, dockerd)")
    from tests.cluster import Cluster
    from tests.cluster import router_image

    c = Cluster.up(5, podman_hosts=(), profiles=PROFILES, net_id=int(os.environ.get("INKCTL_E2E_NET_ID", "0")) + 100)
    router_image.load(c, [h.name for h in c.hosts])
    router_image.load(c, ["h5"], kind="vllm")  # vllm-router: the vllm fleet and the gateway, on h5
    yield c
    c.down()


def _chat(url: str, prompt: str, max_tokens: int = 4, stream: bool = False, timeout: float = 20,
          model: str = "fake") -> dict | str:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "stream": stream}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        text = r.read().decode()
    return text if stream else json.loads(text)


def _served(url: str) -> float:
    """Requests an engine has finished, from its own /metrics (the e2e latency histogram's count)."""
    from inkctl.client.prometheus import parse
    from inkctl.recipe.engine_registry import spec_of

    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        h = parse(r.read().decode()).histogram(tuple(spec_of("vllm").metrics.e2e))
    return h.count if h else 0.0


def _ids(cluster, host: str, deployment: str) -> list[str]:
    r = cluster.docker(host, "ps", "--all", "--filter", f"label=inkctl.deployment={deployment}", "--format", "{{.ID}} {{.Names}}")
    return sorted(r.stdout.split("\n"))


def _fleet_inv(inventory, *names, gpus="0,1"):
    return inventory(*names, **{n: {"gpus": gpus} for n in names})


def test_two_by_two_through_the_router(cluster, inkctl, inventory, recipe):
    inv = _fleet_inv(inventory, "h1", "h2", "h3", "h4")
    rec = recipe("fleet", name="e2e-fleet22", hardware={"nodes": 2},
                 engine={"multinode": "native", "master_port": 29611, "args": {"tensor_parallel": 4}},
                 fleet={"router": {"policy": "round_robin"}})
    r = inkctl("up", rec, "--hosts", inv, timeout=240)
    assert r.rc == 0, r
    assert "fleet e2e-fleet22 is up" in r.stdout and no_traceback(r.out)
    a = cluster.hosts[0].address
    url = f"http://{a}:30080"
    assert "through the router" in r.stdout
    for h, dep in (("h1", "e2e-fleet22-r0"), ("h2", "e2e-fleet22-r0"), ("h3", "e2e-fleet22-r1"), ("h4", "e2e-fleet22-r1")):
        assert containers(cluster, h, dep) == [f"inkctl-{dep}-r{0 if h in ('h1', 'h3') else 1} running"]
    assert containers(cluster, "h1", "e2e-fleet22-router") == ["inkctl-e2e-fleet22-router-r0 running"]
    # requests reach both replicas (round robin: half each)
    heads = [f"http://{cluster.hosts[0].address}:18000", f"http://{cluster.hosts[2].address}:18000"]
    before = [_served(u) for u in heads]
    for i in range(16):
        assert "choices" in _chat(url, f"{i} distinct prompt number {i * 7919} about something else")
    after = [_served(u) for u in heads]
    assert [b - a_ for a_, b in zip(before, after)] == [8, 8], (before, after)

    st = inkctl("status", rec, "--hosts", inv, "-o", "json")
    assert st.rc == 0, st
    doc = json.loads(st.stdout)
    assert [g["group"] for g in doc["groups"]] == ["replica 0", "replica 1", "router"]
    assert all(g["state"] == "up" for g in doc["groups"])

    # the same again changes nothing
    again = inkctl("up", rec, "--hosts", inv, timeout=120)
    assert again.rc == 0 and "already up" in again.stdout, again

    # cut a host of replica 1: the router keeps serving from replica 0
    cluster.cut("h4")
    try:
        time.sleep(0.5)
        ok = 0
        for i in range(10):
            try:
                _chat(url, f"after the cut {i}", timeout=30)
                ok += 1
            except OSError:
                pass
        assert ok == 10
    finally:
        cluster.heal("h4")

    d = inkctl("down", rec, "--hosts", inv, timeout=120)
    assert d.rc == 0, d
    for h in ("h1", "h2", "h3", "h4"):
        assert containers(cluster, h) == []


def test_one_host_two_replicas_kill_restart_bench_top(cluster, inkctl, inventory, recipe, tmp_path):
    inv = inventory("h5", h5={"gpus": "0,1,2,3"})
    rec = recipe("fleet", name="e2e-fleet1h", container={"env": {"FAKE_ITL": "0.02"}})
    r = inkctl("up", rec, "--hosts", inv, timeout=240)
    assert r.rc == 0, r
    a = cluster.hosts[4].address
    url = f"http://{a}:30080"
    r0, r1 = f"http://{a}:18000", f"http://{a}:18010"
    # the replicas' GPUs are disjoint subsets of h5's, their ports apart
    for name, gpus in (("inkctl-e2e-fleet1h-r0-r0", "0,1"), ("inkctl-e2e-fleet1h-r1-r0", "2,3")):
        got = cluster.docker("h5", "inspect", "--format", "{{json .HostConfig.DeviceRequests}}", name, check=True).stdout
        assert json.loads(got)[0]["DeviceIDs"] == gpus.split(","), got
    argv1 = json.loads(urllib.request.urlopen(r1 + "/inkctl/fake/argv", timeout=5).read())
    assert argv1["argv"][argv1["argv"].index("--port") + 1] == "18010"

    before_r1 = _ids(cluster, "h5", "e2e-fleet1h-r1")
    router_before = _ids(cluster, "h5", "e2e-fleet1h-router")
    # kill replica 0's head: the next 20 requests through the router all succeed
    cluster.docker("h5", "kill", "inkctl-e2e-fleet1h-r0-r0", check=True)
    answers = [_chat(url, f"after the kill {i}", timeout=30) for i in range(20)]
    assert all("choices" in x for x in answers)

    # watch --restart restores only replica 0
    p = inkctl.start("watch", rec, "--hosts", inv, "--restart", "--interval", "0.5", "--backoff", "0", "-o", "json")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any('"restarted"' in x for x in list(lines)):
            time.sleep(0.25)
    finally:
        p.send_signal(2)
        p.wait(60)
        reader.join(10)
    events = [json.loads(x) for x in lines if x.startswith("{")]
    kinds = [(e["event"], e["message"].split(":")[0]) for e in events if e["event"] in ("failure", "restart", "restarted")]
    assert kinds[:3] == [("failure", "e2e-fleet1h-r0"), ("restart", "restarting e2e-fleet1h-r0 in 0 s"),
                         ("restarted", "e2e-fleet1h-r0 is up again")], events
    assert containers(cluster, "h5", "e2e-fleet1h-r0") == ["inkctl-e2e-fleet1h-r0-r0 running"]
    assert urllib.request.urlopen(r0 + "/health", timeout=5).status == 200
    assert _ids(cluster, "h5", "e2e-fleet1h-r1") == before_r1  # untouched: same container ids
    assert _ids(cluster, "h5", "e2e-fleet1h-router") == router_before

    # bench through the router records the replica count and the policy
    b = inkctl("bench", rec, "--hosts", inv, "-c", "4", "-n", "8", "--output-len", "8", "--input-len", "16",
               "--results-dir", tmp_path / "res", timeout=180)
    assert b.rc == 0, b
    res = [json.loads(f.read_text()) for f in (tmp_path / "res").rglob("*.json") if f.name != "run.json"]
    assert res and res[0]["inkctl"]["fleet"] == {"replicas": 2, "router": "sglang", "policy": "cache_aware", "url": url}

    t = inkctl("top", rec, "--hosts", inv, "--count", "2", "--interval", "0.5", "-o", "json")
    assert t.rc == 0, t
    rows = json.loads(t.stdout.strip().splitlines()[-1])["rows"]
    assert [x["group"] for x in rows] == ["replica 0", "replica 1", "router"]
    assert rows[1]["requests"] >= 1 and rows[2]["requests"] >= 1

    d = inkctl("down", rec, "--hosts", inv, timeout=120)
    assert d.rc == 0, d
    assert containers(cluster, "h5") == []


@pytest.mark.parametrize("change,inv_hosts,expect", [
    ({"fleet": {"replicas": 3}}, ("h1",), "fleet.replicas: 3 replicas"),
    ({"fleet": {"replicas": 2, "router": {"kind": "nginx"}}}, ("h1",), "fleet.router.kind"),
])
def test_bad_fleet_starts_nothing(cluster, inkctl, inventory, recipe, change, inv_hosts, expect):
    inv = inventory(*inv_hosts, **{n: {"gpus": "0,1,2,3"} for n in inv_hosts})
    rec = recipe("fleet", name="e2e-fleetbad", **change)
    r = inkctl("up", rec, "--hosts", inv, timeout=60)
    assert r.rc != 0 and expect in r.out, r
    assert f"{rec}:" in r.out  # located in the file
    assert no_traceback(r.out)
    assert containers(cluster, "h1") == []


def test_a_failing_replica_leaves_nothing(cluster, inkctl, inventory, recipe):
    """Replica 1's port is taken on its host: preflight stops it; replica 0, started meanwhile or
    not, is removed too, and no router is started: nothing half-done."""
    inv = _fleet_inv(inventory, "h1", "h2")
    rec = recipe("fleet", name="e2e-fleetfail")
    squatter = "fleet-test-squatter"
    cluster.docker("h2", "run", "-d", "--name", squatter, "--network", "host", "--entrypoint", "python3",
                   "inkctl-fake-engine:latest", "-m", "http.server", "18000", check=True)
    try:
        r = inkctl("up", rec, "--hosts", inv, timeout=180)
        assert r.rc != 0, r
        assert "replica e2e-fleetfail-r1" in r.out and "18000" in r.out, r
        assert no_traceback(r.out)
        for h in ("h1", "h2"):
            assert containers(cluster, h) == []
    finally:
        cluster.docker("h2", "rm", "-f", squatter)


def test_vllm_router_then_fewer_replicas(cluster, inkctl, inventory, recipe):
    """The real vllm-router in front of two replicas on h5; then fleet.replicas 2 -> 1: up
    removes replica 1 (containers and files), replica 0 is untouched, the router is replaced by
    one that knows only replica 0; down leaves nothing."""
    inv = inventory("h5", h5={"gpus": "0,1,2,3"})
    rec = recipe("fleet", name="e2e-fleetv",
                 fleet={"router": {"kind": "vllm", "policy": "round_robin", "port": 30081, "prometheus_port": 29001,
                                   "image": "vllm/vllm-router:latest"}})
    r = inkctl("up", rec, "--hosts", inv, timeout=240)
    assert r.rc == 0, r
    assert "vllm router" in r.stdout and no_traceback(r.out)
    a = cluster.hosts[4].address
    url = f"http://{a}:30081"
    heads = [f"http://{a}:18000", f"http://{a}:18010"]
    router_argv = cluster.docker("h5", "inspect", "--format", "{{json .Config.Entrypoint}} {{json .Args}}",
                                 "inkctl-e2e-fleetv-router-r0", check=True).stdout
    assert '["vllm-router"]' in router_argv and heads[0] in router_argv and heads[1] in router_argv
    before = [_served(u) for u in heads]
    for i in range(8):
        assert "choices" in _chat(url, f"{i} a prompt of its own {i * 104729}")
    after = [_served(u) for u in heads]
    assert [y - x for x, y in zip(before, after)] == [4, 4], (before, after)

    r0 = _ids(cluster, "h5", "e2e-fleetv-r0")
    plan = inkctl("plan", rec, "--hosts", inv, "--set", "fleet.replicas=1")
    assert plan.rc == 0, plan
    assert "e2e-fleetv-r<k>, k >= 1, are removed" in plan.stdout
    assert "docker rm --force '<its containers>'" in plan.stdout
    down1 = inkctl("up", rec, "--hosts", inv, "--set", "fleet.replicas=1", timeout=240)
    assert down1.rc == 0, down1
    assert "e2e-fleetv-r1: no longer in the recipe, removed from h5" in down1.stdout, down1.stdout
    assert containers(cluster, "h5", "e2e-fleetv-r1") == []
    assert cluster.exec("h5", ["test", "-e", "/var/lib/inkctl/e2e-fleetv-r1"]).returncode != 0
    assert _ids(cluster, "h5", "e2e-fleetv-r0") == r0  # untouched
    router_argv = cluster.docker("h5", "inspect", "--format", "{{json .Args}}", "inkctl-e2e-fleetv-router-r0",
                                 check=True).stdout
    assert heads[0] in router_argv and heads[1] not in router_argv
    assert all("choices" in _chat(url, f"after {i}") for i in range(4))
    again = inkctl("up", rec, "--hosts", inv, "--set", "fleet.replicas=1", timeout=120)
    assert again.rc == 0 and "already up" in again.stdout, again

    d = inkctl("down", rec, "--hosts", inv, timeout=120)
    assert d.rc == 0, d
    assert containers(cluster, "h5") == []


def test_gateway_routes_two_models_by_name(cluster, inkctl, inventory):
    """tests/e2e/recipes/gateway.yaml: alpha on h5's GPUs 0,1 and beta on 2,3 behind one
    vllm-router endpoint; each model's requests reach its own engine only; status shows every
    group with its GPUs; up again changes nothing; down leaves nothing."""
    from tests.e2e.conftest import RECIPES

    gw = RECIPES / "gateway.yaml"
    inv = inventory("h5", h5={"gpus": "0,1,2,3,4,5,6,7"})
    r = inkctl("up", gw, "--hosts", inv, timeout=300)
    assert r.rc == 0, r
    assert "gateway e2e-gw is up" in r.stdout and "one streamed completion per model" in r.stdout
    assert no_traceback(r.out) and max(map(len, r.stdout.splitlines())) <= 80, r.stdout
    a = cluster.hosts[4].address
    url = f"http://{a}:30090"
    engines = {"alpha": f"http://{a}:18100", "beta": f"http://{a}:18110"}
    for name, gpus in (("inkctl-e2e-gw-alpha-r0", "0,1"), ("inkctl-e2e-gw-beta-r0", "2,3")):
        got = cluster.docker("h5", "inspect", "--format", "{{json .HostConfig.DeviceRequests}}", name, check=True).stdout
        assert json.loads(got)[0]["DeviceIDs"] == gpus.split(","), got
    # nothing about the engines on the gateway's command line: they are registered with their model
    args = cluster.docker("h5", "inspect", "--format", "{{json .Args}}", "inkctl-e2e-gw-gateway-r0", check=True).stdout
    assert "--enable-igw" in args and "http://" not in args

    before = {m: _served(u) for m, u in engines.items()}
    for i in range(5):
        assert _chat(url, f"alpha question {i}", model="alpha")["model"] == "alpha"
    for i in range(3):
        assert _chat(url, f"beta question {i}", model="beta")["model"] == "beta"
    streamed = _chat(url, "a streamed one", model="beta", stream=True)
    assert '"model": "beta"' in streamed and "[DONE]" in streamed
    after = {m: _served(u) for m, u in engines.items()}
    assert {m: after[m] - before[m] for m in engines} == {"alpha": 5, "beta": 4}, (before, after)

    st = inkctl("status", gw, "--hosts", inv, "-o", "json")
    assert st.rc == 0, st
    doc = json.loads(st.stdout)
    assert [(g["group"], g["gpus"], g["state"]) for g in doc["groups"]] == [
        ("model alpha", "h5:0,1", "up"), ("model beta", "h5:2,3", "up"), ("gateway", "h5", "up")]
    text = inkctl("status", gw, "--hosts", inv)
    assert text.rc == 0 and "model alpha" in text.stdout and "h5:2,3" in text.stdout, text

    # the gateway restarted by hand knows no engine: up registers them again
    cluster.docker("h5", "restart", "inkctl-e2e-gw-gateway-r0", check=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # poll until it answers again (its list is empty now)
        try:
            if urllib.request.urlopen(url + "/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(0.2)
    again = inkctl("up", gw, "--hosts", inv, timeout=180)
    assert again.rc == 0 and "already up" in again.stdout, again
    assert _chat(url, "after the restart", model="alpha")["model"] == "alpha"

    # watch: the gateway answers /health but lists no engine (as a restarted one, without the
    # restart's refused connections: its list emptied through its own API): --restart registers
    # them again; the models' containers and the gateway's are not touched
    groups = [_ids(cluster, "h5", d) for d in ("e2e-gw-alpha", "e2e-gw-beta", "e2e-gw-gateway")]
    p = inkctl.start("watch", gw, "--hosts", inv, "--restart", "--interval", "0.5", "--backoff", "0", "-o", "json")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any('"ok"' in x and "watching gateway" in x for x in list(lines)):
            time.sleep(0.2)
        for engine in engines.values():
            req = urllib.request.Request(f"{url}/workers/{urllib.parse.quote(engine, safe='')}", method="DELETE")
            assert urllib.request.urlopen(req, timeout=10).status < 300
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any('"restarted"' in x for x in list(lines)):
            time.sleep(0.25)
    finally:
        p.send_signal(2)
        p.wait(60)
        reader.join(10)
    events = [json.loads(x) for x in lines if x.startswith("{")]
    failures = [e["message"] for e in events if e["event"] == "failure"]
    assert failures and "router: the gateway lists no engine for alpha" in failures[0], events
    assert any(e["event"] == "restarted" for e in events), events
    assert _chat(url, "after watch", model="beta")["model"] == "beta"
    assert [_ids(cluster, "h5", d) for d in ("e2e-gw-alpha", "e2e-gw-beta", "e2e-gw-gateway")] == groups

    t = inkctl("top", gw, "--hosts", inv, "--count", "1", "-o", "json")
    assert t.rc == 0, t
    rows = json.loads(t.stdout.strip().splitlines()[-1])["rows"]
    assert [x["group"] for x in rows] == ["model alpha", "model beta", "gateway"]
    assert rows[0]["requests"] >= 5 and rows[1]["requests"] >= 4

    d = inkctl("down", gw, "--hosts", inv, timeout=120)
    assert d.rc == 0, d
    assert "gateway e2e-gw is down" in d.stdout
    assert containers(cluster, "h5") == []
    for dep in ("e2e-gw-alpha", "e2e-gw-beta", "e2e-gw-gateway"):
        assert cluster.exec("h5", ["test", "-e", f"/var/lib/inkctl/{dep}"]).returncode != 0, dep


def test_gateway_removes_a_model_its_file_no_longer_lists(cluster, inkctl, inventory, tmp_path):
    """A gateway of three models reduced to two: `plan` shows the removal, `up` removes the
    dropped model's group (found by its inkctl.gateway label) and the gateway no longer lists
    it, the others untouched; `down` with the reduced file removes a group it no longer lists."""
    import shutil

    from tests.e2e.conftest import RECIPES

    for name in ("gw-alpha.yaml", "gw-beta.yaml"):
        shutil.copy(RECIPES / name, tmp_path / name)
    (tmp_path / "gw-gamma.yaml").write_text((RECIPES / "gw-beta.yaml").read_text()
                                            .replace("e2e-gw-beta", "e2e-gw-gamma").replace("beta", "gamma"))
    three = ('name: e2e-gw3\ngateway: {port: 30090, health_check_interval_s: 2}\nmodels:\n'
             '  - {recipe: gw-alpha.yaml, hosts: [h5], gpus: "0,1"}\n'
             '  - {recipe: gw-beta.yaml, hosts: [h5], gpus: "2,3"}\n')
    gw = tmp_path / "gw3.yaml"
    gw.write_text(three + '  - {recipe: gw-gamma.yaml, hosts: [h5], gpus: "4,5"}\n')
    inv = inventory("h5", h5={"gpus": "0,1,2,3,4,5,6,7"})
    r = inkctl("up", gw, "--hosts", inv, timeout=300)
    assert r.rc == 0, r
    a = cluster.hosts[4].address
    url = f"http://{a}:30090"
    assert _chat(url, "hello gamma", model="gamma")["model"] == "gamma"
    kept = [_ids(cluster, "h5", d) for d in ("e2e-gw-alpha", "e2e-gw-beta", "e2e-gw3-gateway")]

    gw.write_text(three)  # gamma dropped
    plan = inkctl("plan", gw, "--hosts", inv)
    assert plan.rc == 0, plan
    assert "models no longer in the gateway file" in plan.stdout
    assert "inkctl.gateway=e2e-gw3" in plan.stdout and "docker rm --force '<its containers>'" in plan.stdout
    r = inkctl("up", gw, "--hosts", inv, timeout=240)
    assert r.rc == 0, r
    assert "e2e-gw-gamma: no longer in the gateway file, removed from h5" in r.stdout, r.stdout
    assert containers(cluster, "h5", "e2e-gw-gamma") == []
    assert cluster.exec("h5", ["test", "-e", "/var/lib/inkctl/e2e-gw-gamma"]).returncode != 0
    assert [_ids(cluster, "h5", d) for d in ("e2e-gw-alpha", "e2e-gw-beta", "e2e-gw3-gateway")] == kept
    listed = json.loads(urllib.request.urlopen(url + "/workers", timeout=10).read())
    assert "18120" not in json.dumps(listed) and "gamma" not in json.dumps(listed), listed
    assert _chat(url, "still here", model="beta")["model"] == "beta"

    # gamma back, then down with the reduced file: it goes too
    gw.write_text(three + '  - {recipe: gw-gamma.yaml, hosts: [h5], gpus: "4,5"}\n')
    assert inkctl("up", gw, "--hosts", inv, timeout=300).rc == 0
    gw.write_text(three)
    d = inkctl("down", gw, "--hosts", inv, timeout=120)
    assert d.rc == 0, d
    assert "e2e-gw-gamma (no longer in the gateway file): removed from h5" in d.stdout, d.stdout
    assert containers(cluster, "h5") == []
    for dep in ("e2e-gw-alpha", "e2e-gw-beta", "e2e-gw-gamma", "e2e-gw3-gateway"):
        assert cluster.exec("h5", ["test", "-e", f"/var/lib/inkctl/{dep}"]).returncode != 0, dep


def test_a_router_in_front_passes_the_api_key_through(cluster, inkctl, inventory, recipe, tmp_path):
    """Issue 29: the real sglang-router in front of guarded engines: a request without the key gets
    their 401 through it, one with the key an answer; up's readiness completion (through the
    router), bench and top send the key; the value shows nowhere."""
    from tests.e2e.test_guarded_endpoints import ENV, KEY, _guarded, _status

    inv = inventory("h5", h5={"gpus": "0,1,2,3"})
    rec = _guarded(recipe, "fleet", "e2e-key-fleet")
    r = inkctl("up", rec, "--hosts", inv, env=ENV, timeout=300)
    assert r.rc == 0, r
    url = f"http://{cluster.hosts[4].address}:30080"
    assert _status(url) == 401
    assert _status(url, KEY) == 200
    b = inkctl("bench", rec, "--hosts", inv, "-c", "2", "-n", "4", "--output-len", "4", "--input-len", "8",
               "--results-dir", tmp_path / "res", env=ENV, timeout=180)
    assert b.rc == 0, b
    t = inkctl("top", rec, "--hosts", inv, "--count", "1", "-o", "json", env=ENV)
    assert t.rc == 0, t
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert KEY not in r.out + b.out + t.out + ps
    d = inkctl("down", rec, "--hosts", inv, env=ENV, timeout=120)
    assert d.rc == 0, d


def test_a_gateway_in_front_of_guarded_models(cluster, inkctl, inventory, tmp_path):
    """Issue 29 with vllm-router (multi-model): both models guarded by the same key; the gateway's
    per-model answers carry it, a request without it gets 401 through the gateway."""
    from tests.e2e.conftest import RECIPES
    from tests.e2e.test_guarded_endpoints import ENV, KEY, _status

    for name in ("gateway.yaml", "gw-alpha.yaml", "gw-beta.yaml"):
        doc = yaml.safe_load((RECIPES / name).read_text())
        if name != "gateway.yaml":
            doc.update(secrets={"API_KEY": {"env": "E2E_API_KEY_SRC"}}, api_key="API_KEY")
        (tmp_path / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    gw = tmp_path / "gateway.yaml"
    inv = inventory("h5", h5={"gpus": "0,1,2,3,4,5,6,7"})
    r = inkctl("up", gw, "--hosts", inv, env=ENV, timeout=300)
    try:
        assert r.rc == 0, r
        url = f"http://{cluster.hosts[4].address}:30090"
        for model in ("alpha", "beta"):
            assert _status(url, model=model) == 401
            assert _status(url, KEY, model=model) == 200
        assert KEY not in r.out
    finally:
        d = inkctl("down", gw, "--hosts", inv, env=ENV, timeout=120)
    assert d.rc == 0, d
