"""recipe + hosts -> the ordered stages of a deployment. Pure: no I/O, no clocks.

A stage ends in a barrier, so there are only as many as the engine needs. How an engine
starts its ranks is its own module in ``plan/stages/`` (vLLM native and SGLang start every
rank in one stage; vLLM over Ray needs its order); then every engine gets health -> smoke.

Each host's files (its ranks' env files, hotfixes and the plan record) ride on its first run
step (``Run.files``): one remote command writes them and starts the container.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from inkctl.errors import InkctlError, counted
from inkctl.plan import apikey, compilecache, container as ctr, fabric
from inkctl.plan import pagecache
from inkctl import runtimes
from inkctl.runtimes.spec import Mount
from inkctl.plan.hostvars import HostContext
from inkctl.plan.hotfix import ENTRY, MOUNT, entry_script
from inkctl.plan.identity import recipe_hash
from inkctl.plan.record import record_path, record_text
from inkctl.plan.removal import removal
from inkctl.plan.smoke import smoke_checks
from inkctl.plan.stages import Launch, launch_stages
from inkctl.plan.stages.launch import ENGINE_FILES
from inkctl.plan.step import Container, EnvFile, Plan, PlannedHost, Put, Run, SecretRef, Smoke, Stage, WaitHealth
from inkctl.recipe.hosts import Host
from inkctl.recipe.engine_registry import spec_of
from inkctl.recipe.model import Recipe

def placeholder_hosts(recipe: Recipe) -> list[Host]:
    return [Host(name=f"host{i}") for i in range(recipe.hardware.nodes)]


def deployment_dir(host: Host, deployment: str) -> str:
    return f"{host.state_dir}/{deployment}"


def build_plan(
    recipe: Recipe,
    hosts: list[Host] | None = None,
    *,
    image: str | None = None,
    hotfix_pins: dict[str, str] | None = None,
    hotfix_files: dict[str, bytes] | None = None,
    weights_pinned: bool = False,
    extra_labels: tuple[tuple[str, str], ...] = (),
    read_fabric: bool = True,
) -> Plan:
    """The whole deployment as stages of steps.

    ``hosts`` None plans with placeholders (``<host0.address>``) so a recipe can be planned
    without hardware. ``image`` is the image to run when it differs from engine.image.ref (a
    built, content-addressed tag). ``hotfix_pins``/``hotfix_files`` come from the recipe's
    patches directory and lock file; without them the plan shows the hotfix steps unpinned.
    ``weights_pinned``: the lock pins the model's files, which up checks on every host before
    anything starts; the containers then get HF_HUB_OFFLINE=1. ``extra_labels``: more labels on
    every container (a gateway's groups: which gateway they belong to). ``read_fabric``: the NCCL
    settings nothing pins are read from each host by up's preflight (``plan/fabric.py``); an
    export (Slurm, Kubernetes) runs no preflight and leaves them to NCCL.
    """
    if weights_pinned and "HF_HUB_OFFLINE" not in recipe.container.env:
        # up checks every pinned file on every host first, so the engine never needs the Hub
        recipe = recipe.model_copy(deep=True)
        recipe.container.env["HF_HUB_OFFLINE"] = "1"
    placeholder = hosts is None
    hosts = list(hosts) if hosts is not None else placeholder_hosts(recipe)
    check_hosts(recipe, hosts, placeholder)
    image = image or recipe.engine.image.ref
    name = recipe.name
    rhash = recipe_hash(recipe, None if placeholder else hosts, image)
    ctxs = [HostContext(host=h, rank=i, head=hosts[0], placeholder=placeholder) for i, h in enumerate(hosts)]
    planned = tuple(PlannedHost(name=h.name, address=c.ssh_address, rank=c.rank, runtime=recipe.container.runtime,
                                state_dir=deployment_dir(h, name), placeholder=placeholder, cluster_address=c.rank_address)
                    for h, c in zip(hosts, ctxs))
    containers = tuple(Container(host=c.name, rank=c.rank, name=ctr.container_name(name, c.rank),
                                 role="head" if c.rank == 0 else "worker") for c in ctxs)

    reads = {c.rank: fabric.derived(recipe, c) if read_fabric else [] for c in ctxs}

    def run_step(c: HostContext, command: list[str], purpose: str) -> Run:
        return _start(recipe, c, planned[c.rank].state_dir, containers[c.rank], image, rhash, command, purpose,
                      extra_labels, bool(reads[c.rank]))

    stages = _compile_cache_dirs(recipe, ctxs, image) + launch_stages(Launch(recipe, ctxs, containers, run_step))
    base = f"http://{_url_host(ctxs[0].ssh_address if placeholder else hosts[0].ssh_address)}:{api_port(recipe)}"
    stages += _serving(recipe, ctxs[0], containers, base)
    # the plan record (what runs where), so that the next up of a changed recipe can say what changes
    prepare = _prepare(recipe, ctxs, planned, hotfix_pins or {}, hotfix_files or {}, reads)
    prepare += [Put(host=p.name, rank=None, purpose="record the planned commands", path=record_path(p.state_dir),
                    content=record_text(name, rhash, p.name, stages), mode=0o644) for p in planned]
    stages = _with_files(stages, prepare)
    free = pagecache.stage(recipe, [(p.name, p.rank) for p in planned])
    if free is not None:  # first: the memory is free before anything loads
        stages.insert(0, free)
    teardown = tuple(s for c, p in zip(containers, planned)
                     for s in removal(c.host, recipe.container.runtime, [c.name], p.state_dir, rank=c.rank, missing_ok=True))
    return Plan(deployment=name, recipe_hash=rhash, hosts=planned, stages=tuple(stages),
                containers=containers, teardown=teardown)


def check_hosts(recipe: Recipe, hosts: list[Host], placeholder: bool) -> None:
    """As many hosts as hardware.nodes, each with as many GPUs as gpus_per_host, each reachable
    by the other ranks."""
    nodes = recipe.hardware.nodes
    if len(hosts) != nodes:
        raise InkctlError(
            f"the recipe needs {counted(nodes, 'host')} (hardware.nodes) but {len(hosts)} {'was' if len(hosts) == 1 else 'were'} given",
            hint="list exactly that many hosts in the inventory, in rank order", exit_code=2)
    want = recipe.hardware.gpus_per_host
    for h in hosts:
        if h.gpus and len(h.gpus.split(",")) != want:
            n = len(h.gpus.split(","))
            raise InkctlError(
                f"host {h.name}: gpus {h.gpus!r} selects {counted(n, 'GPU')} but hardware.gpus_per_host is {want}",
                hint=f"list {counted(want, 'GPU index', 'GPU indices')} in {h.name}'s gpus (inventory), or change hardware.gpus_per_host",
                exit_code=2)
    if nodes > 1 and not placeholder:
        for h in hosts:
            if h.rank_address in ("localhost", "127.0.0.1", "::1"):
                raise InkctlError(f"host {h.name}: {h.rank_address} cannot be a multi-node address (other ranks cannot reach it)",
                                  hint="set the host's address or cluster_address to one the other hosts reach", exit_code=2)


def _start(recipe: Recipe, c: HostContext, state_dir: str, container: Container, image: str, rhash: str,
           command: list[str], purpose: str, extra_labels: tuple[tuple[str, str], ...] = (), reads: bool = False) -> Run:
    """One rank's container start: its spec (labels, env file, hotfix wrapper) and its argv."""
    hotfix_on = recipe.patches.mode == "at_start"
    mounts: tuple[Mount, ...] = (Mount(f"{state_dir}/hotfix", MOUNT, True),) if hotfix_on else ()
    if recipe.compile_cache.enabled:
        mounts += (compilecache.mount(recipe, _cache_root(recipe, c), image),)
    if spec_of(recipe.engine.kind).files(recipe):
        mounts += (Mount(f"{state_dir}/engine", ENGINE_FILES, True),)
    command = apikey.wrap(recipe, command)
    entry, cmd = command[0], command[1:]
    if hotfix_on:
        entry, cmd = "/bin/sh", [f"{MOUNT}/{ENTRY}", *command]
    spec = ctr.container_spec(
        recipe, c, name=container.name, image=image,
        labels=[*ctr.labels(recipe.name, rhash, c.rank, c.name, container.role), *extra_labels],
        command=cmd, entrypoint=entry,
        env_file=f"{state_dir}/rank{c.rank}.env" if recipe.secrets or reads else None,
        extra_mounts=mounts)
    return Run(host=c.name, rank=c.rank, purpose=purpose, argv=runtimes.get(recipe.container.runtime).run(spec), container=spec)


def _cache_root(recipe: Recipe, c: HostContext) -> str:
    return c.expand(recipe.compile_cache.path, "compile_cache.path")


def _compile_cache_dirs(recipe: Recipe, ctxs: list[HostContext], image: str) -> list[Stage]:
    """The compile cache's directory on each host, before anything bind-mounts it (podman)."""
    if not recipe.compile_cache.enabled:
        return []
    return [Stage("compile-cache", "make each host's compile cache directory", tuple(
        Run(host=c.name, rank=c.rank, purpose="make the compile cache directory",
            argv=("mkdir", "-p", "--", compilecache.host_dir(recipe, _cache_root(recipe, c), image))) for c in ctxs))]


def _serving(recipe: Recipe, head: HostContext, containers: tuple[Container, ...], base: str) -> list[Stage]:
    """What every engine shares once its ranks are started: the health wait, then the smoke checks."""
    watch = tuple((c.host, c.name, c.rank) for c in containers)
    stages = [Stage("health", f"wait for {recipe.health_path} on the head", (WaitHealth(
        host=head.name, rank=0, purpose=f"wait for {recipe.engine.kind} to serve", url=base + recipe.health_path,
        timeout_s=recipe.health.timeout_s, interval_s=recipe.health.interval_s, watch=watch,
        answer_url=base + "/v1/chat/completions", model=recipe.model.name, api_key=recipe.api_key),))]
    if recipe.smoke.enabled:
        checks = smoke_checks(recipe)
        stages.append(Stage("smoke", "prove the server answers", (Smoke(
            host=head.name, rank=0, purpose=f"{len(checks)} smoke check(s)", url=base + "/v1/chat/completions",
            model=recipe.model.name, checks=checks, timeout_s=recipe.smoke.timeout_s, api_key=recipe.api_key),)))
    return stages


def _with_files(stages: list[Stage], puts: list[Put]) -> list[Stage]:
    """Hand each host's files to its first run step, which writes them before it starts."""
    pending: dict[str, list[Put]] = {}
    for p in puts:
        pending.setdefault(p.host, []).append(p)
    out = []
    for st in stages:
        steps = []
        for s in st.steps:
            if isinstance(s, Run) and s.host in pending:
                s = replace(s, files=tuple(pending.pop(s.host)))
            steps.append(s)
        out.append(replace(st, steps=tuple(steps)))
    if pending:  # a host without a run step (none today): its files go first, on their own
        out.insert(0, Stage("prepare", "write env files, hotfixes and the plan record", tuple(p for v in pending.values() for p in v)))
    return out


def api_port(recipe: Recipe) -> int:
    """The port the head's API answers on, on its host (the published one on a bridge network)."""
    port = recipe.engine.args.port
    if recipe.container.network == "bridge":
        port = next((p.host for p in recipe.container.ports if p.container == port), port)
    return port


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def _prepare(recipe: Recipe, ctxs: list[HostContext], planned, pins: dict[str, str], files: dict[str, bytes],
             reads: dict[int, list]) -> list:
    steps: list = []
    for c in ctxs:
        d = planned[c.rank].state_dir
        read = reads[c.rank]
        if recipe.secrets or read:
            what = ("the secrets env file" if recipe.secrets else "the env file") + (
                ", with the NCCL settings read from the host's fabric at up" if read else "")
            steps.append(Put(host=c.name, rank=c.rank, purpose=f"write {what} (0600)", path=f"{d}/rank{c.rank}.env",
                             content=EnvFile((*((k, SecretRef(k)) for k in recipe.secrets), *apikey.env_entries(recipe),
                                              *read)), mode=0o600))
        if recipe.patches.mode == "at_start":
            for h in recipe.patches.hotfixes:
                steps.append(Put(host=c.name, rank=c.rank, purpose=f"upload hotfix {h.name}", path=f"{d}/hotfix/{h.name}",
                                 content=files.get(h.name, b""), mode=0o644, sha256=pins.get(h.name) or h.sha256))
            all_pins = {h.name: pins.get(h.name) or h.sha256 or "" for h in recipe.patches.hotfixes}
            steps.append(Put(host=c.name, rank=c.rank, purpose="upload the hotfix wrapper", path=f"{d}/hotfix/{ENTRY}",
                             content=entry_script(recipe.patches.hotfixes, {k: v for k, v in all_pins.items() if v}), mode=0o755))
        steps += _engine_files(recipe, c, d)
    return steps


def _engine_files(recipe: Recipe, c: HostContext, state_dir: str) -> list[Put]:
    """The engine's own files (its spec's ``files``), mounted at ENGINE_FILES by ``_start``."""
    return [Put(host=c.name, rank=c.rank, purpose=f"write the engine's {name}", path=f"{state_dir}/engine/{name}",
                content=text, mode=0o644, sha256=hashlib.sha256(text.encode()).hexdigest())
            for name, text in spec_of(recipe.engine.kind).files(recipe)]

