"""`inkctl build --push REGISTRY` into a real registry (Debian's docker-registry on the cluster
bridge), then `inkctl export k8s` runs exactly that image, by the digest the registry answered."""

from __future__ import annotations

import json
import urllib.request

import pytest
import yaml

from tests.e2e._images import Built, Workspace, ok_json

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def registry(cluster):
    from tests.cluster import registry

    return registry.start(cluster.state, cluster.net_id)


def manifest_digest(registry: str, repo: str, tag: str) -> str:
    """What the registry itself says the tag's manifest digest is."""
    req = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/{tag}", method="HEAD", headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=10) as r:
        return r.headers["Docker-Content-Digest"]


def test_push_pins_the_registry_digest_and_export_runs_it(cluster, registry, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-replace.yaml", ("debian_version",))
    inv = inventory("h1")
    ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))
    tag = ok_json(inkctl("build", ws.recipe, "--emit", ws.tmp / "context", "-o", "json"))["image"]
    built = Built(cluster)
    built.fresh(tag, "h1", "h2")
    try:
        report = ok_json(inkctl("build", ws.recipe, "--hosts", inv, "--push", registry, "-o", "json", timeout=300))
        repo, version = tag.rsplit(":", 1)
        digest = manifest_digest(registry, repo, version)
        assert report["pushed"] == f"{registry}/{repo}@{digest}"
        pins = json.loads(ws.lock.read_text())["pins"]
        assert pins[f"push:{tag}"] == report["pushed"] and "patch:0:after" in pins  # the other pins kept
        # another host pulls exactly that image by digest (what a Kubernetes node does)
        pulled = cluster.docker("h2", "pull", report["pushed"], timeout=300)
        assert pulled.returncode == 0, pulled.stderr
        ids = {h: cluster.docker(h, "image", "inspect", "--format", "{{.Id}}", ref).stdout.strip()
               for h, ref in (("h1", tag), ("h2", report["pushed"]))}
        assert ids["h1"] == ids["h2"]
        cluster.docker("h2", "image", "rm", "--force", report["pushed"])

        out = tmp_path / "k8s"
        ran = inkctl("export", "k8s", ws.recipe, "--out", out, "--check")
        assert ran.rc == 0, ran
        lws = yaml.safe_load((out / "leaderworkerset.yaml").read_text())
        [c] = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]
        assert c["image"] == report["pushed"]

        ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))  # re-pinning keeps what was pushed
        assert json.loads(ws.lock.read_text())["pins"][f"push:{tag}"] == report["pushed"]
        again = ok_json(inkctl("build", ws.recipe, "--hosts", inv, "--push", registry, "-o", "json"))
        assert again["pushed"] == report["pushed"] and again["hosts"][0]["action"] == "cache-hit"
    finally:
        built.clean()


def test_push_to_a_registry_that_is_not_there_says_so(cluster, registry, inkctl, inventory, tmp_path):
    ws = Workspace(tmp_path, "build-replace.yaml", ("debian_version",))
    inv = inventory("h1")
    ok_json(inkctl("lock", ws.recipe, "--hosts", inv, "-o", "json"))
    nowhere = registry.rsplit(":", 1)[0] + ":5999"  # the bridge address, a port nothing listens on
    ran = inkctl("build", ws.recipe, "--hosts", inv, "--push", nowhere, timeout=300)
    assert ran.rc != 0, ran
    assert f"docker push {nowhere}/" in ran.stderr and "is" in ran.stderr and "reachable from h1" in ran.stderr, ran
    assert "push:" not in ws.lock.read_text()
