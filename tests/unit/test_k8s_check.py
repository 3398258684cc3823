"""The manifest checker accepts real manifests (LWS upstream examples) and rejects broken ones."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import yaml

from inkctl.errors import InkctlError
from inkctl.export import k8s_check
from inkctl.export.k8s_check import check, check_all

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"
EXAMPLES = sorted(FIXTURES.glob("example-*.yaml"))


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_the_shipped_crd_is_the_upstream_one():
    shared = Path("/work/shared/k8s") / k8s_check.CRD_FILE.name
    if shared.exists():
        assert shared.read_bytes() == k8s_check.CRD_FILE.read_bytes()
    assert "leaderworkerset.x-k8s.io" in k8s_check.CRD_FILE.read_text()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_upstream_examples_are_valid(path):
    docs = _docs(path)
    assert {d["kind"] for d in docs} >= {"LeaderWorkerSet"}
    assert check_all(docs) == []


def _lws() -> dict:
    return next(d for d in _docs(EXAMPLES[0]) if d["kind"] == "LeaderWorkerSet")


@pytest.mark.parametrize("mutate,path,needle", [
    (lambda d: d["spec"]["leaderWorkerTemplate"].__setitem__("restartPolicy", "Sometimes"),
     "spec.leaderWorkerTemplate.restartPolicy", "is not one of"),
    (lambda d: d["spec"]["leaderWorkerTemplate"].__setitem__("sise", 2), "spec.leaderWorkerTemplate", "'sise' was unexpected"),
    (lambda d: d["spec"]["leaderWorkerTemplate"].__setitem__("size", "two"), "spec.leaderWorkerTemplate.size", "is not of type 'integer'"),
    (lambda d: d["spec"]["leaderWorkerTemplate"].pop("workerTemplate"), "spec.leaderWorkerTemplate", "'workerTemplate' is a required property"),
    (lambda d: d["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0].__setitem__("imagePullPolicy", 3),
     "spec.leaderWorkerTemplate.workerTemplate.spec.containers.0.imagePullPolicy", "is not of type 'string'"),
])
def test_a_mutated_manifest_fails(mutate, path, needle):
    doc = copy.deepcopy(_lws())
    mutate(doc)
    found = check(doc)
    assert found, "the checker accepted a broken manifest"
    assert any(f.path == path and needle in f.message for f in found), [f.render() for f in found]


def test_pod_templates_are_checked_as_core_kinds():
    doc = copy.deepcopy(_lws())
    doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["ports"] = [{"containerPort": "http"}]
    assert any("containers.0.ports.0.containerPort" in f.path for f in check(doc))


def test_core_kinds_are_checked_strictly():
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
           "spec": {"selector": {"a": "b"}, "ports": [{"port": 80, "targetPort": "http"}]}}
    assert check(svc) == []
    svc["spec"]["ports"][0]["prot"] = 1
    assert [f.path for f in check(svc)] == ["spec.ports.0"]
    assert check({"kind": "Service"})[0].message.startswith("not a Kubernetes object")


def test_missing_kubernetes_validate_is_a_clear_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "kubernetes_validate", None)
    with pytest.raises(InkctlError, match="needs kubernetes-validate, which is not installed") as e:
        check({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})
    assert "-m pip install kubernetes-validate" in e.value.hint and e.value.exit_code == 1
