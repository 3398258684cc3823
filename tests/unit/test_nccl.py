"""NCCL transport truth from NCCL 2.28's own log lines (tests/fixtures/nccl/, captured on a real H200)."""

from __future__ import annotations

from pathlib import Path

from inkctl.execute.supervise.nccl import RankNet, TransportCheck, fallback_message

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl"


def lines(name: str) -> list[str]:
    return (FIX / name).read_text().splitlines()


def read_log(lines) -> RankNet:
    """What a rank's NCCL said, fed line by line as the health wait feeds it."""
    net = RankNet()
    for line in lines:
        net.feed(line)
    return net


def test_the_silent_fallback_to_sockets_is_read_with_its_interface():
    net = read_log(lines("nccl-default.log"))
    assert net.network == "Socket" and net.interface == "eth0" and net.address == "192.0.2.2<0>"
    assert net.no_ib_device


def test_a_missing_hca_still_falls_back_and_sockets_by_request_read_the_same():
    assert read_log(lines("nccl-ib-hca-missing.log")).network == "Socket"
    net = read_log(lines("nccl-socket-eth0.log"))
    assert net.network == "Socket" and net.interface == "eth0" and not net.no_ib_device


def test_a_bad_interface_name_is_seen():
    net = read_log(lines("nccl-bad-ifname.log"))
    assert net.no_interface and net.network is None


def test_rdma_in_use_is_not_a_fallback():
    net = read_log(["h1:7:7 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
                    "h1:7:7 [0] NCCL INFO Using network IB"])
    assert net.network == "IB" and net.ib_device == "mlx5_0"


class W:
    def __init__(self, host, rank):
        self.host, self.rank = host, rank


def test_the_check_fails_a_rank_on_sockets_naming_host_rank_and_interface():
    check = TransportCheck(hcas_of={"h2": ["rocep1s0f1"]})
    found = [check(W("h2", 1), line) for line in lines("nccl-default.log")]
    fails = [f for f in found if f]
    assert fails == [fallback_message("h2", 1, read_log(lines("nccl-default.log")), ["rocep1s0f1"])]
    assert fails[0].startswith("rank 1 on h2: NCCL fell back to TCP sockets (NET/Socket over eth0")
    assert "asked for RDMA (NET/IB on rocep1s0f1)" in fails[0] and "No device found" in fails[0]


def test_allowed_fallback_warns_instead():
    said = []
    check = TransportCheck(hcas_of={}, allow=True, warn=said.append)
    assert not any(check(W("h1", 0), line) for line in lines("nccl-default.log"))
    assert len(said) == 1 and "allowed by --allow-socket-fallback" in said[0]


def test_lines_without_nccl_cost_nothing():
    assert RankNet().feed("INFO 12-01 loading weights") is False
