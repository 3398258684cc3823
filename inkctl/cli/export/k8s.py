"""``inkctl export k8s``: the recipe's plan as LeaderWorkerSet manifests. Thin: load -> export -> write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.common.options import SetOpt, output_format, overrides


def k8s(
    recipe: Path = typer.Argument(..., metavar="RECIPE", help="A recipe file, or the name of a bundled recipe (see inkctl recipes)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Write one file per manifest into DIR (default: print them)."),
    replicas: Optional[int] = typer.Option(None, "--replicas", min=1, help="Serving groups (each one a leader and nodes-1 workers). Default: the recipe's fleet.replicas, else 1."),
    namespace: Optional[str] = typer.Option(None, "--namespace", help="metadata.namespace of every manifest."),
    cache: Optional[str] = typer.Option(None, "--cache", help="Model cache: pvc:NAME (an existing claim) or hostpath:/PATH on every node. Default: pvc:<name>-hf-cache."),
    secret_name: Optional[str] = typer.Option(None, "--secret-name", help="Secret holding the recipe's secrets, one key per name. Default: <name>-secrets."),
    image: Optional[str] = typer.Option(None, "--image", help="Image to run, by digest (registry/repo@sha256:...). Default: the recipe's, or the pushed build recorded by `inkctl build --push`."),
    annotation: Optional[List[str]] = typer.Option(None, "--network-annotation", help="Pod annotation KEY=VALUE (repeatable), e.g. k8s.v1.cni.cncf.io/networks=rdma-net."),
    device_resource: Optional[List[str]] = typer.Option(None, "--device-resource", help="Host device as a device-plugin resource: PATH=RESOURCE (repeatable). Default: /dev/infiniband=rdma/rdma_shared_device_a."),
    var: Optional[List[str]] = typer.Option(None, "--var", help="Value for a recipe ${VAR} on every pod: NAME=VALUE (repeatable)."),
    host_network: bool = typer.Option(False, "--host-network", help="Run the pods on the nodes' network (hostNetwork), as the recipe's network: host does."),
    online: bool = typer.Option(False, "--online", help="Let pods download weights (no HF_HUB_OFFLINE=1)."),
    check: bool = typer.Option(False, "--check", help="Validate every manifest (LeaderWorkerSet CRD, Kubernetes schemas); fail on any problem."),
    set_: Optional[List[str]] = SetOpt,
    output: str = typer.Option("text", "--output", "-o", help="text or json."),
) -> None:
    """Write the deployment as Kubernetes manifests: a LeaderWorkerSet (group size = nodes), a Service
    for the leader's port and, for at-start hotfixes, a ConfigMap. Apply them with `kubectl apply -f DIR`.

    The engine argv in them is the plan's (`inkctl plan`), with the rendezvous values replaced by
    $(LWS_LEADER_ADDRESS), $(LWS_GROUP_SIZE) and $(LWS_WORKER_INDEX). What has no Kubernetes form
    is listed, never dropped silently.
    """
    from inkctl.api.export import K8sFlags
    from inkctl.api.export import k8s as export
    from inkctl.api.target import Target

    fmt = output_format(output)
    flags = K8sFlags(namespace=namespace, replicas=replicas, cache=cache, secret_name=secret_name, image=image,
                     annotations=_given(annotation), device_resources=_given(device_resource),
                     vars=_given(var), host_network=host_network, online=online, check=check)
    done = export(Target.of(recipe, None, overrides(set_)), flags)
    written = done.write(out_dir) if out_dir is not None else []
    if fmt == "json":
        print(json.dumps(_json(done, written, check), indent=2))
    else:
        _text(done, written, check)
        if written and out_dir is not None and not done.findings:
            _next(done.manifests, out_dir, recipe)
    failed = done.failure()
    if failed is not None:
        raise failed


def _given(values: Optional[List[str]]) -> tuple[str, ...]:
    return tuple(values or ())


def _json(done, written: list[Path], check: bool) -> dict:
    return {"name": done.manifests.name, "image": done.shown_image,
            "files": [str(p) for p in written], "manifests": None if written else done.documents,
            "gaps": [g.as_dict() for g in done.manifests.gaps], "checked": check,
            "problems": [f.render() for f in done.findings]}


def _text(done, written: list[Path], check: bool) -> None:
    import sys

    manifests = done.manifests
    if not written:
        print(done.yaml(), end="")
    err = sys.stderr if not written else sys.stdout
    for p in written:
        print(f"wrote {p}", file=err)
    _gaps(manifests, err)
    if check:
        _checked(done, err)


def _gaps(manifests, err) -> None:
    """What the manifests map to Kubernetes, and what they cannot say (never dropped silently)."""
    mapped = [g for g in manifests.gaps if g.expressed]
    missing = manifests.not_expressed
    if mapped:
        print("\nmapped to Kubernetes:", file=err)
        for g in mapped:
            print(_item(f"{g.field}: {g.docker} -> {g.kubernetes}"), file=err)
    if missing:
        print("\nNOT in the manifests (provide these another way):", file=err)
        for g in missing:
            print(_item(f"{g.field}: {g.docker}: {g.kubernetes}"), file=err)


def _checked(done, err) -> None:
    if done.findings:
        print("\ncheck failed:", file=err)
        for f in done.findings:
            print(f"  {f.render()}", file=err)
    else:
        print(f"\nchecked {len(done.manifests.documents)} manifest(s): valid (LeaderWorkerSet CRD v0.9.0, Kubernetes schemas)", file=err)


def _item(text: str) -> str:
    """One mapped or missing field: wrapped to 80 columns, continuation lines indented under it."""
    import textwrap

    return textwrap.fill(text, 80, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False,
                         break_long_words=False)


def _next(manifests, out_dir: Path, recipe: Path) -> None:
    """What to run once the files are written: apply, reach the endpoint, prove it answers (the
    smoke that Kubernetes does not run). The endpoint is the router's Service for a fleet."""
    from inkctl.cli.show.terminal import relative

    services = [d for _, d in manifests.documents if d.get("kind") == "Service"]
    if not services:
        return
    svc = services[-1]
    port = svc["spec"]["ports"][0]["port"]
    ns = svc["metadata"].get("namespace")
    in_ns = f" -n {ns}" if ns else ""
    steps = [f"kubectl apply{in_ns} -f {relative(str(out_dir))}",
             f"kubectl port-forward{in_ns} svc/{svc['metadata']['name']} {port}:{port}",
             f"inkctl smoke {relative(str(recipe))} --url http://127.0.0.1:{port}"]
    print()
    for i, step in enumerate(steps):
        lead = "next: " if i == 0 else "      "
        if len(lead + step) > 80:  # one break, before the last option: still one copy-paste
            head, _, tail = step.rpartition(" --")
            step = f"{head} \\\n{' ' * 10}--{tail}"
        print(lead + step)
