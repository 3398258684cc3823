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
    from inkctl.recipe.reading.filekind import is_gateway_file
    from inkctl.recipe.reading.source import load_recipe

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
    inputs: dict[str, Any] = dict(image=run_image, hotfix_pins=pins, hotfix_files=files,
                                  weights_pinned=weights_pinned(loaded))
    if fleet is not None and fleet.disagg is not None:  # one LeaderWorkerSet per role, the router in P/D mode
        from inkctl.export.k8s_disagg import export_disagg

        manifests = export_disagg(loaded.recipe, options, **inputs)
    else:
        manifests = export_k8s(loaded.recipe, options, **inputs)
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


# -- Prometheus ------------------------------------------------------------------------------

@dataclass
class Scrape:
    """prometheus.yml and the Grafana dashboard, and what they cover (for the line that says so)."""

    config: str
    board: str
    engines: int
    router: str | None
    hosts: int

    def write(self, out_dir: Path) -> None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "prometheus.yml").write_text(self.config)
        (out_dir / "grafana-dashboard.json").write_text(self.board)


def prometheus(target: Target, interval: float) -> Scrape:
    """Scrape targets for every engine (each replica's), the router and each host's
    node_exporter, and a dashboard over the names the engines export."""
    from inkctl.api.fleet import is_gateway
    from inkctl.recipe.reading.source import load_recipe

    if is_gateway(target.recipe):  # every model's engine and the one router in front
        return _gateway_scrape(target, interval)
    loaded = load_recipe(target.recipe, list(target.sets), target.hosts)
    r = loaded.recipe
    if r.fleet is not None:
        from inkctl.api.fleet import fleet_of

        fleet = fleet_of(loaded)
        engines = [(rep.name, r.engine.kind, rep.url) for rep in fleet.replicas]
        router = f"{fleet.router.hosts[0].address}:{r.fleet.router.prometheus_port}"
        host_addrs = list(dict.fromkeys(h.address for rep in fleet.replicas for h in rep.plan.hosts))
    else:
        from inkctl.plan.deploy import build_plan

        plan = build_plan(r, loaded.hosts)
        base = plan.health_url.rsplit("/", 1)[0] if plan.health_url else ""
        engines, router = [(r.name, r.engine.kind, base)], None
        host_addrs = [h.address for h in plan.hosts]
    return _scrape(r.name, r.engine.kind, engines, router, host_addrs, interval)


def _gateway_scrape(target: Target, interval: float) -> Scrape:
    """A gateway file: each model's engine, the gateway's exporter, every host of its groups."""
    from inkctl.api.fleet import load_gateway_fleet

    lg, fleet = load_gateway_fleet(Target(target.recipe, target.hosts), "export prometheus")
    engines = [(rep.name, rep.recipe.engine.kind, rep.url) for rep in fleet.replicas]
    router = f"{fleet.router.hosts[0].address}:{fleet.router_spec.prometheus_port}"
    host_addrs = list(dict.fromkeys(h.address for rep in fleet.replicas for h in rep.plan.hosts))
    return _scrape(fleet.name, engines[0][1], engines, router, host_addrs, interval)


def _scrape(name: str, kind: str, engines: list[Any], router: str | None, host_addrs: list[str],
            interval: float) -> Scrape:
    import yaml

    from inkctl.export.prometheus import dashboard_json, scrape_config

    config = yaml.safe_dump(scrape_config(name, engines, router, host_addrs, interval), sort_keys=False)
    return Scrape(config, dashboard_json(name, kind, router is not None), len(engines), router, len(host_addrs))


# -- systemd ---------------------------------------------------------------------------------

CREDENTIALS = "@INKCTL_CREDENTIALS_DIRECTORY@"  # becomes systemd's %d after the ExecStart is escaped


def unit_text(recipe: Path, hosts: Path | None, sets: list[str], *, python: str, user: str | None,
              deployment: str, max_restarts: int, secrets: dict[str, Any] | None = None) -> str:
    """RECIPE and HOSTS are absolute paths. Each secret reaches the watcher (and the ``up`` of a
    restart) the way the recipe reads it: an env var from an EnvironmentFile, a file as a
    systemd credential (LoadCredential), read from $CREDENTIALS_DIRECTORY through --set."""
    from inkctl.plan.quote import command_line

    argv = [python, "-m", "inkctl", "watch", str(recipe), "--restart",
            "--max-restarts-per-hour", str(max_restarts), "-o", "json"]
    if hosts:
        argv += ["--hosts", str(hosts)]
    for s in sets:
        argv += ["--set", s]
    secret_lines: list[str] = []
    env_names = [n for n, src in (secrets or {}).items() if src.env]
    if env_names:
        env_file = f"/etc/inkctl/{deployment}.env"
        for n in env_names:
            var = (secrets or {})[n].env
            secret_lines.append(f"# secret {n}: the line {var}=... in {env_file} (mode 0600)")
        secret_lines.append(f"EnvironmentFile={env_file}")
    for name, src in (secrets or {}).items():
        if src.file and not src.env:
            path = Path(src.file).expanduser()
            secret_lines += [f"# {name}: the file {src.file}, handed over as a credential",
                             f"LoadCredential={name}:{_systemd_literal(str(path))}"]
            argv += ["--set", f"secrets.{name}={{file: {CREDENTIALS}/{name}}}"]
    lines = [
        "[Unit]",
        f"Description=inkctl: supervise {deployment} and restart it on failure",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        *secret_lines,
        # systemd splits ExecStart like a shell does (quotes, no expansion of $ without braces): one quoting function
        f"ExecStart={_systemd_literal(command_line(argv)).replace(CREDENTIALS, '%d')}",
        f"WorkingDirectory={_systemd_literal(str(recipe.parent))}",
        "Restart=on-failure",
        "RestartSec=30",
        "# exit 2: the recipe, a secret or a flag is wrong; restarting changes nothing",
        "RestartPreventExitStatus=2",
        "KillSignal=SIGINT",
        "TimeoutStopSec=30",
    ]
    if user:
        lines.append(f"User={user}")
    lines += ["", "[Install]", "WantedBy=multi-user.target", ""]
    return "\n".join(lines)


def _systemd_literal(text: str) -> str:
    """systemd expands %specifiers and $VARIABLES in ExecStart even inside quotes: double them."""
    return text.replace("%", "%%").replace("$", "$$")


@dataclass
class Unit:
    """A systemd unit keeping ``inkctl watch --restart`` running for a deployment."""

    deployment: str
    text: str

    @property
    def name(self) -> str:
        return f"inkctl-{self.deployment}"


def systemd(target: Target, *, python: str, user: str | None, max_restarts: int) -> Unit:
    """The unit for TARGET's deployment, naming the recipe and inventory by absolute path."""
    from inkctl.api.target import load_target

    loaded, plan, _ = load_target(target, "export systemd")
    hosts = target.hosts
    text = unit_text(loaded.path.resolve(), hosts.resolve() if hosts else None, list(target.sets),
                     python=python, user=user, deployment=plan.deployment, max_restarts=max_restarts,
                     secrets=dict(loaded.recipe.secrets))
    return Unit(plan.deployment, text)


# -- Slurm -----------------------------------------------------------------------------------

def slurm(recipe: Path, sets: list[str], options: dict[str, Any], *, hosts_file: Path | None,
          image: str | None, var: Iterable[str] | None) -> Any:
    """The recipe's plan as one sbatch script (a ``SlurmJob``); OPTIONS: the ``SlurmOptions``
    fields the command line gives, VAR the ``--var NAME=VALUE`` values."""
    from inkctl.export.slurm import SlurmOptions
    from inkctl.export.slurm_inputs import job_for
    from inkctl.recipe.reading.source import load_recipe

    loaded = load_recipe(recipe, sets, hosts_file=hosts_file) if hosts_file else load_recipe(recipe, sets)
    slurm_options = SlurmOptions(**options, vars=tuple(var_pairs(var)))
    return job_for(loaded, slurm_options, inventory=hosts_file is not None, image=image)
