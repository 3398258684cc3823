"""Check manifests before anyone applies them.

- LeaderWorkerSet: against the vendored CRD's openAPIV3Schema (inkctl/export/schemas/), read
  the way the API server reads it: fields the schema does not declare are errors (kubectl's
  strict field validation), ``x-kubernetes-*`` keys are structural hints, not JSON Schema.
  Its pod templates are also checked as core ``PodTemplate`` objects.
- Core kinds (Service, ConfigMap, PodTemplate...): against Kubernetes' own schemas from the
  optional PyPI package ``kubernetes-validate`` (``pip install 'inkctl[k8s]'``), strict mode.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path


CRD_FILE = Path(__file__).parent / "schemas" / "leaderworkerset.x-k8s.io_leaderworkersets.v0.9.0.yaml"
KUBERNETES_VERSION = "1.33"


@dataclass(frozen=True)
class Finding:
    document: str  # "LeaderWorkerSet/name" or a file name
    path: str  # dotted path inside the manifest
    message: str

    def render(self) -> str:
        return f"{self.document}: {self.path or '(top)'}: {self.message}"


def _strict(schema):
    """The CRD schema as the API server enforces it: undeclared fields rejected."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    if schema.get("type") == "object" and "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields") \
            and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    if schema.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


@functools.lru_cache(maxsize=1)
def lws_validator():
    try:
        import jsonschema
    except ImportError:
        from inkctl.extras import missing

        raise missing("k8s", "checking manifests (--check)", "jsonschema") from None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRD is 1.3 MB: libyaml reads it 10x faster
    crd = yaml.load(CRD_FILE.read_text(), Loader=loader)
    schema = _strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    return jsonschema.Draft7Validator(schema)


def _where(error) -> str:
    return ".".join(str(p) for p in error.absolute_path)


def _core(doc: dict, name: str) -> list[Finding]:
    try:
        import kubernetes_validate
    except ImportError:
        from inkctl.extras import missing

        raise missing("k8s", "checking core Kubernetes kinds (--check)", "kubernetes-validate") from None
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [Finding(name, _where(e), e.message)]
    except kubernetes_validate.SchemaNotFoundError:
        return [Finding(name, "", f"no Kubernetes {KUBERNETES_VERSION} schema for {doc.get('apiVersion')} {doc.get('kind')}")]
    return []


def check(doc: dict) -> list[Finding]:
    """Every problem found in one manifest (empty: it is valid)."""
    if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
        return [Finding("(document)", "", "not a Kubernetes object (no apiVersion/kind)")]
    name = f"{doc['kind']}/{(doc.get('metadata') or {}).get('name', '?')}"
    if doc["kind"] != "LeaderWorkerSet":
        return _core(doc, name)
    found = [Finding(name, _where(e), e.message) for e in sorted(lws_validator().iter_errors(doc), key=_where)]
    lwt = ((doc.get("spec") or {}).get("leaderWorkerTemplate") or {})
    for key in ("leaderTemplate", "workerTemplate"):
        if isinstance(lwt.get(key), dict):
            pt = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": lwt[key]}
            found += [Finding(name, f"spec.leaderWorkerTemplate.{key}.{f.path[len('template.'):]}".rstrip("."), f.message)
                      for f in _core(pt, name)]
    return found


def check_all(docs: list[dict]) -> list[Finding]:
    return [f for d in docs for f in check(d)]
