"""End to end: ``inkctl images push-to-hosts`` streams the recipe's image from the one host that
has it to the others, host to host (docker and podman hosts mixed), and leaves hosts that have
it alone; ``up --distribute-image`` does it before the preflight."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.conftest import no_traceback

pytestmark = pytest.mark.cluster

IMAGE = "e2e-relay-image:1"


@pytest.fixture
def only_on_h1(cluster):
    """A small image of its own, on h1 only (a few MB of random bytes, imported there)."""
    script = (f"d=$(mktemp -d) && head -c 5000000 /dev/urandom > $d/payload && "
              f"tar -C $d -c . | docker import - {IMAGE}; rm -rf $d")
    cp = cluster.exec("h1", ["sh", "-c", script])
    assert cp.returncode == 0, cp.stderr
    yield
    for h in cluster.hosts:
        cluster.docker(h.name, "rmi", "-f", IMAGE)


def image_id(cluster, host):
    cp = cluster.docker(host, "image", "inspect", "--format", "{{.Id}}", IMAGE)
    return cp.stdout.strip().removeprefix("sha256:") if cp.returncode == 0 else None


def test_the_image_goes_host_to_host_to_every_host_that_lacks_it(cluster, recipe, inventory, inkctl, only_on_h1):
    rec = recipe("weights", hardware={"nodes": 3}, engine={"args": {"tensor_parallel": 3}, "image": {"ref": IMAGE}})
    inv = inventory("h1", "h2", "h4")
    assert [image_id(cluster, h) for h in ("h2", "h4")] == [None, None]
    ran = inkctl("images", "push-to-hosts", rec, "--hosts", inv, "-o", "json", timeout=300)
    assert ran.rc == 0, ran
    lines = [json.loads(x) for x in ran.stdout.splitlines() if x.startswith("{")]
    rep = lines[-1]
    assert rep["source"] == "h1" and rep["had"] == ["h1"] and sorted(rep["sent"]) == ["h2", "h4"], rep
    started = {e["host"]: e["source"] for e in lines if e.get("event") == "image_started"}
    assert started == {"h2": "h1", "h4": "h2"}  # a chain, not a star
    want = image_id(cluster, "h1")
    assert [image_id(cluster, h) for h in ("h2", "h4")] == [want] * 2
    for h in cluster.hosts:
        assert not list(__import__("pathlib").Path(h.state_dir).rglob("images/job-*.json")), "the token is gone"
    again = inkctl("images", "push-to-hosts", rec, "--hosts", inv, "-o", "json", timeout=120)
    assert again.rc == 0 and json.loads(again.stdout.splitlines()[-1])["sent"] == {}, again
    # a host that has none: says so, names what to do
    for h in cluster.hosts:
        cluster.docker(h.name, "rmi", "-f", IMAGE)
    none = inkctl("images", "push-to-hosts", rec, "--hosts", inv, timeout=120)
    assert none.rc == 1 and f"no host has {IMAGE}" in none.stderr and no_traceback(none.out), none


MIXED = """
import json, sys
from inkctl.execute.hosts.connect import connect_all, close_all
from inkctl.execute.image.relay import Node, push_to_hosts
from inkctl.recipe.source import load_inventory

inv, state = sys.argv[1], json.loads(sys.argv[2])
hosts = load_inventory(inv)
ts = connect_all(hosts)
class Sink:
    def emit(self, e): pass
try:
    nodes = [Node(h.name, ts[h.name], state[h.name][0], state[h.name][1] + "/images", h.rank_address) for h in hosts]
    out = push_to_hosts(nodes, sys.argv[3], source=None, sink=Sink())
    print(json.dumps(out.as_dict()))
finally:
    close_all(ts)
"""


def test_docker_and_podman_hosts_relay_to_each_other(cluster, inventory, home, only_on_h1):
    """h1 (docker) -> h3 (podman, loads and forwards) -> h2 (docker): one chain, two runtimes."""
    import os
    import sys

    from tests.e2e.conftest import ROOT

    inv = inventory("h1", "h3", "h2")
    state = {h: (cluster.host(h).runtime, cluster.host(h).state_dir) for h in ("h1", "h3", "h2")}
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", MIXED, str(inv), json.dumps(state), IMAGE], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(p.stdout.splitlines()[-1])
    assert sorted(rep["sent"]) == ["h2", "h3"] and not rep["failed"], rep
    want = image_id(cluster, "h1")
    assert image_id(cluster, "h3") == want and image_id(cluster, "h2") == want


def test_up_distribute_image_sends_the_engine_image_to_a_host_that_lacks_it(cluster, recipe, inventory, inkctl):
    rec = recipe("vllm-native-2")
    inv = inventory("h1", "h2")
    engine = "inkctl-fake-engine:latest"
    want = cluster.docker("h1", "image", "inspect", "--format", "{{.Id}}", engine).stdout.strip()
    assert cluster.docker("h2", "rmi", "-f", engine).returncode == 0
    try:
        up = inkctl("up", rec, "--hosts", inv, "--distribute-image", timeout=300)
        assert up.rc == 0, up
        assert "image inkctl-fake-engine:latest sent to h2" in up.out, up
        assert cluster.docker("h2", "image", "inspect", "--format", "{{.Id}}", engine).stdout.strip() == want
    finally:
        inkctl("down", rec, "--hosts", inv, timeout=120)
        if cluster.docker("h2", "image", "inspect", engine).returncode != 0:  # put it back for the other tests
            subprocess.run(f"docker -H unix://{cluster.host('h1').socket} save {engine} | "
                           f"docker -H unix://{cluster.host('h2').socket} load", shell=True, check=False)
