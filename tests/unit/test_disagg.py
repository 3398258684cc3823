"""Prefill/decode disaggregation on paper: the roles' replicas over hosts and GPU subsets, each
role's engine flags, the routers' P/D command lines, what validate catches; and the fake
engine's two-role protocol driven as the real routers drive it (loopback subprocesses). The
addresses in plans are in the documentation range: only labels, never contacted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from inkctl.errors import InkctlError, RecipeInvalid
from inkctl.plan.replicas.disagg import build_disagg
from inkctl.recipe.hosts import Host
from inkctl.recipe.checks.rules import recipe_findings
from inkctl.recipe.reading.source import load_recipe

from tests.unit.openai_fake import ROOT, free_port

RECIPE = Path(__file__).resolve().parents[1] / "e2e" / "recipes" / "disagg.yaml"


def _recipe(tmp_path, edit=None):
    doc = yaml.safe_load(RECIPE.read_text())
    if edit:
        edit(doc)
    p = tmp_path / "disagg.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_recipe(p).recipe


def _vllm(doc):
    doc["engine"]["kind"] = "vllm"


def _argv(plan):
    return list(next(s.argv for st in plan.stages for s in st.steps if getattr(s, "container", None)))


def _errors(tmp_path, edit=None):
    """The errors loading the recipe reports (validate's), each (field path, message); [] when it loads."""
    try:
        r = _recipe(tmp_path, edit)
    except RecipeInvalid as e:
        return [(p.path, p.message) for p in e.problems if p.severity == "error"]
    return [(p.path, p.message) for p in recipe_findings(r) if p.severity == "error"]


def test_roles_share_a_host_on_their_own_gpus_and_ports(tmp_path):
    def edit(doc):
        doc["fleet"]["disagg"]["prefill"]["replicas"] = 2
        doc["fleet"]["disagg"]["decode"] = {"replicas": 1, "gpus_per_host": 2, "tensor_parallel": 2}

    f = build_disagg(_recipe(tmp_path, edit), [Host(name="box", address="192.0.2.9", gpus="0,1,2,3")])
    assert [(r.role, r.index, r.name, r.hosts[0].gpus) for r in f.replicas] == [
        ("prefill", 0, "e2e-pd-p0", "0"), ("prefill", 1, "e2e-pd-p1", "1"), ("decode", 0, "e2e-pd-d0", "2,3")]
    assert [r.recipe.engine.args.port for r in f.replicas] == [18100, 18110, 18120]
    assert [r.label for r in f.replicas] == ["prefill replica 0", "prefill replica 1", "decode replica 0"]
    p1, d0 = _argv(f.replicas[1].plan), _argv(f.replicas[2].plan)
    assert p1[p1.index("--disaggregation-mode") + 1] == "prefill"
    assert p1[p1.index("--disaggregation-bootstrap-port") + 1] == "19008"  # 18998 + one port_stride
    assert d0[d0.index("--disaggregation-mode") + 1] == "decode" and "--disaggregation-bootstrap-port" not in d0
    assert d0[d0.index("--tp-size") + 1] == "2" and '"device=2,3"' in d0
    router = _argv(f.router)
    assert router[router.index("--pd-disaggregation"):router.index("--policy")] == [
        "--pd-disaggregation", "--prefill", "http://192.0.2.9:18100", "18998",
        "--prefill", "http://192.0.2.9:18110", "19008", "--decode", "http://192.0.2.9:18120"]
    assert "--worker-urls" not in router and f.disagg


def test_a_role_replica_is_checked_by_health_only_the_router_by_a_completion(tmp_path):
    f = build_disagg(_recipe(tmp_path), [Host(name="a", address="192.0.2.1", gpus="0,1")])
    for rep in f.replicas:
        assert "smoke" not in [st.name for st in rep.plan.stages]
        waits = [s for st in rep.plan.stages for s in st.steps if type(s).__name__ == "WaitHealth"]
        assert waits and all(not w.answer_url for w in waits)
    assert any(getattr(s, "answer_url", "") for st in f.router.stages for s in st.steps)


def test_vllm_roles_get_nixl_and_the_vllm_router_its_pd_mode(tmp_path):
    def edit(doc):
        _vllm(doc)
        doc["fleet"]["router"]["kind"] = "vllm"

    f = build_disagg(_recipe(tmp_path, edit), [Host(name="a", address="192.0.2.1"), Host(name="b", address="192.0.2.2")])
    assert [(r.name, r.hosts[0].name) for r in f.replicas] == [("e2e-pd-p0", "a"), ("e2e-pd-d0", "b")]
    for rep in f.replicas:
        argv = _argv(rep.plan)
        assert json.loads(argv[argv.index("--kv-transfer-config") + 1]) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        assert rep.recipe.container.env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "18998"
        assert rep.recipe.container.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == rep.hosts[0].ssh_address
    router = _argv(f.router)
    assert router[router.index("--entrypoint") + 1] == "vllm-router"
    assert router[router.index("--vllm-pd-disaggregation"):router.index("--policy")] == [
        "--vllm-pd-disaggregation", "--prefill", "http://192.0.2.1:18100", "--decode", "http://192.0.2.2:18100"]


def test_placeholders_name_every_role_replica_its_own_host(tmp_path):
    f = build_disagg(_recipe(tmp_path))
    assert [r.hosts[0].name for r in f.replicas] == ["host0", "host1"]
    assert "<host1.address>" in " ".join(_argv(f.router))


def test_roles_that_do_not_fit_are_located(tmp_path):
    def edit(doc):
        doc["fleet"]["disagg"]["decode"]["replicas"] = 2

    with pytest.raises(InkctlError) as e:
        build_disagg(_recipe(tmp_path, edit), [Host(name="a", address="192.0.2.1", gpus="0,1")])
    assert "fleet.disagg.decode.replicas: 2 decode replicas" in e.value.message and "1 replica placed" in e.value.message

    def listed(doc):
        doc["fleet"]["disagg"]["decode"]["hosts"] = ["nope"]

    with pytest.raises(InkctlError, match="fleet.disagg.decode.hosts: 'nope' is not a host"):
        build_disagg(_recipe(tmp_path, listed), [Host(name="a", address="192.0.2.1", gpus="0,1")])


@pytest.mark.parametrize("edit, path, words", [
    (lambda d: d["fleet"]["disagg"]["transfer"].pop("backend"), "fleet.disagg.transfer.backend", "no KV transfer backend"),
    (lambda d: d["fleet"]["disagg"]["transfer"].update(backend="mooncake"), "fleet.disagg.transfer.backend",
     "RDMA only, but network.rdma is off"),
    (lambda d: (_vllm(d), d["fleet"]["disagg"]["transfer"].update(backend="mooncake")), "fleet.disagg.transfer.backend",
     "vllm has no mooncake"),
    (lambda d: d["fleet"]["disagg"]["decode"].update(args=["--model-path", "other/model"]), "fleet.disagg.decode.args",
     "the roles serve different models"),
    (lambda d: d["fleet"]["disagg"]["prefill"].update(args=["--disaggregation-mode", "decode"]), "fleet.disagg.prefill.args",
     "is written by inkctl"),
    (lambda d: d["fleet"]["disagg"]["transfer"].update(bootstrap_port=18110), "fleet.disagg.transfer.bootstrap_port",
     "bootstrap port 18110 is also the API port"),
    (lambda d: d["fleet"]["disagg"]["transfer"].update(bootstrap_port=30090), "fleet.disagg.transfer.bootstrap_port",
     "is also the fleet.router.port"),
    (lambda d: d["fleet"].update(replicas=2), "fleet.replicas", "each role has its own count"),
    (lambda d: d["fleet"]["disagg"]["decode"].update(tensor_parallel=4), "fleet.disagg.decode.tensor_parallel",
     "needs more GPUs"),
])
def test_validate_finds_what_users_get_wrong(tmp_path, edit, path, words):
    found = _errors(tmp_path, edit)
    assert any(p == path and words in m for p, m in found), found


def test_a_good_pd_recipe_has_no_errors(tmp_path):
    assert _errors(tmp_path) == []

    def rdma(doc):
        doc["fleet"]["disagg"]["transfer"].update(backend="mooncake")
        doc["network"] = {"rdma": True}
    assert _errors(tmp_path, rdma) == []


# -- the fake engine's two roles, driven as the routers drive them

class _Engine:
    def __init__(self, *argv, env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        e = dict(os.environ, PYTHONPATH=str(ROOT), FAKE_TOKEN_DELAY="0.002", FAKE_TTFT="0.01", **(env or {}))
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.cluster.fake_engine", *argv, "--host", "127.0.0.1",
                                      "--port", str(self.port)], env=e, cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=1, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, "the fake engine did not come up"
            time.sleep(0.05)

    def post(self, body, timeout=10):
        return httpx.post(self.url + "/v1/chat/completions", json=body, timeout=timeout, trust_env=False)

    def pd(self):
        return httpx.get(self.url + "/inkctl/fake/pd", timeout=5, trust_env=False).json()

    def close(self):
        self.proc.kill()
        self.proc.wait()


MSG = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


def test_fake_sglang_decode_continues_from_the_prefill_room():
    boot = free_port()
    p = _Engine("sglang", "--model-path", "fake", "--disaggregation-mode", "prefill",
                "--disaggregation-transfer-backend", "nixl", "--disaggregation-bootstrap-port", str(boot))
    d = _Engine("sglang", "--model-path", "fake", "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl",
                env={"FAKE_PD_WAIT_S": "1"})
    try:
        assert p.post(MSG).status_code == 400 and d.post(MSG).status_code == 400  # no room: only a P/D router sends them
        body = {**MSG, "bootstrap_host": "127.0.0.1", "bootstrap_port": boot, "bootstrap_room": 12345}
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as ex:  # at once, as sglang-router sends them
            fp, fd = ex.submit(p.post, body), ex.submit(d.post, body)
            rp, rd = fp.result(), fd.result()
        assert rp.status_code == 200 and rd.status_code == 200
        assert rd.json()["usage"]["completion_tokens"] == 4 and rp.json()["usage"]["completion_tokens"] == 1
        assert p.pd()["prefilled"] == 1 and d.pd()["decoded"] == 1
        lost = d.post({**body, "bootstrap_room": 999})  # a room no prefill filled: the transfer fails
        assert lost.status_code == 500 and "KV transfer failed" in lost.text
    finally:
        p.close()
        d.close()


def test_fake_vllm_decode_reads_the_blocks_the_prefill_names():
    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    side = free_port()
    p = _Engine("vllm", "serve", "fake", "--served-model-name", "fake", "--kv-transfer-config", kv,
                env={"VLLM_NIXL_SIDE_CHANNEL_PORT": str(side), "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1"})
    d = _Engine("vllm", "serve", "fake", "--served-model-name", "fake", "--kv-transfer-config", kv,
                env={"VLLM_NIXL_SIDE_CHANNEL_PORT": str(free_port())})
    try:
        first = p.post({**MSG, "max_tokens": 1, "stream": False, "kv_transfer_params": {
            "do_remote_decode": True, "do_remote_prefill": False}})
        params = first.json()["kv_transfer_params"]
        assert params["do_remote_prefill"] and params["remote_port"] == side and params["remote_host"] == "127.0.0.1"
        second = d.post({**MSG, "kv_transfer_params": params})
        assert second.status_code == 200 and second.json()["usage"]["completion_tokens"] == 4
        assert p.pd()["prefilled"] == 1 and d.pd()["decoded"] == 1
        assert d.post(MSG).status_code == 200  # kv_both: a plain request is served as usual
    finally:
        p.close()
        d.close()


def test_export_k8s_writes_one_leaderworkerset_per_role_and_a_pd_router(tmp_path):
    from inkctl.export.k8s import K8sOptions
    from inkctl.export.k8s_check import check_all
    from inkctl.export.k8s_disagg import export_disagg

    def edit(doc):
        doc["fleet"]["disagg"]["decode"]["replicas"] = 3

    m = export_disagg(_recipe(tmp_path, edit), K8sOptions())
    docs = dict(m.documents)
    assert {"prefill-leaderworkerset.yaml", "decode-leaderworkerset.yaml", "router-deployment.yaml"} <= set(docs)
    p, d = docs["prefill-leaderworkerset.yaml"], docs["decode-leaderworkerset.yaml"]
    assert (p["metadata"]["name"], p["spec"]["replicas"]) == ("e2e-pd-prefill", 1)
    assert (d["metadata"]["name"], d["spec"]["replicas"]) == ("e2e-pd-decode", 3)
    pod = p["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert pod["metadata"]["annotations"]["sglang.ai/bootstrap-port"] == "18998"
    args = pod["spec"]["containers"][0]["args"]
    assert args[args.index("--disaggregation-mode") + 1] == "prefill"
    r = docs["router-deployment.yaml"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--pd-disaggregation" in r and "--selector" not in r
    assert r[r.index("--prefill-selector") + 1] == "leaderworkerset.sigs.k8s.io/name=e2e-pd-prefill"
    assert r[r.index("--decode-selector") + 1] == "leaderworkerset.sigs.k8s.io/name=e2e-pd-decode"
    assert check_all([doc for _, doc in m.documents]) == []


def test_up_removes_the_role_replicas_the_recipe_no_longer_has(tmp_path):
    from inkctl.plan.replicas.disagg import retired_role_replica

    def edit(doc):
        doc["fleet"]["disagg"]["decode"]["replicas"] = 2

    f = build_disagg(_recipe(tmp_path, edit), [Host(name="a", address="192.0.2.1", gpus="0,1,2")])
    gone = {d: retired_role_replica(f, d) for d in (
        "e2e-pd-p0", "e2e-pd-p1", "e2e-pd-d1", "e2e-pd-d2", "e2e-pd-r0", "e2e-pd-router", "e2e-pdx-p3", "e2e-pd-pp")}
    assert gone == {"e2e-pd-p0": False, "e2e-pd-p1": True, "e2e-pd-d1": False, "e2e-pd-d2": True,
                    "e2e-pd-r0": True, "e2e-pd-router": False, "e2e-pdx-p3": False, "e2e-pd-pp": False}
