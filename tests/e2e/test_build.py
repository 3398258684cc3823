"""Patched images on the simulated cluster, with the real CLI, real dockerd and real podman.

Each test works on a scratch copy of a tests/e2e/recipes/build-*.yaml recipe; the images it
builds are content-addressed tags of inkctl-fake-engine, removed first so a build is a build.
"""

from __future__ import annotations

import difflib
import hashlib
import json

import pytest

from tests.e2e._images import Built, Workspace, in_image, ok_json
from tests.e2e.conftest import said

pytestmark = pytest.mark.cluster
BASE = "inkctl-fake-engine:latest"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def podman(doc: dict) -> None:
    doc["container"].update(runtime="podman", gpus="cdi")


def base_id(cluster, host: str = "h1") -> str:
    raw = cluster.docker(host, "image", "inspect", "--format", "{{.Id}}", BASE, check=True).stdout.strip()
    return raw if raw.startswith("sha256:") else f"sha256:{raw}"  # podman prints the bare hex


@pytest.fixture
def built(cluster):
    b = Built(cluster)
    yield b
    b.clean()


def fresh_tag(built: Built, inkctl, ws: Workspace, *hosts: str, local: bool = False) -> str:
    """The recipe's content-addressed tag (from --emit, which builds nothing), made absent where
    the test is about to build it (and removed again when the test ends)."""
    tag = ok_json(inkctl("build", ws.recipe, "--emit", ws.tmp / "context", "-o", "json"))["image"]
    assert (ws.tmp / "context" / "Dockerfile").is_file()
    return built.fresh(tag, *hosts, local=local)


@pytest.mark.parametrize("host,variant", [("h1", "docker"), ("h3", "podman")])
def test_replace_builds_on_the_host_and_a_rebuild_sends_nothing(cluster, built, inkctl, inventory, tmp_path, host, variant):
    ws = Workspace(tmp_path, "build-replace.yaml", ("debian_version",))
    if variant == "podman":
        ws.edit(podman)
    inv = inventory(host)
    original = in_image(cluster, host, BASE, "cat", "/etc/debian_version").encode()
    pins = ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))["pins"]  # trust on first use
    assert pins["patch:0:before"] == sha(original)
    assert pins["patch:0:after"] == sha(ws.patch("debian_version").read_bytes())
    tag = fresh_tag(built, inkctl, ws, host)
    assert tag.startswith("inkctl-fake-engine:inkctl-")

    first = ok_json(inkctl("build", ws.recipe, "--hosts", inv, "-o", "json"))
    [h] = first["hosts"]
    assert (h["host"], h["action"], first["image"]) == (host, "built", tag)
    assert 0 < h["bytes_sent"] == first["context_sent_bytes"] <= 1.1 * first["context_tar_bytes"]
    inside = in_image(cluster, host, tag, "sha256sum", "/etc/debian_version").split()[0]
    assert inside == pins["patch:0:after"]  # a container of the built image sees the patched file
    labels = json.loads(cluster.docker(host, "image", "inspect", "--format", "{{json .Config.Labels}}", tag).stdout)
    assert labels["inkctl.recipe"] == "e2e-build-replace" and labels["inkctl.base"] == f"{BASE}@{base_id(cluster, host)}"
    assert json.loads(labels["inkctl.patches"]) == [["/etc/debian_version", pins["patch:0:before"], pins["patch:0:after"]]]

    again = ok_json(inkctl("build", ws.recipe, "--hosts", inv, "-o", "json"))
    [h2] = again["hosts"]
    assert (h2["action"], h2["bytes_sent"], h2["image_id"]) == ("cache-hit", 0, h["image_id"])


def test_wrong_original_hash_fails_naming_both_hashes(cluster, built, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-replace.yaml", ("debian_version",))
    actual = sha(in_image(cluster, "h1", BASE, "cat", "/etc/debian_version").encode())
    wrong = "0" * 64

    def pin(doc):  # all pinned in the recipe: no lock needed, so the build itself must catch it
        doc["patches"]["base"] = f"{BASE}@{base_id(cluster)}"
        doc["patches"]["files"][0]["sha256_before"] = wrong
    ws.edit(pin)
    tag = fresh_tag(built, inkctl, ws, "h1")
    before = set(cluster.docker("h1", "ps", "-a", "-q", check=True).stdout.split())
    res = inkctl("build", ws.recipe, "--hosts", inventory("h1"))
    assert res.rc == 1, res
    left = set(cluster.docker("h1", "ps", "-a", "-q", check=True).stdout.split()) - before
    assert not left, cluster.docker("h1", "ps", "-a").stdout  # the failed RUN step's container is gone
    assert f"h1: build failed: inkctl-build: patch 0 (replace): /etc/debian_version: sha256 mismatch before patching: " \
           f"expected {wrong}, actual {actual}" in said(res.stderr), res
    assert cluster.docker("h1", "image", "inspect", tag).returncode != 0  # nothing tagged


def test_edit_matching_twice_fails_naming_it(cluster, built, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-edit.yaml")
    data = in_image(cluster, "h1", BASE, "cat", "/etc/os-release").encode()
    assert data.count(b"12 (bookworm)") == 2
    # lock applies the edits to the base's file to compute the result's hash, and refuses
    res = inkctl("lock", ws.recipe, "--hosts", inventory("h1"))
    assert res.rc == 2, res
    assert "/etc/os-release: edit 1 (old begins '12 (bookworm)') matched 2 times" in res.stderr, res
    assert not ws.lock.exists()

    # pinned by hand instead, the build runs and the applier inside the image refuses the same way
    ws.edit(lambda d: d["patches"]["files"][0].update(sha256_before=sha(data), sha256_after="5" * 64))
    ws.edit(lambda d: d["patches"].update(base=f"{BASE}@{base_id(cluster)}"))
    fresh_tag(built, inkctl, ws, "h1")
    res = inkctl("build", ws.recipe, "--hosts", inventory("h1"))
    assert res.rc == 1, res
    assert ("inkctl-build: /etc/os-release: edit 1 (old begins '12 (bookworm)') matched 2 times; "
            "it must match exactly once") in res.stderr, res


def test_diff_applies_inside_an_image_without_patch(cluster, built, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-diff.yaml")
    motd = in_image(cluster, "h1", BASE, "cat", "/etc/motd")
    patched = motd.replace("ABSOLUTELY NO WARRANTY", "ABSOLUTELY NO WARRANTY (patched by a diff)")
    diff = "".join(difflib.unified_diff(motd.splitlines(True), patched.splitlines(True), "a/etc/motd", "b/etc/motd"))
    ws.patch("motd.diff").write_text(diff)
    inv = inventory("h1")
    pins = ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))["pins"]
    assert pins["patch:0:0:before"] == sha(motd.encode()) and pins["patch:0:0:after"] == sha(patched.encode())
    assert in_image(cluster, "h1", BASE, "sh", "-c", "command -v patch || echo none").strip() == "none"
    tag = fresh_tag(built, inkctl, ws, "h1")
    out = ok_json(inkctl("build", ws.recipe, "--hosts", inv, "-o", "json"))
    assert out["hosts"][0]["action"] == "built"
    assert in_image(cluster, "h1", tag, "cat", "/etc/motd") == patched


def test_local_build_is_delivered_to_a_docker_and_a_podman_host(cluster, built, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-replace.yaml", ("debian_version",))
    pins = ok_json(inkctl("lock", ws.recipe, "--local", "-o", "json"))["pins"]  # observed on the local daemon
    tag = fresh_tag(built, inkctl, ws, "h2", "h3", local=True)
    built_here = None
    for host, variant in (("h2", "docker"), ("h3", "podman")):
        if variant == "podman":
            ws.edit(podman)
        out = ok_json(inkctl("build", ws.recipe, "--hosts", inventory(host), "--local", "-o", "json", timeout=600))
        assert out["image"] == tag  # the runtime does not change what is built
        [h] = out["hosts"]
        assert h["action"] == "delivered" and h["bytes_sent"] > 50_000_000, h
        assert out["local"]["action"] == ("built" if built_here is None else "cache-hit")
        built_here = built_here or out["local"]["image_id"]
        assert h["image_id"] == built_here  # save | load keeps the image id
        assert in_image(cluster, host, tag, "sha256sum", "/etc/debian_version").split()[0] == pins["patch:0:after"]
        again = ok_json(inkctl("build", ws.recipe, "--hosts", inventory(host), "--local", "-o", "json"))
        assert (again["hosts"][0]["action"], again["hosts"][0]["bytes_sent"]) == ("cache-hit", 0)
        assert again["local"] is None  # nothing built, nothing saved


def test_seed_002_prefix_mismatch_refuses_lock(cluster, built, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-replace.yaml", ("debian_version",))
    ws.edit(lambda d: d["patches"]["files"][0].update(sha256_before_prefix="f23a3775"))
    res = inkctl("lock", ws.recipe, "--hosts", inventory("h1"))
    assert res.rc == 2, res
    assert "patch:0:before: /etc/debian_version in the base image has sha256" in res.stderr
    assert "does not start with f23a3775 as the recipe pins it" in res.stderr, res
    assert not ws.lock.exists()


def test_base_drift_is_refused_naming_the_pin(cluster, built, inkctl, inventory, tmp_path):
    """A lock made against one base, a build against another: refused before building."""
    ws = Workspace(tmp_path, "build-replace.yaml", ("debian_version",))
    inv = inventory("h1")
    ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))
    doc = json.loads(ws.lock.read_text())
    real = doc["pins"][f"base:{BASE}"]
    doc["pins"][f"base:{BASE}"] = "sha256:" + "9" * 64
    ws.lock.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    res = inkctl("build", ws.recipe, "--hosts", inv)
    assert res.rc == 2, res
    assert f"h1: lock drift: pin base:{BASE}: sha256:{'9' * 64} -> {real}" in res.stderr, res
