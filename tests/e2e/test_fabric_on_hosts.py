"""The fabric per rail on the test cluster: each host gets a DGX Spark's sysfs tree
(tests/sysfs_trees.py) under the INKCTL_SYSFS_ROOT of its SSH sessions, and dummy links for the
rails' netdevs in its namespace; the fake engine prints NCCL's own lines for the transport it
"chose" (FAKE_NCCL_NET=ib: the format of tests/fixtures/nccl/ with NET/IB)."""

from __future__ import annotations

import json

import pytest

from tests import sysfs_trees as st
from tests.e2e.conftest import containers, no_traceback
from tests.e2e.test_guard import stand_in  # noqa: F401  (fixture)
from tests.e2e.test_stayup import NO_IB_DEVICE


@pytest.fixture
def fabric(cluster, stand_in):  # noqa: F811
    """fabric("h2", tree): that host's RDMA fabric for this test (None: no RDMA device); every
    host touched gets none again at the end. Its docker drops --device /dev/infiniband (this
    machine has none to hand to a container)."""
    touched = []

    def put(host: str, tree):
        if host not in touched:
            stand_in(host, "docker", NO_IB_DEVICE.format(real=stand_in.real("docker")))
        cluster.fabric(host, tree)
        touched.append(host)

    yield put
    for h in touched:
        cluster.fabric(h, None)


def _address(cluster, host: str) -> str:
    return cluster.host(host).address


def _rdma(recipe, name: str, **network):
    return recipe("vllm-native-2", name=name, smoke={"enabled": False}, network={"rdma": True, **network},
                  container={"env": {"FAKE_NCCL_NET": "ib", "FAKE_READY_AFTER": "2"}})


def _engine_env(cluster, host: str, container: str) -> dict:
    raw = cluster.docker(host, "exec", container, "cat", "/proc/1/environ").stdout
    return dict(kv.split("=", 1) for kv in raw.split("\0") if "=" in kv)


def _fabric_rows(r) -> dict:
    """doctor -o json: the fabric row of each host."""
    return {c["host"]: c for c in json.loads(r.stdout)["checks"] if c["check"] == "fabric"}


def test_up_reads_the_gid_index_rails_and_interface_from_each_host_every_time(cluster, inkctl, inventory, recipe, fabric):
    a1, a2 = _address(cluster, "h1"), _address(cluster, "h2")
    fabric("h1", st.spark(a1))
    fabric("h2", st.spark(a2))
    # the cluster's inventory pins nccl_socket_ifname: eth0; h2 leaves it to what up reads
    rec, inv = _rdma(recipe, "e2e-fabric"), inventory("h1", "h2", h2={"nccl_socket_ifname": None})
    paper = inkctl("plan", rec, "--hosts", inv)
    assert paper.rc == 0, paper
    assert f"h2  NCCL_IB_GID_INDEX=<read at up: the RoCE v2 GID index that carries {a2}>  (read from the host's sysfs at up)" \
        in paper.stdout
    assert "h1  NCCL_SOCKET_IFNAME=eth0  (inventory h1: nccl_socket_ifname)" in paper.stdout
    r = inkctl("up", rec, "--hosts", inv, timeout=180)
    assert r.rc == 0, r
    env = _engine_env(cluster, "h2", "inkctl-e2e-fabric-r1")
    assert (env["NCCL_IB_GID_INDEX"], env["NCCL_IB_HCA"], env["NCCL_SOCKET_IFNAME"], env["VLLM_HOST_IP"]) == \
        ("3", "rocep1s0f1,roceP2p1s0f1", "enp1s0f1np1", a2)
    assert _engine_env(cluster, "h1", "inkctl-e2e-fabric-r0")["NCCL_SOCKET_IFNAME"] == "eth0"  # the pin wins
    logs = inkctl("logs", rec, "--hosts", inv, "--rank", "1")
    assert "NET/IB : Using [0]rocep1s0f1" in logs.stdout and "Using network IB" in logs.stdout, logs
    assert inkctl("down", rec, "--hosts", inv).rc == 0
    # after a "reboot" h2's RoCE v2 entry of its address sits at another index: the next up reads it again
    fabric("h2", st.spark(a2).rail("rocep1s0f1", ipv6=("fd00:0000:0000:0000:0000:0000:0000:0012",)))
    r = inkctl("up", rec, "--hosts", inv, timeout=180)
    assert r.rc == 0, r
    assert _engine_env(cluster, "h2", "inkctl-e2e-fabric-r1")["NCCL_IB_GID_INDEX"] == "5"
    assert _engine_env(cluster, "h1", "inkctl-e2e-fabric-r0")["NCCL_IB_GID_INDEX"] == "3"
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_a_fabric_that_cannot_deliver_stops_up_before_any_rank_starts(cluster, inkctl, inventory, recipe, fabric):
    a1, a2 = _address(cluster, "h1"), _address(cluster, "h2")
    fabric("h1", st.spark(a1))
    fabric("h2", st.spark(a2, mtu=1500))
    rec, inv = _rdma(recipe, "e2e-fabric-mtu"), inventory("h1", "h2")
    r = inkctl("up", rec, "--hosts", inv, timeout=120)
    assert r.rc == 1 and "h2 (fabric)" in r.stderr and no_traceback(r.out), r
    assert "MTU 1500 on enp1s0f1np1 of h2 where h1 9000 (IB MTU 1024 against 4096)" in r.out, r
    assert "ip link set enp1s0f1np1 mtu 9000" in r.out, r
    assert containers(cluster, "h1", "e2e-fabric-mtu") == [] and containers(cluster, "h2", "e2e-fabric-mtu") == []
    # waived knowingly, it starts
    r = inkctl("up", rec, "--hosts", inv, "--skip-check", "fabric", timeout=180)
    assert r.rc == 0, r
    assert inkctl("down", rec, "--hosts", inv).rc == 0


def test_doctor_names_contradicting_pins_degraded_rails_and_a_host_without_rdma(cluster, inkctl, inventory, recipe, fabric):
    a1, a2 = _address(cluster, "h1"), _address(cluster, "h2")
    fabric("h1", st.spark(a1))
    fabric("h2", st.spark(a2, rate="25 Gb/sec (1X EDR)"))
    inv = inventory("h1", "h2")
    r = inkctl("doctor", _rdma(recipe, "e2e-fabric-doc", nccl_env={"NCCL_IB_GID_INDEX": "2"}), "--hosts", inv, "-o", "json")
    assert r.rc == 1, r
    rows = _fabric_rows(r)
    assert rows["h1"]["status"] == "fail" and rows["h1"]["detail"].startswith(
        f"NCCL_IB_GID_INDEX=2 (pinned) on h1: GID 2 of rocep1s0f1:1 is IB/RoCE v1 {a1}, not RoCE v2 on {a1}")
    assert rows["h1"]["hint"].startswith("set NCCL_IB_GID_INDEX=3")
    assert "rail rocep1s0f1:1 on h2 links at 25 Gb/sec (1X EDR), below the 200 Gb/sec" in rows["h2"]["detail"]
    # one host RDMA, the other not
    fabric("h2", None)
    r = inkctl("doctor", _rdma(recipe, "e2e-fabric-doc2"), "--hosts", inv, "-o", "json")
    assert r.rc == 1, r
    rows = _fabric_rows(r)
    assert rows["h1"]["status"] == "ok" and "RoCE v2 GID 3 of rocep1s0f1:1 carries" in rows["h1"]["detail"]
    assert rows["h2"]["status"] == "fail" and "h2 has no RDMA device" in rows["h2"]["detail"]
    assert "while h1 has one" in rows["h2"]["detail"]
    # an inventory that pins h1's HCA to a rail on a subnet h2 does not have
    fabric("h1", st.spark(a1).rail("rocep1s0f0", state="4: ACTIVE", phys_state="5: LinkUp", address="10.9.9.1"))
    fabric("h2", st.spark(a2))
    pinned = inventory("h1", "h2", h1={"ib_hca": ["rocep1s0f0"]})
    r = inkctl("doctor", _rdma(recipe, "e2e-fabric-doc3"), "--hosts", pinned, "-o", "json")
    assert r.rc == 1, r
    rows = _fabric_rows(r)
    assert rows["h1"]["detail"].startswith(
        "NCCL_IB_HCA names rocep1s0f0 (pinned) on h1: it is on 10.9.9.0/24, which no other host's HCA reaches"), rows
    assert rows["h1"]["hint"].startswith("set ib_hca: [rocep1s0f1, roceP2p1s0f1] for h1 in the inventory")
    assert rows["h2"]["status"] == "ok"


def test_doctor_network_measures_each_rail_with_ib_write_bw_against_its_link(cluster, inkctl, inventory, recipe, fabric):
    from tests.cluster import fake_perftest

    a1, a2 = _address(cluster, "h1"), _address(cluster, "h2")
    fabric("h1", st.spark(a1))
    fabric("h2", st.spark(a2))
    rdv = f"{cluster.state}/perftest"
    h1, h2 = cluster.host("h1"), cluster.host("h2")
    # h2's first rail gives 13.4 Gb/s on its 200 G port (dgx-spark-playbooks PR #108's case)
    fake_perftest.install(h1.bin_dir, rdv, {"rocep1s0f1": (a1, 184.2), "roceP2p1s0f1": (f"192.168.101.{a1.rsplit('.', 1)[1]}", 183.9)})
    fake_perftest.install(h2.bin_dir, rdv, {"rocep1s0f1": (a2, 13.4), "roceP2p1s0f1": (f"192.168.101.{a2.rsplit('.', 1)[1]}", 182.0)})
    rec, inv = _rdma(recipe, "e2e-fabric-bw"), inventory("h1", "h2")
    try:
        r = inkctl("doctor", rec, "--hosts", inv, "--network", "-o", "json", timeout=300)
        text = inkctl("doctor", rec, "--hosts", inv, "--network", timeout=300)
    finally:
        fake_perftest.remove(h1.bin_dir)
        fake_perftest.remove(h2.bin_dir)
    assert r.rc != 0, r
    rails = json.loads(r.stdout)["network"]["rails"]
    assert [(x["client"]["host"], x["client"]["device"], x["server"]["host"], x["server"]["device"], x["verdict"])
            for x in rails] == [("h1", "rocep1s0f1", "h2", "rocep1s0f1", "slow"), ("h1", "roceP2p1s0f1", "h2", "roceP2p1s0f1", "ok")], rails
    assert (rails[0]["gbps"], rails[0]["expected_gbps"], rails[0]["floor_gbps"], rails[0]["where"]) == (13.4, 200.0, 160.0, "host")
    assert rails[1]["gbps"] == 182.0 and rails[1]["server"]["gid"] == 3
    assert "rail h1:rocep1s0f1 -> h2:rocep1s0f1: slow (13.4 Gb/s, floor 160)" in r.stderr, r
    assert "h1:rocep1s0f1 -> h2:rocep1s0f1" in text.stdout and "RDMA per rail: ib_write_bw (Gb/s)" in text.stdout, text
    assert no_traceback(r.out) and no_traceback(text.out)
