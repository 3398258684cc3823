"""The fabric per rail: sysfs trees written as the kernel lays them out (tests/sysfs_trees.py),
read by the probe's real fabric script through a real shell, judged over a group of hosts, and the
values that are read at up written into the rank's env file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from inkctl.execute.deploy.preflight import PreflightFailed, run_preflight
from inkctl.execute.deploy.preflight.fabric import values
from inkctl.execute.deploy.secrets import render_env_file
from inkctl.execute.state import fabric as fab
from inkctl.execute.state.probe import HostAnswer, split_sections
from inkctl.plan import fabric as planfabric
from inkctl.plan.deploy import build_plan
from inkctl.plan.hostvars import HostContext
from inkctl.plan.step import EnvFile, FabricRef
from inkctl.recipe.hosts import Host
from tests import sysfs_trees as st
from tests.unit.test_preflight import Replay, answer, by_check, recipe

A1, A2 = "192.168.100.10", "192.168.100.11"  # the playbook's two Sparks on the first rail


def section(tmp: Path, tree: st.HostTree | None, address: str, name: str) -> str:
    """What the probe's fabric section prints for this tree (the real script, a real shell)."""
    root = tmp / name
    if tree is None:
        st.no_rdma(root)
    else:
        st.write(root, tree)
    script = 'fab_root="$1"; fab_addr="$2"\n' + fab.SECTION
    p = subprocess.run(["sh", "-c", script, "fabric", str(root), address], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def two(**over):
    return recipe(hardware__nodes=2, hardware__gpus_per_host=4, engine__args__tensor_parallel=8,
                  container__network="host", network__rdma=True, **over)


def spark_hosts(**inv):
    return [Host(name=f"h{i}", address=a, vars={"HF_HOME": f"/data/hf{i}"}, **inv.get(f"h{i}", {}))
            for i, a in ((1, A1), (2, A2))]


def preflight(tmp: Path, r, trees: dict, inv: dict | None = None, **kw):
    hs = spark_hosts(**(inv or {}))
    plan = build_plan(r, hs)
    ts = {h.name: Replay(h.name, preflight=answer(net=("enp1s0f1np1 up 0x1003\nlo unknown 0x9\n", "", 0),
                                                  fabric=(section(tmp, trees[h.name], h.address, h.name), "", 0)))
          for h in hs}
    return plan, ts, run_preflight(r, plan, ts, **kw)


def fabric_row(results, host):
    return by_check(results, host)["fabric"]


# --- reading ----------------------------------------------------------------------------------

def test_a_spark_reads_as_four_rails_two_per_port_and_gid_3_carries_its_address(tmp_path):
    f = fab.parse(section(tmp_path, st.spark(A1), A1, "h1"))
    assert [r.device for r in f.rails] == ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"]
    r = f.rail("rocep1s0f1")
    assert r is not None and r.active and r.gbps == 200.0 and r.width == "4X" and r.netdev == "enp1s0f1np1"
    assert r.netdev_mtu == 9000 and r.ib_mtu == 4096 and r.pci == "0000:01:00.1"
    assert [m.device for m in f.mates(r)] == ["roceP2p1s0f1", "rocep1s0f1"]  # one physical port
    assert [g.type for g in r.gids] == ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]
    d = fab.derive(f)
    assert d is not None and (d.gid.index, d.hcas, d.ifname, d.address) == (3, ("rocep1s0f1", "roceP2p1s0f1"), "enp1s0f1np1", A1)


def test_the_gid_index_moves_when_an_ipv6_address_comes_first(tmp_path):
    tree = st.spark(A1).rail("rocep1s0f1", ipv6=("fd00:0000:0000:0000:0000:0000:0000:0010",))
    d = fab.derive(fab.parse(section(tmp_path, tree, A1, "h1")))
    assert d is not None and d.gid.index == 5


def test_ib_mtu_follows_the_netdev_as_the_kernel_computes_it():
    assert (fab.ib_mtu(9000), fab.ib_mtu(4200), fab.ib_mtu(1500), fab.ib_mtu(1024)) == (4096, 4096, 1024, 512)


def test_a_host_name_as_cluster_address_is_resolved_on_the_host(tmp_path):
    f = fab.parse(section(tmp_path, st.spark("127.0.0.1"), "localhost", "h1"))
    assert f.address == "127.0.0.1" and fab.derive(f) is not None


# --- the plan ---------------------------------------------------------------------------------

def test_plan_reads_what_nothing_pins_and_says_where_each_value_comes_from():
    r = two()
    hs = spark_hosts(h1={"nccl_socket_ifname": "enp1s0f1np1"})
    got = {s.name: s for s in planfabric.settings(r, HostContext(hs[0], 0, hs[0], False))}
    assert got["NCCL_SOCKET_IFNAME"].value == "enp1s0f1np1" and got["NCCL_SOCKET_IFNAME"].source == "inventory h1: nccl_socket_ifname"
    assert isinstance(got["NCCL_IB_GID_INDEX"].value, FabricRef) and got["NCCL_IB_GID_INDEX"].source.startswith("read from")
    assert isinstance(got["VLLM_HOST_IP"].value, FabricRef)  # the engine's own variable
    plan = build_plan(r, hs)
    env = next(p for p in plan.puts() if p.host == "h1" and isinstance(p.content, EnvFile))
    assert env.content.render() == (
        f"NCCL_IB_GID_INDEX=<read at up: the RoCE v2 GID index that carries {A1}>\n"
        f"NCCL_IB_HCA=<read at up: every rail of the port that carries {A1}>\n"
        f"VLLM_HOST_IP=<read at up: {A1} as the host resolves it>\n")


def test_a_recipe_that_pins_every_value_plans_exactly_as_before():
    pinned = two(network__socket_ifname="eth0", network__ib_hca=["mlx5_0"], network__host_ip_env="VLLM_HOST_IP",
                 network__nccl_env={"NCCL_IB_GID_INDEX": "3"})
    plan = build_plan(pinned, spark_hosts())
    assert not [p for p in plan.puts() if isinstance(p.content, EnvFile)]
    assert all("--env-file" not in s.argv for s in plan.steps() if hasattr(s, "argv"))
    assert build_plan(pinned, spark_hosts(), read_fabric=False) == plan


# --- judged over the group ----------------------------------------------------------------------

def test_two_sparks_pass_and_up_writes_what_was_read(tmp_path):
    plan, ts, res = preflight(tmp_path, two(), {"h1": st.spark(A1), "h2": st.spark(A2)})
    row = fabric_row(res, "h2")
    assert row.status == "ok", row
    assert "RoCE v2 GID 3 of rocep1s0f1:1 carries 192.168.100.11: NCCL_IB_GID_INDEX=3 NCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1" in row.detail
    assert "one port: roceP2p1s0f0 + rocep1s0f0, roceP2p1s0f1 + rocep1s0f1" in row.detail
    answers = {n: HostAnswer(n, None, split_sections(t.answers["preflight"].text(), "")) for n, t in ts.items()}
    got = values(plan, answers)
    assert got["h2"] == {"gid_index": "3", "ib_hca": "rocep1s0f1,roceP2p1s0f1", "socket_ifname": "enp1s0f1np1",
                         "host_ip": A2}
    env = next(p for p in plan.puts() if p.host == "h2" and isinstance(p.content, EnvFile))
    assert render_env_file(env.content, {}, got["h2"]).decode() == (
        "NCCL_IB_GID_INDEX=3\nNCCL_IB_HCA=rocep1s0f1,roceP2p1s0f1\nNCCL_SOCKET_IFNAME=enp1s0f1np1\n"
        f"GLOO_SOCKET_IFNAME=enp1s0f1np1\nVLLM_HOST_IP={A2}\n")
    assert render_env_file(env.content, {}, None) == b""  # nothing read: NCCL chooses, as without the variables


def _failed(tmp_path, trees, r=None, inv=None) -> dict:
    with pytest.raises(PreflightFailed) as ei:
        preflight(tmp_path, r or two(), trees, inv)
    rows = {x.host: x for x in ei.value.results if x.check == "fabric"}
    for host, row in rows.items():  # the message names what is wrong and the fix; the rails stay in the table
        if row.status == "fail":
            assert f"({host} (fabric)" in ei.value.message or f" {host} (fabric)" in ei.value.message
            assert f"\n  {host}: {row.detail.split(' [rails as read: ')[0]}\n    {row.hint}" in ei.value.message
            assert "rails as read" not in ei.value.message
    return rows


def test_an_mtu_of_1500_on_one_side_is_refused_with_the_fix(tmp_path):
    rows = _failed(tmp_path, {"h1": st.spark(A1), "h2": st.spark(A2, mtu=1500)})
    assert rows["h1"].status == "ok"
    bad = rows["h2"]
    assert bad.detail.startswith("MTU 1500 on enp1s0f1np1 of h2 where h1 9000 (IB MTU 1024 against 4096)")
    assert "ip link set enp1s0f1np1 mtu 9000" in bad.hint and "--skip-check fabric" in bad.hint


def test_a_rail_linked_below_its_rating_is_refused(tmp_path):
    rows = _failed(tmp_path, {"h1": st.spark(A1), "h2": st.spark(A2, rate="25 Gb/sec (1X EDR)")})
    assert "rail rocep1s0f1:1 on h2 links at 25 Gb/sec (1X EDR), below the 200 Gb/sec the other rails of the group say" \
        in rows["h2"].detail
    # both degraded alike: only the recipe's rating catches it
    r = two(network__rail_gbps=200)
    rows = _failed(tmp_path / "b", {"h1": st.spark(A1, rate="25 Gb/sec (1X EDR)"), "h2": st.spark(A2, rate="25 Gb/sec (1X EDR)")}, r)
    assert "below the 200 Gb/sec network.rail_gbps say" in rows["h1"].detail


def test_a_mate_rail_down_is_refused(tmp_path):
    tree = st.spark(A2).rail("roceP2p1s0f1", state="1: DOWN", phys_state="3: Disabled")
    rows = _failed(tmp_path, {"h1": st.spark(A1), "h2": tree})
    assert "rail roceP2p1s0f1:1 (enP2p1s0f1np1) on h2 is DOWN (Disabled), and NCCL_IB_HCA uses it" in rows["h2"].detail


def test_pcie_trained_below_its_maximum_is_refused(tmp_path):
    tree = st.spark(A2, pcie=("32.0 GT/s PCIe", "2", "32.0 GT/s PCIe", "4"))
    rows = _failed(tmp_path, {"h1": st.spark(A1), "h2": tree})
    assert "the PCIe link of rocep1s0f1 (0000:01:00.1) on h2 trained at 32.0 GT/s PCIe x2 of 32.0 GT/s PCIe x4" in rows["h2"].detail


def test_one_host_rdma_and_the_other_not_is_refused_and_none_at_all_is_a_warning(tmp_path):
    rows = _failed(tmp_path, {"h1": st.spark(A1), "h2": None})
    assert rows["h2"].detail.startswith("h2 has no RDMA device (nothing in ")
    assert "while h1 has one: NCCL would fall back to TCP sockets" in rows["h2"].detail
    _, _, res = preflight(tmp_path / "none", two(), {"h1": None, "h2": None})
    assert fabric_row(res, "h1").status == "warn" and "NCCL will use TCP sockets" in fabric_row(res, "h1").detail


def test_an_address_that_only_roce_v1_carries_is_refused(tmp_path):
    rows = _failed(tmp_path, {"h1": st.spark(A1), "h2": st.spark(A2).rail("rocep1s0f1", v1_only=True)})
    assert rows["h2"].detail.startswith(
        "no RoCE v2 GID on h2 carries its cluster address 192.168.100.11 (GIDs with it: GID 2 of rocep1s0f1:1 (IB/RoCE v1))")


def test_a_pinned_gid_index_that_is_roce_v1_names_the_one_that_works(tmp_path):
    r = two(network__nccl_env={"NCCL_IB_GID_INDEX": "2"})
    rows = _failed(tmp_path, {"h1": st.spark(A1), "h2": st.spark(A2)}, r)
    assert rows["h1"].detail.startswith(
        "NCCL_IB_GID_INDEX=2 (pinned) on h1: GID 2 of rocep1s0f1:1 is IB/RoCE v1 192.168.100.10, not RoCE v2 on 192.168.100.10")
    assert rows["h1"].hint.startswith("set NCCL_IB_GID_INDEX=3")


def test_a_pinned_hca_on_another_subnet_names_the_rails_that_carry_the_address(tmp_path):
    trees = {"h1": st.spark(A1).rail("rocep1s0f0", state="4: ACTIVE", phys_state="5: LinkUp", address="10.9.9.1"),
             "h2": st.spark(A2)}
    rows = _failed(tmp_path, trees, inv={"h1": {"ib_hca": ["rocep1s0f0"]}})
    assert rows["h1"].detail.startswith("NCCL_IB_HCA names rocep1s0f0 (pinned) on h1: it is on 10.9.9.0/24, which no other host's HCA reaches")
    assert rows["h1"].hint.startswith("set ib_hca: [rocep1s0f1, roceP2p1s0f1] for h1 in the inventory")


def test_skip_check_fabric_waives_it_knowingly(tmp_path):
    _, _, res = preflight(tmp_path, two(), {"h1": st.spark(A1), "h2": st.spark(A2, mtu=1500)}, skip={"fabric"})
    row = fabric_row(res, "h2")
    assert row.status == "skipped" and row.detail.startswith("skipped (--skip-check); would be: MTU 1500")


def test_without_rdma_the_rails_are_reported_and_nothing_is_refused(tmp_path):
    r = recipe(hardware__nodes=2, hardware__gpus_per_host=4, engine__args__tensor_parallel=8, container__network="host",
               network__socket_ifname="enp1s0f1np1")
    _, _, res = preflight(tmp_path, r, {"h1": st.spark(A1), "h2": st.spark(A2, mtu=1500)})
    assert fabric_row(res, "h2").status == "ok" and "rocep1s0f1:1 ACTIVE 200 Gb/sec (4X HDR) MTU 1500 (IB 1024)" in fabric_row(res, "h2").detail


# --- ib_write_bw ------------------------------------------------------------------------------

# perftest's client report, as published runs print it (a RoCE port, GID index 4, -D duration mode:
# the peak column reads 0.00), with the CPU-frequency warning perftest puts between header and row
IB_WRITE_BW = """\
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF		Device         : mlx5_0
 Number of qps   : 1		Transport type : IB
 Connection type : RC		Using SRQ      : OFF
 Mtu             : 4096[B]
 Link type       : Ethernet
 GID index       : 4
---------------------------------------------------------------------------------------
 local address: LID 0000 QPN 0x008a PSN 0xfffb6d RKey 0x238f86 VAddr 0x007dd5a3cfd000
 GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:06:116
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
Conflicting CPU frequency values detected: 1500.000000 != 3300.016000. CPU Frequency is not max.
 65536      560845           0.00               98.02                0.186950
---------------------------------------------------------------------------------------
"""


def test_ib_write_bw_average_is_read_under_perftest_header():
    from inkctl.execute.deploy.railbw import parse_bw

    assert parse_bw(IB_WRITE_BW) == 98.02
    assert parse_bw(" Couldn't connect to 10.0.0.2:18515\n") is None


def test_the_rails_measured_are_the_ones_nccl_gets_each_on_its_own_gid(tmp_path):
    from inkctl.execute.deploy.railbw import RailResult, rails_of

    f = fab.parse(section(tmp_path, st.spark(A1), A1, "h1"))
    got = rails_of("h1", f, A1, [])
    assert [(r.device, r.gid, r.address, r.link_gbps) for r in got] == [
        ("rocep1s0f1", 3, A1, 200.0), ("roceP2p1s0f1", 3, "192.168.101.10", 200.0)]
    assert [r.device for r in rails_of("h1", f, A1, ["roceP2p1s0f1"])] == ["roceP2p1s0f1"]  # a pin wins
    slow = RailResult(got[0], got[0], gbps=13.4, expected=200.0, floor=160.0)
    assert slow.verdict == "slow" and RailResult(got[0], got[0]).verdict == "not measured"


def test_the_json_row_carries_every_rail_as_read(tmp_path):
    _, _, res = preflight(tmp_path, two(), {"h1": st.spark(A1), "h2": st.spark(A2)})
    data = fabric_row(res, "h1").as_dict()["data"]
    rail = next(r for r in data["rails"] if r["device"] == "rocep1s0f1")
    assert (rail["state"], rail["gbps"], rail["width"], rail["mtu"], rail["ib_mtu"], rail["port_mates"]) == \
        ("4: ACTIVE", 200.0, "4X", 9000, 4096, ["roceP2p1s0f1"])
    assert [(g["index"], g["type"], g["ipv4"]) for g in rail["gids"]][2:] == [(2, "IB/RoCE v1", A1), (3, "RoCE v2", A1)]
    assert data["derived"] == {"gid_index": "3", "ib_hca": "rocep1s0f1,roceP2p1s0f1", "socket_ifname": "enp1s0f1np1",
                               "host_ip": A1}
    assert "data" not in by_check(res, "h1")["gpus"].as_dict()  # other rows keep their shape


def test_the_whole_probe_reads_the_tree_it_is_pointed_at_and_the_mounts_still_line_up(tmp_path):
    from inkctl.execute.state.probe import launch_probe_argv

    root = st.write(tmp_path / "sys", st.spark(A1))
    argv = launch_probe_argv("docker", "img:1", [str(tmp_path / "sys"), str(tmp_path / "absent")], sysfs=str(root), address=A1)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    s = split_sections(p.stdout, p.stderr)
    assert s.get("paths") == ("present\nmissing", "", 0)
    assert s.get("hcas")[0].split() == ["roceP2p1s0f0", "roceP2p1s0f1", "rocep1s0f0", "rocep1s0f1"]
    d = fab.derive(fab.parse(s.get("fabric")[0]))
    assert d is not None and d.gid.index == 3 and d.address == A1
