"""Prefill/decode disaggregation on Kubernetes: one LeaderWorkerSet per role (each role's engine
group as ``export k8s`` writes any group, its replicas the role's), and the router in its P/D
mode finding each role's leaders by label (the routers' service discovery:
``--prefill-selector`` / ``--decode-selector``; a prefill pod's bootstrap port in the
annotation the router reads, ``sglang.ai/bootstrap-port`` / ``vllm.ai/bootstrap-port``). Pure.
"""

from __future__ import annotations

from dataclasses import replace

from inkctl.export.k8s import LWS_NAME_LABEL, ROLE_LABEL, Gap, K8sOptions, Manifests, export_k8s, k8s_name
from inkctl.export.k8s_fleet import router_manifests
from inkctl.plan.replicas.disagg import disagg_of, role_recipe
from inkctl.recipe.disagg import ROLES
from inkctl.recipe.engine_registry import spec_of
from inkctl.recipe.fleet import PD_MODE
from inkctl.recipe.model import Recipe



def export_disagg(recipe: Recipe, options: K8sOptions, **inputs) -> Manifests:
    assert recipe.fleet is not None
    d = disagg_of(recipe)
    router = recipe.fleet.router
    name = k8s_name(recipe.name)
    docs: list[tuple[str, dict]] = []
    gaps: list[Gap] = []
    selectors: dict[str, dict[str, str]] = {}
    port = recipe.engine.args.port
    flag, _, annotation = PD_MODE[router.kind]
    for role in ROLES:
        r = role_recipe(recipe, role, 0, 0, None).model_copy(update={"name": f"{recipe.name}-{role}"})
        notes = tuple(options.annotations)
        if role == "prefill":
            notes += ((annotation, str(d.transfer.bootstrap_port)),)
        m = export_k8s(r, replace(options, replicas=getattr(d, role).replicas, annotations=notes), **inputs)
        docs += [(f"{role}-{f}", doc) for f, doc in m.documents]
        gaps += [g for g in m.gaps if g not in gaps]
        selectors[role] = {LWS_NAME_LABEL: m.name, ROLE_LABEL: "head"}
    marker = "<the host's address>"  # a variable the engine fills with the host's address on hosts
    for var, value in spec_of(recipe.engine.kind).disagg_role("prefill", d.transfer, d.transfer.bootstrap_port, marker)[1]:
        if value == marker:
            gaps.append(Gap("fleet.disagg.transfer", var, "not set on Kubernetes: the engine advertises the pod by "
                            "its hostname (set it to the pod IP through the downward API where that does not resolve)",
                            expressed=False))

    def meta(n: str) -> dict:
        out: dict = {"name": n, "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "inkctl"}}
        if options.namespace:
            out["namespace"] = options.namespace
        return out

    for f, doc in router_manifests(recipe, name, meta, selectors["decode"], port):
        if doc["kind"] == "Deployment":
            c = doc["spec"]["template"]["spec"]["containers"][0]
            args = c["args"]
            at = args.index("--selector")
            end = args.index("--service-discovery-port")
            c["args"] = (args[:at] + [flag]
                         + ["--prefill-selector", *[f"{k}={v}" for k, v in selectors["prefill"].items()]]
                         + ["--decode-selector", *[f"{k}={v}" for k, v in selectors["decode"].items()]] + args[end:])
        docs.append((f, doc))
    return Manifests(name, tuple(docs), tuple(gaps))
