"""``inkctl init NAME`` for every bundled recipe and example, then the commands it prints, as printed.

The commands that need no hosts run here (plan, on the placeholder hosts of the inventory init
wrote); the ones that need real hosts (doctor, up) are printed after "then put your hosts".
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def inkctl(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


def bundled_names() -> list[str]:
    r = inkctl(ROOT, "recipes", "-o", "json")
    assert r.returncode == 0, r.stderr
    return [row["recipe"] for row in json.loads(r.stdout)]


def printed_now(stdout: str) -> list[list[str]]:
    """The commands init says to run now: the indented ``inkctl ...`` lines before "then"."""
    now = stdout.split("\nthen ", 1)[0].replace(" \\\n", " ")  # a folded command is one command
    return [shlex.split(ln.strip())[1:] for ln in now.splitlines() if ln.startswith("  inkctl ")]


@pytest.mark.parametrize("name", bundled_names())
def test_init_then_every_command_it_prints_succeeds(tmp_path, name):
    i = inkctl(tmp_path, "init", name)
    assert i.returncode == 0, i.stderr
    assert all(len(ln) <= 80 for ln in i.stdout.splitlines()), i.stdout
    commands = printed_now(i.stdout)
    assert commands and commands[0][0] == "plan", i.stdout
    for argv in commands:
        r = inkctl(tmp_path, *argv)
        assert r.returncode == 0, (argv, r.stdout[-2000:], r.stderr[-2000:])
        assert "error" not in r.stderr, r.stderr
    later = i.stdout.split("\nthen ", 1)[1]
    assert f"inkctl up {name}.yaml --hosts hosts.yaml" in later
    # the copy's editor schema line names a file that exists
    text = (tmp_path / f"{name}.yaml").read_text()
    for line in text.splitlines():
        if "$schema=" in line:
            target = line.split("$schema=", 1)[1]
            assert target.startswith("file://") and Path(target[len("file://"):]).is_file(), line


def test_the_inventory_keeps_the_recipes_own_nic_names(tmp_path):
    """vllm-native-2node sets ens1f0 and mlx5_0,mlx5_1: the written inventory must not replace them."""
    assert inkctl(tmp_path, "init", "vllm-native-2node").returncode == 0
    p = inkctl(tmp_path, "plan", "vllm-native-2node.yaml", "--hosts", "hosts.yaml", "-o", "json")
    assert p.returncode == 0, p.stderr
    assert "NCCL_SOCKET_IFNAME=ens1f0" in p.stdout and "NCCL_IB_HCA=mlx5_0,mlx5_1" in p.stdout
    assert "enp1s0f1np1" not in p.stdout and "rocep1s0f1" not in p.stdout


def test_the_inventory_leaves_nic_names_to_what_up_reads_where_the_recipe_uses_rdma(tmp_path):
    """A Spark pair over RoCE: the template pins no interface or HCA (one rail named alone tops out
    near half the port); up reads them from each host, as the plan says."""
    assert inkctl(tmp_path, "init", "inkling-small-2x-dgx-spark-vllm").returncode == 0
    inv = (tmp_path / "hosts.yaml").read_text()
    assert "nccl_socket_ifname:" not in inv.replace("pin nccl_socket_ifname", "") and "ib_hca:" not in inv, inv
    assert "up reads each host's NCCL interface, RDMA rails and RoCE v2 GID index\n# from its sysfs" in inv
    assert inv.count("HF_CACHE:") == 2 and all(len(ln) <= 80 for ln in inv.splitlines()), inv
    p = inkctl(tmp_path, "plan", "inkling-small-2x-dgx-spark-vllm.yaml", "--hosts", "hosts.yaml")
    assert p.returncode == 0, p.stderr
    assert "gpu-1  NCCL_IB_HCA=<read at up: every rail of the port that carries" in p.stdout, p.stdout


def test_the_inventory_asks_for_the_interface_where_a_multinode_recipe_uses_sockets(tmp_path):
    assert inkctl(tmp_path, "init", "gpt-oss-120b-2x-dgx-spark-vllm").returncode == 0
    inv = (tmp_path / "hosts.yaml").read_text()
    assert inv.count("nccl_socket_ifname:") == 2 and "ib_hca:" not in inv, inv


def test_the_inventory_selects_the_recipes_gpus_per_host(tmp_path):
    assert inkctl(tmp_path, "init", "inkling-8x-h200-podman-vllm").returncode == 0
    assert 'gpus: "0,1,2,3,4,5,6,7"' in (tmp_path / "hosts.yaml").read_text()


def test_a_second_recipe_in_one_project_keeps_hosts_yaml_and_gets_its_own_inventory(tmp_path):
    """init of another recipe where hosts.yaml is (two models behind a gateway, say): hosts.yaml
    is kept as the user edited it, the new recipe's template is hosts-<recipe>.yaml, and the
    commands init prints name that file and plan as written."""
    first = inkctl(tmp_path, "init", "qwen3-coder-30b-fp8-1x-h100-vllm")
    assert first.returncode == 0, first.stderr
    (tmp_path / "hosts.yaml").write_text((tmp_path / "hosts.yaml").read_text() + "# mine\n")
    name = "llama-3.3-70b-fp8-2x-rtxpro6000-vllm"
    second = inkctl(tmp_path, "init", name)
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "hosts.yaml").read_text().endswith("# mine\n")
    assert (tmp_path / f"hosts-{name}.yaml").is_file()
    assert all(len(ln) <= 80 for ln in second.stdout.splitlines()), second.stdout
    commands = printed_now(second.stdout)
    assert commands == [["plan", f"{name}.yaml", "--hosts", f"hosts-{name}.yaml"]], second.stdout
    r = inkctl(tmp_path, *commands[0])
    assert r.returncode == 0, r.stderr
    again = inkctl(tmp_path, "init", name)
    assert again.returncode == 2 and "overwrites nothing" in again.stderr
