"""``doctor --network``'s all-reduce on a real GPU: the probe the hosts run, run here, and its
output read by the same parsers. Runs where torch sees a CUDA GPU (the project's device machine
has one H200); skipped elsewhere, where tests/unit/test_startup.py reads recorded output."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from inkctl.execute.deploy.netcheck import SCRIPT, diagnose, parse_probe

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU here", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_probe_all_reduces_on_this_gpu_and_its_output_parses():
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(_free_port()), "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
           "NCCL_NVLS_ENABLE": "0"}
    res = subprocess.run([sys.executable, str(SCRIPT), str(1 << 20), str(1 << 24), "5"], env=env,
                         capture_output=True, text=True, timeout=300)
    text = res.stdout + res.stderr
    assert res.returncode == 0, text[-3000:]
    out = parse_probe(text)
    assert out.done and out.error is None
    assert out.start is not None and out.start["world"] == 1
    assert out.start["nccl"] == ".".join(str(v) for v in torch.cuda.nccl.version())
    assert out.start["gpu"] == torch.cuda.get_device_name(0)
    assert [s.bytes for s in out.sizes] == [1 << 20, 1 << 22, 1 << 24]
    assert all(s.wrong == 0 and s.time_us > 0 and s.busbw_gbs == 0.0 for s in out.sizes)  # one rank
    d = diagnose(text)
    assert d.net.network in ("Socket", "IB"), text[-3000:]  # NCCL said which network it would use
