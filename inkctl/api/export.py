"""``export``: the plan written out for another runner. Loads the recipe (a fleet, a gateway
file), checks what it must before anything is written, and hands back what the command writes
or prints: Kubernetes manifests, Prometheus targets and a dashboard, a systemd unit, a batch job."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inkctl.api.target import Target
from inkctl.errors import InkctlError, UsageError


def pairs(values: Iterable[str] | None, flag: str) -> list[tuple[str, str]]:
    """``KEY=VALUE`` flags (FLAG names them in the error) as pairs."""
    out = []
    for v in values or []:
        k, sep, val = v.partition("=")
        if not sep or not k:
            raise UsageError(f"{flag} {v!r}: expected KEY=VALUE")
        out.append((k, val))
    return out


def var_pairs(values: Iterable[str] | None) -> list[tuple[str, str]]:
    """``--var NAME=VALUE``: a value for a recipe ``${VAR}``; NAME is a variable name."""
    from inkctl.recipe.fields import ENV_NAME_RE

    found = pairs(values, "--var")
    for k, _ in found:
        if not ENV_NAME_RE.match(k):
            raise UsageError(f"--var {k}=...: {k!r} is not a variable name (letters, digits, '_')")
    return found


# -- Kubernetes ------------------------------------------------------------------------------

@dataclass(frozen=True)
class K8sFlags:
    """What ``export k8s`` is asked, as given on the command line."""

    namespace: str | None = None
    replicas: int | None = None
    cache: str | None = None
    secret_name: str | None = None
    image: str | None = None
    annotations: tuple[str, ...] = ()
    device_resources: tuple[str, ...] = ()
    vars: tuple[str, ...] = ()
    host_network: bool = False
    online: bool = False
    check: bool = False


@dataclass
class K8sExport:
    """The manifests, the image they run (None: the recipe's own ref, shown as ``shown_image``)
    and, with ``--check``, what the schemas found wrong."""

    manifests: Any
    image: str | None
    shown_image: str
    findings: list[Any] = field(default_factory=list)

    @property
    def documents(self) -> list[dict[str, Any]]:
        return [d for _, d in self.manifests.documents]

    def yaml(self) -> str:
        """Every manifest, one YAML stream."""
        from inkctl.export.k8s_yaml import dump

        return dump(self.documents)

    def write(self, out_dir: Path) -> list[Path]:
        """One file per manifest into OUT_DIR."""
        from inkctl.export.k8s_yaml import dump

        out_dir.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, doc in self.manifests.documents:
            path = out_dir / name
            path.write_text(dump([doc]))
            paths.append(path)
        return paths

    def failure(self) -> InkctlError | None:
        n = len(self.findings)
        return InkctlError(f"{n} manifest problem{'s' if n != 1 else ''} (listed above)", exit_code=1) if n else None


def k8s(target: Target, flags: K8sFlags) -> K8sExport:
    """The recipe's plan as LeaderWorkerSet manifests (the inventory is not used: Kubernetes
    places the pods)."""
    from inkctl.export.k8s import DEFAULT_DEVICE_RESOURCES, Cache, K8sOptions, export_k8s
    from inkctl.plan.inputs import hotfix_inputs, require_trusted, weights_pinned
    from inkctl.recipe.filekind import is_gateway_file
    from inkctl.recipe.source import load_recipe

    recipe = target.recipe
    if is_gateway_file(recipe):  # several recipes behind one endpoint: no Kubernetes form yet
        raise InkctlError(f"{recipe}:1:1: export k8s of a gateway file is not supported yet",
                          hint="export each of its recipes: inkctl export k8s RECIPE", exit_code=2)
    loaded = load_recipe(recipe, list(target.sets))
    require_trusted(loaded, patches=False)  # it runs the image pushed earlier
    fleet = loaded.recipe.fleet
    options = K8sOptions(
        namespace=flags.namespace, replicas=flags.replicas or (fleet.replicas if fleet else 1),
        cache=Cache.parse(flags.cache) if flags.cache else None, secret_name=flags.secret_name,
        annotations=tuple(pairs(flags.annotations, "--network-annotation")),
        device_resources=tuple(pairs(flags.device_resources, "--device-resource")) or DEFAULT_DEVICE_RESOURCES,
        host_network=flags.host_network, offline=not flags.online, vars=tuple(var_pairs(flags.vars)))
    pins, files = hotfix_inputs(loaded)
    run_image = flags.image or _k8s_image(loaded)
    manifests = export_k8s(loaded.recipe, options, image=run_image, hotfix_pins=pins, hotfix_files=files,
                           weights_pinned=weights_pinned(loaded))
    done = K8sExport(manifests, run_image, run_image or loaded.recipe.engine.image.ref)
    if flags.check:
        from inkctl.export.k8s_check import check_all

        done.findings = check_all(done.documents)
    return done


def _k8s_image(loaded: Any) -> str | None:
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
