"""`inkctl export k8s`: manifests from the plan `up` runs, exact argv per rank, nothing dropped silently.

Golden manifests for every bundled recipe and example live in tests/golden/k8s/. Regenerate on
purpose with INKCTL_UPDATE_GOLDEN=1 pytest tests/unit/test_k8s_export.py, then review the diff.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inkctl.export.k8s import Cache, K8sOptions, export_k8s
from inkctl.export.k8s_check import check_all
from inkctl.export.k8s_yaml import dump
from inkctl.plan.deploy import build_plan
from inkctl.plan.stages.launch import SERVE_IN_HEAD
from inkctl.plan.hotfix import MOUNT
from inkctl.plan.inputs import plan_inputs
from inkctl.plan.step import Run
from inkctl.recipe.hosts import Host
from inkctl.recipe.reading.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "k8s"
RECIPES = sorted((ROOT / "recipes").glob("*.yaml")) + sorted((ROOT / "examples").glob("*.yaml"))
RECIPES = [p for p in RECIPES if not p.name.startswith("hosts")]
VARS = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion (command, args, env values): $$ is a literal $, $(NAME)
    of a defined variable is its value, anything else stays as written."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1 and text[i + 2:end] in env:
                    out.append(env[text[i + 2:end]])
                    i = end + 1
                    continue
        out.append(text[i])
        i += 1
    return "".join(out)


def pod_env(rank: int, nodes: int, leader: str, own: str) -> dict[str, str]:
    return {"LWS_LEADER_ADDRESS": leader, "LWS_GROUP_SIZE": str(nodes), "LWS_WORKER_INDEX": str(rank),
            "INKCTL_POD_IP": own, "INKCTL_POD_NAME": f"pod-{rank}"}


def _lws(m) -> dict:
    return next(d for _, d in m.documents if d["kind"] == "LeaderWorkerSet")


def _container(m, role: str) -> dict:
    lwt = _lws(m)["spec"]["leaderWorkerTemplate"]
    key = "leaderTemplate" if role == "leader" and "leaderTemplate" in lwt else "workerTemplate"
    return lwt[key]["spec"]["containers"][0]


def _engine(run: Run) -> list[str]:
    """The entrypoint and command of a plan's run step (what follows the image)."""
    i = run.argv.index("--entrypoint")
    return [run.argv[i + 1], *run.argv[i + 3:]]


def _export(path: Path, **opts):
    loaded = load_recipe(path)
    return loaded, export_k8s(loaded.recipe, K8sOptions(**opts), **plan_inputs(loaded))


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_manifests_match_golden_and_validate(recipe: Path):
    _, m = _export(recipe)
    docs = [d for _, d in m.documents]
    assert check_all(docs) == []
    text = dump(docs) + "# gaps\n" + "".join(f"# {'mapped' if g.expressed else 'NOT EXPRESSED'}: {g.field}: {g.docker} -> {g.kubernetes}\n"
                                            for g in m.gaps)
    golden = GOLDEN / f"{recipe.parent.name}-{recipe.stem}.yaml"
    if os.environ.get("INKCTL_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden.name}: run with INKCTL_UPDATE_GOLDEN=1 and review it"
    assert text == golden.read_text(), f"manifests for {recipe.name} changed; review and regenerate {golden.name}"


@pytest.mark.parametrize("recipe", [p for p in RECIPES if load_recipe(p).recipe.multinode
                                    and not (load_recipe(p).recipe.engine.kind == "vllm" and load_recipe(p).recipe.engine.multinode == "ray")],
                         ids=lambda p: p.stem)
def test_each_rank_runs_the_plans_engine_argv(recipe: Path):
    """Expanded as the kubelet would on a pod of rank r, the template is the plan's argv of rank r
    on hosts with those addresses: the very same command, for the leader and every worker."""
    loaded, m = _export(recipe)
    r = loaded.recipe
    nodes = r.hardware.nodes
    hosts = [Host(name=f"h{i}", address=f"10.9.0.{i + 1}", vars={"HF_HOME": "/x", "HF_CACHE": "/x", "GPUS": "0", "HOME": "/root"})
             for i in range(nodes)]
    plan = build_plan(r, hosts, **plan_inputs(loaded))
    for rank in range(nodes):
        c = _container(m, "leader" if rank == 0 else "worker")
        env = pod_env(rank, nodes, leader="10.9.0.1", own=f"10.9.0.{rank + 1}")
        got = [kubelet_expand(x, env) for x in c["command"] + c["args"]]
        run = next(s for s in plan.steps() if isinstance(s, Run) and s.rank == rank and s.argv[1] == "run")
        assert got == _engine(run)


def test_ray_leader_starts_the_head_waits_for_the_group_then_execs_the_plans_serve():
    loaded, m = _export(ROOT / "examples" / "vllm-ray-2node.yaml")
    hosts = [Host(name="h0", address="10.9.0.1"), Host(name="h1", address="10.9.0.2")]
    plan = build_plan(loaded.recipe, hosts)
    script = kubelet_expand(_container(m, "leader")["args"][1], pod_env(0, 2, "10.9.0.1", "10.9.0.1"))
    lines = script.splitlines()
    head = next(s for s in plan.steps() if isinstance(s, Run) and s.rank == 0 and s.argv[1] == "run")
    serve = next(s for s in plan.steps() if isinstance(s, Run) and SERVE_IN_HEAD in s.argv)
    assert shlex.split(lines[0]) == _engine(head) + ["&"]
    assert shlex.split(lines[-1]) == ["exec", *serve.argv[serve.argv.index(SERVE_IN_HEAD) + 2:]]
    assert "-ge 2 ]" in script and "ray status" in script
    worker = _container(m, "worker")
    got = [kubelet_expand(x, pod_env(1, 2, "10.9.0.1", "10.9.0.2")) for x in worker["command"] + worker["args"]]
    w = next(s for s in plan.steps() if isinstance(s, Run) and s.rank == 1 and s.argv[1] == "run")
    assert got == _engine(w)
    # the shell script still parses and the sh -c form is what runs
    assert _container(m, "leader")["command"] == ["/bin/sh"] and subprocess.run(["sh", "-n", "-c", script]).returncode == 0


def _recipe(tmp_path: Path, **over) -> Path:
    doc = {"name": "k8s_test.one", "model": {"repo": "x/y"},
           "hardware": {"accelerator": "h200", "compute_capability": "9.0", "gpus_per_host": 4},
           "engine": {"kind": "vllm", "version": "v1", "image": {"ref": "vllm/vllm-openai@sha256:" + "a" * 64},
                      "args": {"tensor_parallel": 4, "extra": ["--override-generation-config", '{"x": "$(whoami) $HOME"}']}},
           "health": {"timeout_s": 61, "interval_s": 5}}
    for k, v in over.items():
        doc[k] = v
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_dollar_signs_in_recipe_values_arrive_literally(tmp_path):
    _, m = _export(_recipe(tmp_path))
    args = _container(m, "leader")["args"]
    assert '{"x": "$$(whoami) $$HOME"}' in args
    expanded = [kubelet_expand(a, pod_env(0, 1, "l", "p")) for a in args]
    assert '{"x": "$(whoami) $HOME"}' in expanded


def test_names_probes_gpus_and_cache(tmp_path):
    _, m = _export(_recipe(tmp_path), cache=Cache.parse("hostpath:/mnt/hf"), namespace="llm", replicas=3)
    lws = _lws(m)
    assert lws["metadata"] == {"name": "k8s-test-one", "namespace": "llm",
                               "labels": {"app.kubernetes.io/name": "k8s-test-one", "app.kubernetes.io/managed-by": "inkctl"}}
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lws["spec"]["replicas"] == 3 and lwt["size"] == 1 and lwt["restartPolicy"] == "RecreateGroupOnPodRestart"
    c = _container(m, "leader")
    assert c["image"] == "vllm/vllm-openai@sha256:" + "a" * 64
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 4}
    assert c["startupProbe"] == {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 5, "failureThreshold": 13}
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in c["env"]
    vols = lwt["workerTemplate"]["spec"]["volumes"]
    assert {"name": "model-cache", "hostPath": {"path": "/mnt/hf", "type": "Directory"}} in vols
    svc = next(d for _, d in m.documents if d["kind"] == "Service")
    assert svc["spec"]["ports"][0]["port"] == 8000 and svc["spec"]["selector"]["inkctl.role"] == "head"
    with pytest.raises(Exception, match="pvc:NAME or hostpath"):
        Cache.parse("nfs:server")


def test_what_has_no_kubernetes_form_is_listed(tmp_path):
    path = _recipe(tmp_path, container={"runtime": "podman", "gpus": "cdi", "devices": ["/dev/infiniband", "/dev/fuse"],
                                        "ulimits": {"memlock": {"soft": -1, "hard": -1}}, "security_opt": ["label=disable", "mask=/proc/x"],
                                        "extra_args": ["--userns", "keep-id"], "cap_add": ["IPC_LOCK"]},
                   network={"rdma": True})
    _, m = _export(path, device_resources=(("/dev/infiniband", "rdma/roce"),),
                   annotations=(("k8s.v1.cni.cncf.io/networks", "roce-net"),))
    missing = {g.field: g for g in m.not_expressed}
    assert set(missing) == {"container.devices", "container.ulimits.memlock", "container.security_opt", "container.extra_args", "smoke"}
    assert "--device /dev/fuse" == missing["container.devices"].docker
    assert missing["container.extra_args"].docker == "--userns keep-id"
    c = _container(m, "leader")
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 4, "rdma/roce": 1}
    assert c["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}, "seLinuxOptions": {"type": "spc_t"}}
    tmpl = _lws(m)["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert tmpl["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "roce-net"
    assert check_all([d for _, d in m.documents]) == []


def test_secrets_are_references_to_the_named_secret_never_values(tmp_path):
    path = _recipe(tmp_path, secrets={"HF_TOKEN": {"env": "HF_TOKEN"}})
    env = {**os.environ, "HF_TOKEN": "hf_SECRET_VALUE_123"}
    r = subprocess.run([sys.executable, "-m", "inkctl", "export", "k8s", str(path), "--secret-name", "hf", "--output", "json"],
                       cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "hf_SECRET_VALUE_123" not in r.stdout + r.stderr
    lws = next(d for d in json.loads(r.stdout)["manifests"] if d["kind"] == "LeaderWorkerSet")
    env_list = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "HF_TOKEN"}}} in env_list


def test_hotfixes_ship_as_a_configmap_the_wrapper_still_verifies(tmp_path):
    body = b"print('fixed')\n"
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "fix.py").write_bytes(body)
    path = _recipe(tmp_path, patches={"mode": "at_start", "hotfixes": [
        {"name": "fix.py", "source": "fix.py", "sha256": hashlib.sha256(body).hexdigest()}]})
    _, m = _export(path)
    cm = next(d for _, d in m.documents if d["kind"] == "ConfigMap")
    assert cm["data"]["fix.py"] == body.decode()
    assert f"verify fix.py {hashlib.sha256(body).hexdigest()}" in cm["data"]["entry.sh"]
    c = _container(m, "leader")
    assert c["command"] == ["/bin/sh"] and c["args"][:3] == [f"{MOUNT}/entry.sh", "vllm", "serve"]
    assert {"name": "hotfix", "mountPath": MOUNT, "readOnly": True} in c["volumeMounts"]
    # the wrapper as mounted refuses an altered hotfix before the engine starts
    d = tmp_path / "mounted"
    d.mkdir()
    for k, v in cm["data"].items():
        (d / k).write_text(v)
    script = cm["data"]["entry.sh"].replace(MOUNT, str(d))
    assert subprocess.run(["sh", "-c", script, "entry", "true"], capture_output=True).returncode == 0
    (d / "fix.py").write_text("print('evil')\n")
    bad = subprocess.run(["sh", "-c", script, "entry", "true"], capture_output=True, text=True)
    assert bad.returncode == 97 and "fix.py was altered" in bad.stderr


def test_a_host_variable_without_a_value_is_a_clear_error(tmp_path):
    path = _recipe(tmp_path, container={"mounts": [{"source": "${DATA}", "target": "/data"}]})
    with pytest.raises(Exception, match=r"\$\{DATA\}.*") as e:
        _export(path)
    assert "--var DATA=VALUE" in e.value.hint
    _, m = _export(path, vars=(("DATA", "/srv/data"),))
    assert {"name": "host-0", "hostPath": {"path": "/srv/data"}} in _lws(m)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["volumes"]


def test_cli_writes_files_and_checks(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "inkctl", "export", "k8s", "examples/sglang-2node-podman.yaml", "--out", str(out),
                        "--check"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["leaderworkerset.yaml", "service.yaml"]
    assert "valid (LeaderWorkerSet CRD v0.9.0" in r.stdout
    docs = [d for p in sorted(out.iterdir()) for d in yaml.safe_load_all(p.read_text())]
    assert check_all(docs) == []


def test_a_patched_image_must_be_pushed_first(tmp_path):
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "x.py").write_text("x = 1\n")
    recipe = _recipe(tmp_path, patches={"mode": "build", "base": "vllm/vllm-openai@sha256:" + "b" * 64,
                                        "files": [{"path": "/x.py", "kind": "replace", "source": "x.py"}]})
    r = subprocess.run([sys.executable, "-m", "inkctl", "export", "k8s", str(recipe)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "built locally only" in r.stderr and "--push REGISTRY" in r.stderr


def test_host_network_and_binary_hotfixes(tmp_path):
    body = bytes(range(256))
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "blob.bin").write_bytes(body)
    path = _recipe(tmp_path, patches={"mode": "at_start", "hotfixes": [
        {"name": "blob.bin", "source": "blob.bin", "sha256": hashlib.sha256(body).hexdigest(), "interpreter": ["true"]}]})
    _, m = _export(path, host_network=True)
    cm = next(d for _, d in m.documents if d["kind"] == "ConfigMap")
    import base64

    assert base64.b64decode(cm["binaryData"]["blob.bin"]) == body and "blob.bin" not in cm["data"]
    spec = _lws(m)["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert not [g for g in m.gaps if g.field == "container.network"]
    assert check_all([d for _, d in m.documents]) == []


def test_a_runtime_flag_the_export_was_not_taught_is_loud():
    from inkctl.export.k8s_pod import from_spec
    from inkctl.runtimes.spec import ContainerSpec

    extra = from_spec(ContainerSpec(name="n", image="img", entrypoint="e", command=("a",), env=(("A", "1"),),
                                    extra=("--userns", "keep-id")))
    assert extra.unknown == ["--userns", "keep-id"] and extra.env == [("A", "1")] and extra.command == ["a"]
    with pytest.raises(ValueError, match="'--oom-score-adj' has no Kubernetes mapping"):
        from_spec(ContainerSpec(name="n", image="img", entrypoint="e", command=(), options=("--oom-score-adj", "5")))


def test_a_stock_image_runs_by_the_recipes_digest(tmp_path):
    digest = "sha256:" + "c" * 64
    path = _recipe(tmp_path, engine={"kind": "vllm", "version": "v1", "image": {"ref": "vllm/vllm-openai:v1", "digest": digest}, "args": {"tensor_parallel": 4}})
    r = subprocess.run([sys.executable, "-m", "inkctl", "export", "k8s", str(path), "--output", "json"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    lws = next(d for d in doc["manifests"] if d["kind"] == "LeaderWorkerSet")
    assert lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] == f"vllm/vllm-openai:v1@{digest}"
    assert not [g for g in doc["gaps"] if g["field"] == "engine.image.ref"]


def test_push_of_a_recipe_without_a_build_is_refused():
    r = subprocess.run([sys.executable, "-m", "inkctl", "build", "examples/vllm-single-docker.yaml", "--push", "registry.invalid:5000"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "--push: inkctl builds no image for this recipe" in r.stderr


@pytest.mark.parametrize("name,service", [("qwen3-235b-a22b-fp8-8x-h200-dp-ep-vllm", "qwen3-235b-fp8-dp8-ep"),
                                          ("tests/e2e/recipes/fleet.yaml", None)])
def test_export_to_a_directory_says_what_to_run_next_within_80_columns(tmp_path: Path, name: str,
                                                                       service: str | None) -> None:
    """After `export k8s --out DIR`: apply DIR, port-forward the endpoint's Service (a fleet's: the
    router's), and the smoke that Kubernetes does not run, each a command that names what exists."""
    root = Path(__file__).resolve().parents[2]
    recipe = name if "/" not in name else str(root / name)
    if "/" in name and not (root / name).exists():
        pytest.skip(f"{name} is not in this checkout")
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "80"}
    r = subprocess.run([sys.executable, "-m", "inkctl", "export", "k8s", recipe, "--out", "k8s"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = (r.stdout + r.stderr).splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    nxt = r.stdout[r.stdout.index("next: "):].replace("\\\n", " ")
    steps = [shlex.split(line.removeprefix("next:")) for line in nxt.splitlines()]
    assert steps[0] == ["kubectl", "apply", "-f", "k8s"]
    svc = steps[1][2].removeprefix("svc/")
    services = [d for f in (tmp_path / "k8s").iterdir() for d in yaml.safe_load_all(f.read_text())
                if d and d["kind"] == "Service"]
    assert svc in {s["metadata"]["name"] for s in services}
    if service:
        assert svc == service
    port = steps[1][3].split(":")[0]
    assert steps[2][:2] == ["inkctl", "smoke"] and steps[2][-2:] == ["--url", f"http://127.0.0.1:{port}"]


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_the_api_key_reaches_the_engine_from_the_secret_never_in_args(tmp_path, kind):
    """Issue 29: vLLM reads VLLM_API_KEY, SGLang gets it through the config-file prologue: both
    from the Kubernetes Secret, the value nowhere in the manifests."""
    path = _recipe(tmp_path, secrets={"API_KEY": {"env": "UNIT_API_KEY"}}, api_key="API_KEY")
    if kind == "sglang":
        doc = yaml.safe_load(path.read_text())
        doc["engine"] = {"kind": "sglang", "version": "v0.5.4", "image": {"ref": "lmsysorg/sglang@sha256:" + "b" * 64},
                         "args": {"tensor_parallel": 4}}
        path.write_text(yaml.safe_dump(doc))
    env = {**os.environ, "UNIT_API_KEY": "sk-k8s-unit-value-0123456789"}
    r = subprocess.run([sys.executable, "-m", "inkctl", "export", "k8s", str(path), "--secret-name", "keys", "--output", "json"],
                       cwd=ROOT, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "sk-k8s-unit-value" not in r.stdout + r.stderr
    docs = json.loads(r.stdout)["manifests"]
    pod = next(d for d in docs if d["kind"] in ("LeaderWorkerSet", "Deployment", "StatefulSet"))
    text = json.dumps(pod)
    var = "VLLM_API_KEY" if kind == "vllm" else "INKCTL_API_KEY"
    assert json.dumps({"name": var, "valueFrom": {"secretKeyRef": {"name": "keys", "key": "API_KEY"}}}) in text
    assert "--api-key" not in text
    if kind == "sglang":
        assert "--config /tmp/inkctl-api-key.yaml" in text
