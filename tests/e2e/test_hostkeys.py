"""Host keys through the real CLI: unknown refused (fingerprint, flag named), accepted with
--accept-new-host-keys (and recorded as OpenSSH would), changed refused even with the flag."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import containers

pytestmark = pytest.mark.cluster


def fingerprint(cluster, host: str) -> str:
    pub = Path(cluster.state) / "host_keys" / f"{host}.pub"
    return subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True).stdout.split()[1]


def test_unknown_host_key_is_refused_then_accepted_with_the_flag(cluster, inkctl, inventory, recipe, home):
    kh = home / ".ssh" / "known_hosts"
    kh.write_text("")
    inv, rec = inventory("h1"), recipe("single", name="e2e-hostkey")
    addr = cluster.host("h1").address

    r = inkctl("up", rec, "--hosts", inv)
    assert r.rc == 1, r
    assert "h1: host key unknown" in r.stderr and "ED25519" in r.stderr and fingerprint(cluster, "h1") in r.stderr
    assert "--accept-new-host-keys" in r.stderr and "nothing was started" in r.stderr
    assert containers(cluster, "h1", "e2e-hostkey") == [] and kh.read_text() == ""

    r = inkctl("up", rec, "--hosts", inv, "--accept-new-host-keys")
    assert r.rc == 0, r
    assert f"trusted the new host key of h1: ED25519 {fingerprint(cluster, 'h1')}" in r.stderr
    found = subprocess.run(["ssh-keygen", "-F", addr, "-f", str(kh)], capture_output=True, text=True)
    assert found.returncode == 0 and addr in found.stdout  # recorded, port 22: the bare address
    assert containers(cluster, "h1", "e2e-hostkey") == ["inkctl-e2e-hostkey-r0 running"]
    d = inkctl("down", rec, "--hosts", inv)  # no flag needed any more
    assert d.rc == 0, d


def test_changed_host_key_is_refused_even_with_the_flag(cluster, inkctl, inventory, recipe, home, tmp_path):
    kh = home / ".ssh" / "known_hosts"
    addr = cluster.host("h1").address
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "impostor")], check=True)
    typ, blob = (tmp_path / "impostor.pub").read_text().split()[:2]
    kh.write_text("".join(line + "\n" for line in kh.read_text().splitlines() if not line.startswith(addr + " "))
                  + f"{addr} {typ} {blob}\n")
    before = kh.read_text()
    expected = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "impostor.pub")], capture_output=True, text=True).stdout.split()[1]
    inv, rec = inventory("h1"), recipe("single", name="e2e-hostkey2")
    for flags in ((), ("--accept-new-host-keys",)):
        r = inkctl("up", rec, "--hosts", inv, *flags)
        assert r.rc == 1, r
        assert "h1: HOST KEY CHANGED" in r.stderr and expected in r.stderr and fingerprint(cluster, "h1") in r.stderr
        assert containers(cluster, "h1", "e2e-hostkey2") == []
    assert kh.read_text() == before
