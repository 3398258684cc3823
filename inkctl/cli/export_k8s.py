"""``inkctl export k8s``: the recipe's plan as LeaderWorkerSet manifests. Thin: load -> export -> write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.options import SetOpt, output_format, overrides
from inkctl.errors import InkctlError, UsageError


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
    from inkctl.export.k8s import DEFAULT_DEVICE_RESOURCES, Cache, K8sOptions, export_k8s
    from inkctl.plan.inputs import hotfix_inputs, require_trusted, weights_pinned
    from inkctl.recipe.source import load_recipe

    fmt = output_format(output)
    from inkctl.recipe.filekind import is_gateway_file

    if is_gateway_file(recipe):  # several recipes behind one endpoint: no Kubernetes form yet
        raise InkctlError(f"{recipe}:1:1: export k8s of a gateway file is not supported yet",
                          hint="export each of its recipes: inkctl export k8s RECIPE", exit_code=2)
    loaded = load_recipe(recipe, overrides(set_))
    require_trusted(loaded, patches=False)  # it runs the image pushed earlier
    options = K8sOptions(
        namespace=namespace, replicas=replicas or (loaded.recipe.fleet.replicas if loaded.recipe.fleet else 1), cache=Cache.parse(cache) if cache else None, secret_name=secret_name,
        annotations=tuple(_pairs(annotation, "--network-annotation")),
        device_resources=tuple(_pairs(device_resource, "--device-resource")) or DEFAULT_DEVICE_RESOURCES,
        host_network=host_network, offline=not online, vars=tuple(_vars(var)))
    pins, files = hotfix_inputs(loaded)
    run_image = image or _image(loaded)
    manifests = export_k8s(loaded.recipe, options, image=run_image, hotfix_pins=pins, hotfix_files=files,
                           weights_pinned=weights_pinned(loaded))
    docs = [d for _, d in manifests.documents]
    findings = []
    if check:
        from inkctl.export.k8s_check import check_all

        findings = check_all(docs)
    written = _write(manifests, out_dir) if out_dir is not None else []
    if fmt == "json":
        print(json.dumps({"name": manifests.name, "image": run_image or loaded.recipe.engine.image.ref,
                          "files": [str(p) for p in written], "manifests": None if written else docs,
                          "gaps": [g.as_dict() for g in manifests.gaps], "checked": check,
                          "problems": [f.render() for f in findings]}, indent=2))
    else:
        _text(manifests, written, check, findings)
        if written and out_dir is not None and not findings:
            _next(manifests, out_dir, recipe)
    if findings:
        raise InkctlError(f"{len(findings)} manifest problem{'s' if len(findings) != 1 else ''} (listed above)", exit_code=1)


def _pairs(values: Optional[List[str]], flag: str) -> list[tuple[str, str]]:
    out = []
    for v in values or []:
        k, sep, val = v.partition("=")
        if not sep or not k:
            raise UsageError(f"{flag} {v!r}: expected KEY=VALUE")
        out.append((k, val))
    return out


def _vars(values: Optional[List[str]]) -> list[tuple[str, str]]:
    from inkctl.recipe.fields import ENV_NAME_RE

    pairs = _pairs(values, "--var")
    for k, _ in pairs:
        if not ENV_NAME_RE.match(k):
            raise UsageError(f"--var {k}=...: {k!r} is not a variable name (letters, digits, '_')")
    return pairs


def _image(loaded) -> str | None:
    """A patched image must come from a registry, by digest: the one `inkctl build --push` recorded.
    A stock image runs by the recipe's engine.image.digest when it pins one (REF@sha256:...)."""
    if loaded.recipe.patches.mode != "build":
        img = loaded.recipe.engine.image
        return f"{img.ref}@{img.digest}" if img.digest and "@" not in img.ref else None
    from inkctl.plan.inputs import built_image
    from inkctl.recipe.lockfile import read_pins

    tag = built_image(loaded)
    pushed = read_pins(loaded).get(f"push:{tag}")
    if not pushed:
        raise InkctlError(f"the patched image {tag} is built locally only; Kubernetes nodes pull images from a registry",
                          hint=f"push it first: inkctl build {loaded.path} --local --push REGISTRY (or pass --image REF@sha256:...)",
                          exit_code=2)
    return pushed


def _write(manifests, out_dir: Path) -> list[Path]:
    from inkctl.export.k8s_yaml import dump

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, doc in manifests.documents:
        path = out_dir / name
        path.write_text(dump([doc]))
        paths.append(path)
    return paths


def _text(manifests, written: list[Path], check: bool, findings) -> None:
    import sys

    from inkctl.export.k8s_yaml import dump

    if not written:
        print(dump([d for _, d in manifests.documents]), end="")
    err = sys.stderr if not written else sys.stdout
    for p in written:
        print(f"wrote {p}", file=err)
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
    if check:
        if findings:
            print("\ncheck failed:", file=err)
            for f in findings:
                print(f"  {f.render()}", file=err)
        else:
            print(f"\nchecked {len(manifests.documents)} manifest(s): valid (LeaderWorkerSet CRD v0.9.0, Kubernetes schemas)", file=err)


def _item(text: str) -> str:
    """One mapped or missing field: wrapped to 80 columns, continuation lines indented under it."""
    import textwrap

    return textwrap.fill(text, 80, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False,
                         break_long_words=False)


def _next(manifests, out_dir: Path, recipe: Path) -> None:
    """What to run once the files are written: apply, reach the endpoint, prove it answers (the
    smoke that Kubernetes does not run). The endpoint is the router's Service for a fleet."""
    from inkctl.cli.render import relative

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
