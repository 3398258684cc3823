"""End to end: ``inkctl images push-to-hosts`` streams the recipe's image from the one host that
has it (or the control machine's docker daemon) to the others, host to host (docker and podman
hosts mixed), sends only the layers hosts lack, goes on around a relay host cut mid-stream, and
leaves hosts that have it alone; ``up --distribute-image`` does it before the preflight."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.conftest import no_traceback

pytestmark = pytest.mark.cluster

IMAGE = "e2e-relay-image:1"
TOP = "e2e-relay-top:1"  # the fake engine (on every host) plus one layer of its own
BASE = "inkctl-fake-engine:latest"
PAYLOAD = 4_000_000


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


def image_id(cluster, host, image=IMAGE):
    cp = cluster.docker(host, "image", "inspect", "--format", "{{.Id}}", image)
    return cp.stdout.strip().removeprefix("sha256:") if cp.returncode == 0 else None


def build_top(run, payload: int = PAYLOAD, tag: str = TOP) -> None:
    """``tag``: FROM the fake engine, one layer of ``payload`` random bytes (/payload)."""
    script = (f"d=$(mktemp -d) && head -c {payload} /dev/urandom > $d/payload && "
              f"printf 'FROM {BASE}\\nCOPY payload /payload\\n' > $d/Dockerfile && "
              f"DOCKER_BUILDKIT=0 docker build -q -t {tag} $d; rc=$?; rm -rf $d; exit $rc")
    cp = run(["sh", "-c", script])
    assert cp.returncode == 0, cp.stderr


@pytest.fixture
def top_on_h1(cluster):
    """TOP on h1 only; every host has BASE (the fake engine)."""
    build_top(lambda argv: cluster.exec("h1", argv))
    full = cluster.exec("h1", ["sh", "-c", f"docker save {TOP} | wc -c"])
    yield int(full.stdout)
    for h in cluster.hosts:
        cluster.docker(h.name, "rmi", "-f", TOP)


def runs_with_payload(cluster, host, image=TOP, payload=PAYLOAD) -> bool:
    cp = cluster.docker(host, "run", "--rm", "--network", "host", "--entrypoint", "sh", image, "-c", "wc -c < /payload")
    return cp.returncode == 0 and cp.stdout.strip() == str(payload)


def report(ran) -> dict:
    return json.loads(ran.stdout.strip().splitlines()[-1])


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
from inkctl.recipe.reading.source import load_inventory

inv, state = sys.argv[1], json.loads(sys.argv[2])
hosts = load_inventory(inv)
ts = connect_all(hosts)
class Sink:
    def emit(self, e): pass
try:
    nodes = [Node(h.name, ts[h.name], state[h.name][0], state[h.name][1] + "/images", h.rank_address) for h in hosts]
    out = push_to_hosts(nodes, sys.argv[3], source=sys.argv[4] if len(sys.argv) > 4 else None, sink=Sink())
    print(json.dumps(out.as_dict()))
finally:
    close_all(ts)
"""


def test_docker_and_podman_hosts_relay_to_each_other(cluster, inventory, home, top_on_h1):
    """h1 (docker) -> h3 (podman, loads and forwards) -> h2 (docker): one chain, two runtimes;
    both have the base layer (podman knows it by its diff id, docker by its chain): only the
    top layer crosses, and the image runs on the podman host."""
    import os
    import sys

    from tests.e2e.conftest import ROOT

    inv = inventory("h1", "h3", "h2")
    state = {h: (cluster.host(h).runtime, cluster.host(h).state_dir) for h in ("h1", "h3", "h2")}
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", MIXED, str(inv), json.dumps(state), TOP], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(p.stdout.splitlines()[-1])
    assert sorted(rep["sent"]) == ["h2", "h3"] and not rep["failed"], rep
    assert rep["skipped"] == {"h3": 1, "h2": 1} and rep["sent"]["h3"] < top_on_h1 // 4, rep
    want = image_id(cluster, "h1", TOP)
    assert image_id(cluster, "h3", TOP) == want and image_id(cluster, "h2", TOP) == want
    assert runs_with_payload(cluster, "h3") and runs_with_payload(cluster, "h2")
    # podman as the source: its archive names each layer by its diff id (no hashing needed)
    assert cluster.docker("h2", "rmi", "-f", TOP).returncode == 0
    inv = inventory("h3", "h2")
    p = subprocess.run([sys.executable, "-c", MIXED, str(inv), json.dumps(state), TOP, "h3"], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(p.stdout.splitlines()[-1])
    assert rep["source"] == "h3" and not rep["failed"] and rep["skipped"] == {"h2": 1}, rep
    assert rep["sent"]["h2"] < top_on_h1 // 4, rep
    assert image_id(cluster, "h2", TOP) == want and runs_with_payload(cluster, "h2")


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


def test_a_host_that_has_the_base_layers_receives_only_the_rest(cluster, recipe, inventory, inkctl, top_on_h1):
    """h2 and h4 have the fake engine's layer: the stream leaves it out (a few MB cross the
    links, not the whole image), each loads the rest against what it has, and the image runs."""
    full = top_on_h1
    rec = recipe("weights", hardware={"nodes": 3}, engine={"args": {"tensor_parallel": 3}, "image": {"ref": TOP}})
    inv = inventory("h1", "h2", "h4")
    ran = inkctl("images", "push-to-hosts", rec, "--hosts", inv, "-o", "json", timeout=300)
    assert ran.rc == 0, ran.out
    rep = report(ran)
    assert rep["layers"] == 2 and rep["skipped"] == {"h2": 1, "h4": 1} and rep["whole"] == {}, rep
    for h in ("h2", "h4"):
        assert PAYLOAD <= rep["sent"][h] < PAYLOAD + (full - PAYLOAD) // 4, (full, rep)
    assert PAYLOAD <= rep["source_bytes"] < PAYLOAD + (full - PAYLOAD) // 4
    layers = [json.loads(x) for x in ran.stdout.splitlines() if '"image_layers"' in x]
    assert {(e["host"], e["have"], e["of"]) for e in layers} == {("h2", 1, 2), ("h4", 1, 2)}
    want = image_id(cluster, "h1", TOP)
    assert [image_id(cluster, h, TOP) for h in ("h2", "h4")] == [want, want]
    assert runs_with_payload(cluster, "h4") and runs_with_payload(cluster, "h2")
    text = inkctl("images", "push-to-hosts", rec, "--hosts", inv, timeout=120)
    assert text.rc == 0 and "already there: h1, h2, h4" in text.out, text


def test_from_the_control_machines_docker_daemon_when_no_host_has_it(cluster, recipe, inventory, inkctl):
    """No host has the image; this machine's docker daemon does: it streams it (the SDK's
    save, without the layers the hosts have) into the chain."""
    import os

    tag = f"e2e-relay-local-{os.environ.get('INKCTL_E2E_NET_ID', '0')}:1"  # the control daemon is shared
    control = ["docker", "-H", "unix:///var/run/docker.sock"]
    build_top(lambda argv: subprocess.run(["env", "DOCKER_HOST=unix:///var/run/docker.sock", *argv],
                                          capture_output=True, text=True), tag=tag)
    try:
        want = subprocess.run([*control, "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True,
                              text=True).stdout.strip().removeprefix("sha256:")
        rec = recipe("weights", hardware={"nodes": 2}, engine={"args": {"tensor_parallel": 2}, "image": {"ref": tag}})
        inv = inventory("h2", "h4")
        ran = inkctl("images", "push-to-hosts", rec, "--hosts", inv, "-o", "json", timeout=300)
        assert ran.rc == 0, ran
        rep = report(ran)
        assert rep["source"] == "local" and sorted(rep["sent"]) == ["h2", "h4"] and rep["skipped"] == {"h2": 1, "h4": 1}
        assert PAYLOAD <= rep["source_bytes"] < 2 * PAYLOAD, rep  # the fake engine's layer stayed here
        started = {e["host"]: e["source"] for e in map(json.loads, ran.stdout.splitlines()[:-1])
                   if e.get("event") == "image_started"}
        assert started == {"h2": "local", "h4": "h2"}
        assert [image_id(cluster, h, tag) for h in ("h2", "h4")] == [want, want]
        assert runs_with_payload(cluster, "h4", tag)
    finally:
        subprocess.run([*control, "rmi", "-f", tag], capture_output=True)
        for h in ("h2", "h4"):
            cluster.docker(h, "rmi", "-f", tag)


def test_a_relay_host_cut_mid_stream_is_named_the_next_goes_on_from_the_one_before(cluster, recipe, inventory,
                                                                                   inkctl):
    """h1 -> h2 -> h4 over links capped at 40 Mbit/s: h2 is cut while it relays; h4 names it,
    reattaches to h1 from the byte it has and completes. Healed, the rerun sends to h2 only."""
    from tests.e2e.conftest import finish
    from tests.e2e.test_weights import read_until

    payload = 40_000_000
    build_top(lambda argv: cluster.exec("h1", argv), payload=payload)
    rec = recipe("weights", hardware={"nodes": 3}, engine={"args": {"tensor_parallel": 3}, "image": {"ref": TOP}})
    inv = inventory("h1", "h2", "h4")
    cluster.limit_links(40)
    try:
        p = inkctl.start("images", "push-to-hosts", rec, "--hosts", inv, "-o", "json")
        read_until(p, lambda e: e.get("event") == "image_progress" and e["host"] == "h4" and e["bytes"] > 0,
                   timeout=120)
        cluster.cut("h2")
        try:
            out, err = finish(p, timeout=240)
        finally:
            cluster.heal("h2")
        assert p.returncode == 1, out + err
        rep = json.loads(out.strip().splitlines()[-1])
        assert set(rep["failed"]) == {"h2"} and "went away" in rep["failed"]["h2"], rep
        assert rep["reattached"] == [{"host": "h4", "dead": "h2"}] and list(rep["sent"]) == ["h4"], rep
        assert any(e.get("event") == "image_reattached" and e["dead"] == "h2"
                   for e in map(json.loads, out.splitlines()[:-1]))
        assert "h2" in err and no_traceback(err)
        assert image_id(cluster, "h4", TOP) == image_id(cluster, "h1", TOP)
        assert runs_with_payload(cluster, "h4", payload=payload)
        cluster.limit_links(None)
        again = inkctl("images", "push-to-hosts", rec, "--hosts", inv, "-o", "json", timeout=300)
        assert again.rc == 0 and list(report(again)["sent"]) == ["h2"], again
    finally:
        cluster.heal("h2")
        cluster.limit_links(None)
        for h in cluster.hosts:
            cluster.docker(h.name, "rmi", "-f", TOP)


def test_a_host_whose_relay_cannot_start_is_named_and_left_out_of_the_chain(cluster, recipe, inventory, inkctl,
                                                                            only_on_h1):
    """The recipe says docker; h3 runs podman only: its relay says so in one line, and h4, after
    it in the chain, receives from h1 instead."""
    rec = recipe("weights", hardware={"nodes": 3}, engine={"args": {"tensor_parallel": 3}, "image": {"ref": IMAGE}})
    ran = inkctl("images", "push-to-hosts", rec, "--hosts", inventory("h1", "h3", "h4"), timeout=300)
    assert ran.rc == 1, ran.out
    assert "h3: FileNotFoundError" in ran.out and "'docker'" in ran.out and no_traceback(ran.out), ran.out
    assert "h4: receiving from h1" in ran.out and "h4: loaded" in ran.out, ran.out
    assert image_id(cluster, "h4") == image_id(cluster, "h1")
