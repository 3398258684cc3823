"""A fleet on Kubernetes: the LeaderWorkerSet runs ``fleet.replicas`` groups; the router runs as
a Deployment with its Service, finding the groups' leaders itself (the routers' own Kubernetes
service discovery, ``--service-discovery --selector ...``: a leader that is recreated gets a new
IP, so a fixed list of URLs would go stale). It reads pods, so it gets a ServiceAccount and a
Role that may get, list and watch them. Pure: recipe in, manifests out.
"""

from __future__ import annotations

from inkctl.plan.replicas.fleet import fleet_of, router_argv
from inkctl.recipe.model import Recipe


def router_manifests(recipe: Recipe, name: str, meta, leader_labels: dict[str, str], engine_port: int) -> list[tuple[str, dict]]:
    """[(file name, manifest)] of the router: ServiceAccount, Role, RoleBinding, Deployment, Service.
    ``meta(name)`` makes the metadata (labels, namespace) the LeaderWorkerSet's manifests use."""
    r = fleet_of(recipe).router
    rname = f"{name}-router"
    argv = router_argv(r, [], recipe.model.name)
    at = argv.index("--worker-urls")
    argv = argv[:at] + argv[at + 1:]  # no fixed URLs: discovered
    argv += ["--service-discovery", "--selector", *[f"{k}={v}" for k, v in leader_labels.items()],
             "--service-discovery-port", str(engine_port)]
    ns = meta(rname).get("namespace")
    if ns:
        argv += ["--service-discovery-namespace", ns]
    labels = {"app.kubernetes.io/name": rname, "app.kubernetes.io/component": "router"}
    m = meta(rname)
    m["labels"] = {**m["labels"], **labels}
    container = {
        "name": "router", "image": r.image_ref, "command": argv[:1], "args": argv[1:],
        "ports": [{"name": "http", "containerPort": r.port, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": r.prometheus_port, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10, "failureThreshold": 6},
    }
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": m,
                  "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels},
                                        "spec": {"serviceAccountName": rname, "containers": [container]}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": m,
               "spec": {"selector": labels, "ports": [
                   {"name": "http", "port": r.port, "targetPort": "http", "protocol": "TCP"},
                   {"name": "metrics", "port": r.prometheus_port, "targetPort": "metrics", "protocol": "TCP"}]}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(rname)}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(rname),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(rname),
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": rname},
               "subjects": [{"kind": "ServiceAccount", "name": rname, **({"namespace": ns} if ns else {})}]}
    return [("router-serviceaccount.yaml", account), ("router-role.yaml", role), ("router-rolebinding.yaml", binding),
            ("router-deployment.yaml", deployment), ("router-service.yaml", service)]
