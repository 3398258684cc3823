"""Proves the test cluster is what it claims: real SSH per host (strict host keys), one engine
per host, GPU flags, the fake engine, host-to-host traffic, faults, and a clean `down`.

Runs as root on a machine prepared by tests/cluster/install.sh: pytest -m cluster tests/cluster
"""

import json
import os
import re
import shutil
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .cluster import Cluster, default_state
from .image import IMAGE
from .proc import run, wait_for

pytestmark = pytest.mark.cluster
NET_ID = int(os.environ.get("INKCTL_TEST_NET_ID") or os.environ.get("INKCTL_E2E_NET_ID") or "0")  # 1: run beside a default cluster others use
STATE = os.environ.get("INKCTL_TEST_STATE") or default_state(NET_ID)
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "nvidia-smi")


def _missing():
    if os.geteuid() != 0:
        return "needs root"
    return next((f"needs {t}" for t in ("ip", "dockerd", "containerd", "podman", "sshd", "debootstrap", "nsenter")
                 if not shutil.which(t) and not os.path.exists(f"/usr/sbin/{t}")), None)


@pytest.fixture(scope="module")
def cluster():
    why = _missing()
    if why:
        pytest.skip(why)
    return Cluster.up(4, podman_hosts=("h3",), state=STATE, net_id=NET_ID)


def http(url, data=None, timeout=2):
    req = urllib.request.Request(url, data=json.dumps(data).encode() if data is not None else None,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return None, b""


def wait_http(url, want=200, timeout=30):
    seen = []

    def answered():
        seen.append(http(url))
        return seen[-1] if seen[-1][0] == want else None  # (status, body): truthy even with an empty body

    return wait_for(f"{url} to answer {want}", answered, timeout=timeout, on_timeout=lambda: f"last status {seen[-1][0]}")[1]


def ssh(c, h, command, known_hosts=None, check=True):
    """Plain ssh as a client would use it: strict host keys against the generated known_hosts."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={known_hosts or c.known_hosts}", "-o", "IdentitiesOnly=yes",
            "-i", c.identity_file, f"root@{h.address}", command]
    return run(argv, check=check, timeout=60)


def test_ssh_to_every_host_with_strict_host_keys(cluster, tmp_path):
    for h in cluster.hosts:
        out = ssh(cluster, h, "echo $INKCTL_TEST_HOST; ip -4 -o addr show eth0").stdout
        assert out.split()[0] == h.name and f"{h.address}/24" in out
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    cp = ssh(cluster, cluster.hosts[0], "true", known_hosts=str(empty), check=False)
    assert cp.returncode != 0 and "Host key verification failed" in cp.stderr
    assert cluster.ssh("h2", "echo ok").stdout.strip() == "ok"  # the generated ssh_config works too


def test_each_docker_host_talks_to_its_own_daemon(cluster):
    docker_hosts = [h for h in cluster.hosts if h.runtime == "docker"]
    for h in docker_hosts:
        assert ssh(cluster, h, "echo $DOCKER_HOST").stdout.strip() == f"unix://{h.socket}"
        ssh(cluster, h, f"docker rm -f iso-{h.name} >/dev/null 2>&1; "
                        f"docker run -d --name iso-{h.name} --network none {IMAGE} sleep 300")
    try:
        for h in docker_hosts:
            names = ssh(cluster, h, "docker ps --format '{{.Names}}'").stdout.split()
            assert names == [f"iso-{h.name}"], (h.name, names)
            assert len(cluster.docker(h.name, "ps", "-q").stdout.split()) == 1
    finally:
        for h in docker_hosts:
            cluster.docker(h.name, "rm", "-f", f"iso-{h.name}")


def test_gpus_all_and_fake_vllm_becomes_healthy(cluster):
    h = cluster.host("h1")
    ssh(cluster, h, "docker rm -f fe-vllm >/dev/null 2>&1; docker run -d --name fe-vllm --gpus all --network host "
                    f"-e FAKE_READY_AFTER=1 {IMAGE} vllm serve m --port 8000")
    try:
        base = f"http://{h.address}:8000"
        assert http(base + "/health")[0] is None  # connection refused while "loading"
        wait_http(base + "/health")
        status, body = http(base + "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"]
        assert "NVIDIA GB10" in ssh(cluster, h, "docker exec fe-vllm nvidia-smi -L").stdout
        argv = json.loads(wait_http(base + "/inkctl/fake/argv"))["argv"]
        assert argv[-4:] == ["serve", "m", "--port", "8000"]
    finally:
        cluster.docker("h1", "rm", "-f", "fe-vllm")


def test_podman_host_runs_cdi_gpus_and_has_no_docker(cluster):
    h = cluster.host("h3")
    assert h.runtime == "podman"
    assert ssh(cluster, h, "command -v docker", check=False).returncode != 0
    ssh(cluster, h, "podman rm -f fe-sg >/dev/null 2>&1; podman run -d --name fe-sg --device nvidia.com/gpu=all "
                    f"--security-opt=label=disable --network host -e FAKE_READY_AFTER=1 {IMAGE} "
                    "python3 -m sglang.launch_server --model-path m --host 0.0.0.0 --port 30000")
    try:
        base = f"http://{h.address}:30000"
        wait_http(base + "/v1/models")
        wait_http(base + "/health")
        assert "NVIDIA H200" in ssh(cluster, h, "podman exec fe-sg nvidia-smi -L").stdout
        assert "fe-sg" in cluster.docker("h3", "ps", "--format", "{{.Names}}").stdout
    finally:
        cluster.docker("h3", "rm", "-f", "fe-sg")


def test_nvidia_smi_profiles(cluster):
    q = "nvidia-smi --query-gpu=index,name,compute_cap,memory.total,memory.free,driver_version --format=csv,noheader,nounits"
    with open(os.path.join(FIXTURES, "h200-query-gpu.csv")) as f:
        captured = f.read().strip()
    assert ssh(cluster, cluster.host("h3"), q + " -i 0").stdout.strip() == captured
    assert len(ssh(cluster, cluster.host("h3"), q).stdout.splitlines()) == 8
    assert ssh(cluster, cluster.host("h1"), q).stdout.strip() == "0, NVIDIA GB10, 12.1, [N/A], [N/A], 580.95.05"
    assert len(ssh(cluster, cluster.host("h4"), "nvidia-smi -L").stdout.splitlines()) == 2


def test_hosts_reach_each_other_across_the_bridge(cluster):
    """A two-node fake vLLM: rank 1 on h2 joins rank 0 on h1 over the bridge."""
    h1, h2 = cluster.host("h1"), cluster.host("h2")
    common = f"--nnodes 2 --master-addr {h1.address} --master-port 29501"
    for h, extra in ((h1, "--node-rank 0"), (h2, "--node-rank 1 --headless")):
        ssh(cluster, h, f"docker rm -f fe-mn >/dev/null 2>&1; docker run -d --name fe-mn --network host {IMAGE} "
                        f"vllm serve m --port 8001 {common} {extra}")
    try:
        wait_http(f"http://{h1.address}:8001/health")
        assert f"joined from {h2.address}" in cluster.docker("h1", "logs", "fe-mn").stdout
    finally:
        for h in (h1, h2):
            cluster.docker(h.name, "rm", "-f", "fe-mn")


def test_cut_and_heal(cluster):
    addr = cluster.host("h2").address

    def reachable():
        try:
            socket.create_connection((addr, 22), timeout=0.5).close()
            return True
        except OSError:
            return False

    cluster.cut("h2")
    try:
        assert not reachable()
        assert f"h2: link {cluster.host('h2').veth} is down (cut)" in cluster.problems()
    finally:
        cluster.heal("h2")
    wait_for("h2 to come back after heal", reachable, timeout=10)


def test_stop_and_start_runtime(cluster):
    for name in ("h1", "h3"):
        cluster.stop_runtime(name)
        try:
            cp = cluster.ssh(name, f"{cluster.host(name).runtime} ps")
            assert cp.returncode != 0, cp.stdout
        finally:
            cluster.start_runtime(name)
        assert cluster.ssh(name, f"{cluster.host(name).runtime} ps").returncode == 0


def test_slurm_runs_tasks_on_the_hosts_with_their_own_dockerd(cluster, tmp_path):
    from tests.cluster import slurm

    s = slurm.start(cluster, ["h1", "h2"])
    assert s.idle()
    with open("/etc/hosts") as f:
        mine = [ln.split()[1] for ln in f if ln.rstrip().endswith(f"# inkctl-test-slurm-{NET_ID}")]
    assert mine == [slurm.controller_name(NET_ID), *s.nodes()]
    out = tmp_path / "job.out"
    job = s.run(["sbatch", "--parsable", "-N", "2", "--gpus-per-node", "8", "-o", str(out), "--wrap",
                 'srun --label sh -c \'echo "$SLURMD_NODENAME $DOCKER_HOST $CUDA_VISIBLE_DEVICES"; '
                 'docker ps -q >/dev/null && echo "docker answers"\'']).stdout.strip()
    wait_for(f"job {job}", lambda: not s.jobs(), timeout=60)
    lines = sorted(out.read_text().splitlines())
    for i, name in enumerate(("h1", "h2")):
        h = cluster.host(name)
        assert f"{i}: {s.node(name)} unix://{h.socket} 0,1,2,3,4,5,6,7" in lines, lines
    assert lines.count("0: docker answers") == 1 and lines.count("1: docker answers") == 1, lines


def test_up_again_reuses_and_down_leaves_nothing(cluster):
    keys = Path(cluster.known_hosts).read_text()
    again = Cluster.up(4, podman_hosts=("h3",), state=STATE, net_id=NET_ID)
    # reused, not rebuilt: a rebuild would have generated new host keys
    assert Path(again.known_hosts).read_text() == keys and again.record["image_id"] == cluster.record["image_id"]
    # leave something running that down must remove
    cluster.docker("h1", "run", "-d", "--name", "left-over", "--network", "host", IMAGE, "sleep", "600", check=True)
    pid = cluster.docker("h3", "run", "-d", "--name", "left-over", "--network", "host", IMAGE, "sleep", "600",
                         check=True).stdout.strip()
    cluster.down()
    cgroups = [f"/sys/fs/cgroup/pids/libpod_parent/libpod-{pid}", f"/sys/fs/cgroup/pids{cluster.host('h1').cgroup_parent}"]
    assert not [c for c in cgroups if os.path.exists(c)]
    links = [h.veth for h in cluster.hosts] + [cluster.hosts[0].veth.rsplit("v", 1)[0] + "br0"]
    assert not [n for n in links if os.path.exists(f"/sys/class/net/{n}")]
    assert not [h.netns for h in cluster.hosts if os.path.exists(h.netns_path)]
    with open("/proc/self/mountinfo") as f:
        assert not [ln for ln in f if STATE + "/" in ln]
    assert not os.path.exists(STATE)
    with open("/etc/hosts") as f:
        assert not [ln for ln in f if ln.rstrip().endswith(f"# inkctl-test-slurm-{NET_ID}")]
    leftovers = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                # STATE itself or a path under it, not a cluster beside it (STATE-1 ...)
                if re.search(re.escape(STATE.encode()) + rb"(/|\x00|$)", f.read()):
                    leftovers.append(pid)
        except OSError:
            pass
    assert not leftovers
    rules = run(["iptables", "-S", "FORWARD"], check=False).stdout
    assert f"-i {links[-1]} " not in rules
