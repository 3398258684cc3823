"""The exported pod templates, started the way LeaderWorkerSet and the kubelet would start them,
on two real hosts with the fake engine: vLLM native, vLLM over Ray, SGLang.

There is no Kubernetes here; the test plays the kubelet for one group: it gives each pod the
variables LeaderWorkerSet injects (LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX) and the
downward-API ones the templates ask for (status.podIP), expands $(VAR) in command, args and env
values by Kubernetes' rules, and runs the container's command with docker on the host network.
Volumes and resource limits are not emulated: this proves the commands rendezvous and serve.
"""

from __future__ import annotations

import time
import urllib.request

import pytest
import yaml

pytestmark = pytest.mark.cluster


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text) and text[i + 1] == "$":
            out.append("$")
            i += 2
            continue
        if text[i] == "$" and i + 1 < len(text) and text[i + 1] == "(":
            end = text.find(")", i + 2)
            if end != -1 and text[i + 2:end] in env:
                out.append(env[text[i + 2:end]])
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def pod_argv(template: dict, name: str, env: dict[str, str]) -> list[str]:
    [c] = template["spec"]["containers"]
    full = dict(env)
    for e in c.get("env", []):
        if "value" in e:
            full[e["name"]] = kubelet_expand(e["value"], full)
        elif e["valueFrom"].get("fieldRef", {}).get("fieldPath") == "status.podIP":
            full[e["name"]] = env["INKCTL_POD_IP"]
        else:
            raise AssertionError(f"the test cannot provide {e}")
    argv = ["run", "--detach", "--name", name, "--network", "host", "--label", "inkctl.deployment=k8s-pods-test"]
    for k, v in full.items():
        argv += ["--env", f"{k}={v}"]
    cmd = [kubelet_expand(x, full) for x in c["command"] + c["args"]]
    return argv + ["--entrypoint", cmd[0], c["image"], *cmd[1:]]


def healthy(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("base", ["vllm-native-2", "vllm-ray-2", "sglang-2"])
def test_a_group_of_exported_pods_rendezvous_and_serve(cluster, inkctl, recipe, tmp_path, base):
    path = recipe(base, name=f"k8s-{base}")
    out = tmp_path / "k8s"
    ran = inkctl("export", "k8s", path, "--out", out, "--check")
    assert ran.rc == 0, ran
    lws = yaml.safe_load((out / "leaderworkerset.yaml").read_text())
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    leader, worker = cluster.host("h1"), cluster.host("h2")
    pods = [("h1", lwt["leaderTemplate"], 0, leader.address), ("h2", lwt["workerTemplate"], 1, worker.address)]
    names = []
    try:
        for host, template, index, ip in pods:
            env = {"LWS_LEADER_ADDRESS": leader.address, "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": str(index),
                   "INKCTL_POD_IP": ip}
            name = f"k8s-pod-{base}-{index}"
            cluster.docker(host, "rm", "--force", name)
            started = cluster.docker(host, *pod_argv(template, name, env))
            assert started.returncode == 0, started.stderr
            names.append((host, name))
        [c] = lwt["leaderTemplate"]["spec"]["containers"]
        port = c["ports"][0]["containerPort"]
        url = f"http://{leader.address}:{port}{c['startupProbe']['httpGet']['path']}"
        deadline = time.monotonic() + 90
        while not healthy(url):
            for host, name in names:
                state = cluster.docker(host, "inspect", "--format", "{{.State.Status}}", name).stdout.strip()
                if state != "running":
                    logs = cluster.docker(host, "logs", "--tail", "30", name)
                    pytest.fail(f"{name} on {host} is {state}:\n{logs.stdout}{logs.stderr}")
            assert time.monotonic() < deadline, f"{url} did not answer in 90 s"
            time.sleep(0.5)
        if base == "vllm-ray-2":  # the leader served only after Ray saw both pods
            status = cluster.docker("h1", "exec", names[0][1], "ray", "status")
            assert status.stdout.count(" node_") == 2, status.stdout
        else:  # the worker reached the leader by its address
            logs = cluster.docker("h2", "logs", names[1][1])
            assert leader.address in logs.stdout + logs.stderr
    finally:
        for host, name in names:
            cluster.docker(host, "rm", "--force", name)
