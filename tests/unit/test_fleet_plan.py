"""The fleet on paper: replicas over hosts or GPU subsets, names/ports/state dirs apart, the
router's argv, and bad input located before anything starts. The addresses are in the
documentation range: only labels, never contacted."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from inkctl.errors import InkctlError
from inkctl.plan.replicas.fleet import build_fleet, router_argv
from inkctl.recipe.hosts import Host
from inkctl.recipe.reading.source import load_recipe

RECIPE = Path(__file__).resolve().parents[1] / "e2e" / "recipes" / "fleet.yaml"


def _recipe(tmp_path, **changes):
    doc = yaml.safe_load(RECIPE.read_text())
    for k, v in changes.items():
        doc[k] = {**doc.get(k, {}), **v} if isinstance(v, dict) else v
    p = tmp_path / "fleet.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_recipe(p).recipe


def test_replicas_take_hosts_in_order(tmp_path):
    r = _recipe(tmp_path, hardware={"nodes": 2}, engine={"multinode": "native", "args": {"tensor_parallel": 4, "port": 18000}},
                fleet={"replicas": 2})
    hosts = [Host(name=f"h{i}", address=f"192.0.2.{i}") for i in range(1, 5)]
    f = build_fleet(r, hosts)
    assert [rep.name for rep in f.replicas] == ["e2e-fleet-r0", "e2e-fleet-r1"]
    assert [[h.name for h in rep.hosts] for rep in f.replicas] == [["h1", "h2"], ["h3", "h4"]]
    assert [rep.url for rep in f.replicas] == ["http://192.0.2.1:18000", "http://192.0.2.3:18000"]
    names = [c.name for rep in f.replicas for c in rep.plan.containers]
    assert len(set(names)) == 4
    dirs = {h.state_dir for rep in f.replicas for h in rep.plan.hosts}
    assert dirs == {"/var/lib/inkctl/e2e-fleet-r0", "/var/lib/inkctl/e2e-fleet-r1"}
    assert f.router.hosts[0].name == "h1" and f.url == "http://192.0.2.1:30080"


def test_gpu_subsets_of_one_host_shift_ports(tmp_path):
    r = _recipe(tmp_path, fleet={"replicas": 4})
    f = build_fleet(r, [Host(name="box", address="192.0.2.9", gpus="0,1,2,3,4,5,6,7")])
    assert [rep.hosts[0].gpus for rep in f.replicas] == ["0,1", "2,3", "4,5", "6,7"]
    assert [rep.recipe.engine.args.port for rep in f.replicas] == [18000, 18010, 18020, 18030]
    run = next(s for st in f.replicas[3].plan.stages for s in st.steps if getattr(s, "container", None))
    assert "--gpus" in run.argv and '"device=6,7"' in run.argv
    assert "18030" in run.argv
    argv = f.router.stages[0].steps[0].argv
    assert [a for a in argv if a.startswith("http://")] == [f"http://192.0.2.9:180{i}0" for i in range(4)]


def test_router_argv_policy_and_ports(tmp_path):
    r = _recipe(tmp_path, fleet={"replicas": 1, "router": {"kind": "sglang", "policy": "round_robin", "port": 31000}})
    argv = router_argv(r.fleet.router, ["http://a:1"], "fake")
    assert argv[:3] == ["python3", "-m", "sglang_router.launch_router"]
    assert argv[argv.index("--policy") + 1] == "round_robin"
    assert argv[argv.index("--port") + 1] == "31000"
    v = _recipe(tmp_path, fleet={"replicas": 1, "router": {"kind": "vllm"}})
    assert router_argv(v.fleet.router, ["http://a:1"], "fake")[0] == "vllm-router"
    assert v.fleet.router.policy_name == "cache_aware"


def test_replica_recipe_hash_ignores_the_router(tmp_path):
    a = _recipe(tmp_path, fleet={"replicas": 2, "router": {"policy": "random"}})
    b = _recipe(tmp_path, fleet={"replicas": 2, "router": {"policy": "round_robin"}})
    hosts = [Host(name="h1", address="192.0.2.1"), Host(name="h2", address="192.0.2.2")]
    fa, fb = build_fleet(a, hosts), build_fleet(b, hosts)
    assert [x.plan.recipe_hash for x in fa.replicas] == [x.plan.recipe_hash for x in fb.replicas]
    assert fa.router.recipe_hash != fb.router.recipe_hash


@pytest.mark.parametrize("replicas,hosts,text", [
    (3, [Host(name="h1", address="a", gpus="0,1,2,3")], "3 replicas of 1 host x 2 GPUs need more than the inventory has"),
    (4, [Host(name="h1", address="a"), Host(name="h2", address="b"), Host(name="h3", address="c")],
     "4 replicas of 1 host x 2 GPUs need more than the inventory has: its 3 hosts hold 3 replicas"),
    (1, [Host(name="h1", address="a", gpus="0")], "fewer than one replica needs"),
])
def test_bad_inventories_are_located(tmp_path, replicas, hosts, text):
    r = _recipe(tmp_path, fleet={"replicas": replicas})
    with pytest.raises(InkctlError) as e:
        build_fleet(r, hosts, source="fleet.yaml:14:13")
    assert e.value.message.startswith("fleet.yaml:14:13: fleet.replicas: ")
    assert text in e.value.message


def test_unknown_router_kind_and_policy_are_recipe_errors(tmp_path):
    from inkctl.errors import RecipeInvalid

    with pytest.raises(RecipeInvalid) as e:
        _recipe(tmp_path, fleet={"replicas": 2, "router": {"kind": "nginx"}})
    p = e.value.problems[0]
    assert p.path == "fleet.router.kind" and p.line is not None
    with pytest.raises(RecipeInvalid) as e:
        _recipe(tmp_path, fleet={"replicas": 2, "router": {"kind": "sglang", "policy": "consistent_hash"}})
    assert "consistent_hash" in e.value.problems[0].message


def test_router_port_clash_with_a_replica(tmp_path):
    r = _recipe(tmp_path, fleet={"replicas": 1, "router": {"port": 18000}})
    with pytest.raises(InkctlError, match="replica 0's API port"):
        build_fleet(r, [Host(name="h1", address="a")])


def test_placeholder_plan_names_hosts_per_replica(tmp_path):
    r = _recipe(tmp_path, fleet={"replicas": 3})
    f = build_fleet(r, None)
    assert [rep.plan.hosts[0].name for rep in f.replicas] == ["host0", "host1", "host2"]
    assert f.replicas[2].url == "http://<host2.address>:18000"


def test_export_k8s_of_a_fleet(tmp_path):
    """LeaderWorkerSet replicas = fleet.replicas; the router a Deployment + Service that finds the
    leaders by label (pods only it may read), all valid against the CRD and Kubernetes' schemas."""
    pytest.importorskip("kubernetes_validate")
    from inkctl.export.k8s import K8sOptions, export_k8s
    from inkctl.export.k8s_check import check_all

    r = _recipe(tmp_path, fleet={"replicas": 3, "router": {"policy": "round_robin"}})
    m = export_k8s(r, K8sOptions(replicas=3, namespace="serve"))
    docs = dict(m.documents)
    assert docs["leaderworkerset.yaml"]["spec"]["replicas"] == 3
    dep = docs["router-deployment.yaml"]
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--worker-urls" not in args and args[args.index("--policy") + 1] == "round_robin"
    sel = args[args.index("--selector") + 1: args.index("--service-discovery-port")]
    lws_pod_labels = docs["leaderworkerset.yaml"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]
    assert all(lws_pod_labels.get(k) == v or k == "leaderworkerset.sigs.k8s.io/name" for k, v in (s.split("=", 1) for s in sel))
    assert args[args.index("--service-discovery-namespace") + 1] == "serve"
    assert docs["router-service.yaml"]["spec"]["ports"][0]["port"] == 30080
    assert docs["router-role.yaml"]["rules"][0]["verbs"] == ["get", "list", "watch"]
    assert check_all([d for _, d in m.documents]) == []


def test_hosts_beyond_the_replicas_are_spare_and_searched_for_retired_replicas(tmp_path):
    """Lowering fleet.replicas keeps the inventory: the hosts no replica uses are spare, and
    up/down remove replicas NAME-r<k>, k >= replicas, found there (the one removal)."""
    from inkctl.plan.replicas.fleet import retire_steps, retired_replica, spare_hosts

    r = _recipe(tmp_path, fleet={"replicas": 2})
    hosts = [Host(name="h1", address="a"), Host(name="h2", address="b"), Host(name="h3", address="c")]
    f = build_fleet(r, hosts)
    assert [[h.name for h in rep.hosts] for rep in f.replicas] == [["h1"], ["h2"]]
    assert spare_hosts(f) == ["h3"] and [h.name for h in f.hosts] == ["h1", "h2", "h3"]
    assert [retired_replica("e2e-fleet", 2, d) for d in
            ("e2e-fleet-r0", "e2e-fleet-r1", "e2e-fleet-r2", "e2e-fleet-r10", "e2e-fleet-router", "e2e-fleet-rx",
             "other-r5")] == [False, False, True, True, False, False, False]
    steps = retire_steps(hosts[2], "docker", "e2e-fleet-r2", ["inkctl-e2e-fleet-r2-r0"])
    assert [s.argv for s in steps] == [("docker", "rm", "--force", "inkctl-e2e-fleet-r2-r0"),
                                       ("rm", "-rf", "--", "/var/lib/inkctl/e2e-fleet-r2")]


GATEWAY = Path(__file__).resolve().parents[1] / "e2e" / "recipes" / "gateway.yaml"


def _gateway(tmp_path, text: str | None = None, hosts='[{name: h5, address: 192.0.2.5, gpus: "0,1,2,3,4,5,6,7"}]'):
    import shutil

    from inkctl.plan.replicas.gateway import build_gateway
    from inkctl.recipe.gateway import load_gateway

    for name in ("gw-alpha.yaml", "gw-beta.yaml"):
        shutil.copy(GATEWAY.parent / name, tmp_path / name)
    g = tmp_path / "gateway.yaml"
    g.write_text(text if text is not None else GATEWAY.read_text())
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts: {hosts}\n")
    return build_gateway(load_gateway(g, inv))


def test_gateway_places_two_models_on_gpu_subsets_and_registers_them(tmp_path):
    from inkctl.plan.step import Register, WaitHealth

    f = _gateway(tmp_path)
    assert f.gateway and [(g.model, g.name, g.gpus) for g in f.replicas] == [
        ("alpha", "e2e-gw-alpha", "h5:0,1"), ("beta", "e2e-gw-beta", "h5:2,3")]
    assert [g.url for g in f.replicas] == ["http://192.0.2.5:18100", "http://192.0.2.5:18110"]  # beta's ports shifted
    assert f.router.deployment == "e2e-gw-gateway" and f.url == "http://192.0.2.5:30090"
    argv = f.router.stages[0].steps[0].argv
    assert "--enable-igw" in argv and "--worker-urls" not in argv and not any("http://" in a for a in argv)
    assert [st.name for st in f.router.stages] == ["launch", "health", "register", "answer"]
    reg = f.router.stages[2].steps[0]
    assert isinstance(reg, Register) and reg.url == "http://192.0.2.5:30090/workers"
    assert reg.workers == (("http://192.0.2.5:18100", "alpha"), ("http://192.0.2.5:18110", "beta"))
    answers = f.router.stages[3].steps
    assert all(isinstance(a, WaitHealth) for a in answers) and [a.model for a in answers] == ["alpha", "beta"]


@pytest.mark.parametrize("change,text", [
    (('"2,3"', '"1,2"'), "models[1] and models[0] both use GPU 1 on h5"),
    ((', gpus: "2,3"', ""), "models[1] and models[0] both use all its GPUs on h5"),
    ((', gpus: "2,3"', ""), "models[1] (gw-beta.yaml): host h5: gpus '0,1,2,3,4,5,6,7' selects 8 GPUs"),
    (("[h5], gpus: \"2,3\"", "[h9], gpus: \"2,3\""), "models[1].hosts[0]: 'h9' is not a host of the inventory"),
    (("port: 30090", "port: 18110"), "models[1]'s API port 18110 on h5 is also the gateway's port"),
    (("gw-beta.yaml", "gw-alpha.yaml"), "have the same name 'e2e-gw-alpha'"),
])
def test_gateway_collisions_are_located_in_the_gateway_file(tmp_path, change, text):
    bad = GATEWAY.read_text().replace(*change)
    hosts = "[{name: h5, address: 192.0.2.5}]" if "all its GPUs" in text else '[{name: h5, gpus: "0,1,2,3,4,5,6,7"}]'
    with pytest.raises(InkctlError) as e:
        _gateway(tmp_path, bad, hosts)
    assert text in e.value.message and e.value.message.startswith(str(tmp_path / "gateway.yaml") + ":")


def test_a_gateway_file_is_told_apart_from_a_recipe(tmp_path):
    from inkctl.errors import RecipeInvalid
    from inkctl.recipe.reading.filekind import is_gateway_file

    assert is_gateway_file(GATEWAY) and not is_gateway_file(RECIPE)
    with pytest.raises(RecipeInvalid) as e:
        load_recipe(GATEWAY)
    p = e.value.problems[0]
    assert p.message.startswith("this is a gateway file") and (p.line, p.col) == (1, 1)


def test_gateway_plan_json_shows_the_registrations(tmp_path):
    from inkctl.cli.show.plan_json import plan_json

    f = _gateway(tmp_path)
    steps = [s for st in plan_json(f.router)["stages"] for s in st["steps"] if s["kind"] == "register"]
    assert steps[0]["workers"] == [{"url": "http://192.0.2.5:18100", "model": "alpha"},
                                   {"url": "http://192.0.2.5:18110", "model": "beta"}]
