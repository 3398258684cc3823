"""The argv proof, on paper: what each rank's engine will be asked to read, so that the engine's
own code can read it inside the image before anything starts (``execute/deploy/proof.py`` runs
it). Pure: from the plan's steps only, the same objects ``up`` executes, so the proof reads
exactly the argv that will run."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass

from inkctl.plan.hotfix import ENTRY, MOUNT
from inkctl.runtimes.spec import LABEL_PREFIX, ContainerSpec
from inkctl.plan.step import Plan, Put, Run

# the proof container has no network: the hubs' clients are told so, and fail at once where they look
OFFLINE = (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("VLLM_NO_USAGE_STATS", "1"), ("DO_NOT_TRACK", "1"))

# vLLM over Ray starts `vllm serve` in the head's container with this word before its argv
SERVE_MARK = "inkctl-serve"


@dataclass(frozen=True)
class HotfixFile:
    name: str
    content: bytes
    interpreter: tuple[str, ...]
    gate_env: str | None


@dataclass(frozen=True)
class RankArgv:
    """One engine process of one rank: what it runs, where, in which image and environment."""

    host: str
    rank: int
    role: str  # the container's role (head, worker), "serve" for the Ray head's engine process
    runtime: str
    image: str
    argv: tuple[str, ...]  # the engine's argv as its process gets it (the hotfix wrapper taken off)
    env: tuple[tuple[str, str], ...]  # the recipe's environment for it (secrets are never here)
    secret_names: tuple[str, ...]
    hotfixes: tuple[HotfixFile, ...]
    files: tuple[tuple[str, bytes], ...] = ()  # (path in the container, content): what the plan puts in its mounts

    @property
    def label(self) -> str:
        return f"rank {self.rank} ({self.role})"

    def request(self) -> str:
        """What the proof program reads (its one argument): the argv and the hotfixes."""
        doc: dict = {"argv": list(self.argv), "hotfixes": [
            {"name": h.name, "content": base64.b64encode(h.content).decode(), "interpreter": list(h.interpreter),
             "gate_env": h.gate_env} for h in self.hotfixes]}
        if self.files:
            doc["files"] = [{"path": p, "content": base64.b64encode(c).decode()} for p, c in self.files]
        return json.dumps(doc, sort_keys=True)

    def argv_key(self, program: bytes) -> str:
        """What was asked, whatever the image: the argv, the environment, the program asking."""
        doc = {"request": self.request(), "env": sorted(self.env), "secrets": sorted(self.secret_names),
               "program": hashlib.sha256(program).hexdigest()}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]

    def key(self, image_id: str, program: bytes) -> str:
        """The verdict's key: the image as the host has it and what was asked of it. The same
        key, the same verdict."""
        return hashlib.sha256(f"{image_id} {self.argv_key(program)}".encode()).hexdigest()[:32]


def _engine_argv(spec: ContainerSpec) -> tuple[str, ...]:
    if spec.entrypoint == "/bin/sh" and spec.command[:1] == (f"{MOUNT}/{ENTRY}",):
        return spec.command[1:]
    return (spec.entrypoint, *spec.command)


def _puts(plan: Plan) -> list[Put]:
    """Every file the plan writes on hosts (the Put steps, and the files that ride on a run)."""
    return [p for step in plan.steps() for p in ((step,) if isinstance(step, Put) else getattr(step, "files", ()))]


def _mounted(plan: Plan, host: str, spec: ContainerSpec) -> tuple[tuple[str, bytes], ...]:
    """The files the plan puts under the container's bind mounts, at their paths inside it (the
    engine's options file, the hotfixes): the proof container gets them as the rank will. A
    secrets env file is not among them: it is never mounted, and never sent."""
    out = []
    for p in _puts(plan):
        if p.host != host or not isinstance(p.content, (str, bytes)):
            continue
        for m in spec.mounts:
            if p.path.startswith(m.source.rstrip("/") + "/"):
                data = p.content.encode() if isinstance(p.content, str) else p.content
                out.append((m.target.rstrip("/") + p.path[len(m.source.rstrip("/")):], data))
    return tuple(sorted(set(out)))


def _hotfixes(plan: Plan, host: str, rank: int, recipe_hotfixes) -> tuple[HotfixFile, ...]:
    by_name = {h.name: h for h in recipe_hotfixes}
    out = []
    for p in _puts(plan):
        if p.host == host and p.rank == rank and "/hotfix/" in p.path:
            name = p.path.rsplit("/", 1)[-1]
            h = by_name.get(name)
            if h is not None and isinstance(p.content, bytes) and p.content:  # empty: not here to send (plan says so)
                out.append(HotfixFile(name, p.content, tuple(h.interpreter), h.gate_env))
    return tuple(out)


def rank_argvs(plan: Plan, recipe) -> list[RankArgv]:
    """Every engine process the plan starts, in plan order: each rank's container, and the
    engine a Ray head runs inside its container."""
    out: list[RankArgv] = []
    specs: dict[str, ContainerSpec] = {}
    secrets = tuple(sorted(recipe.secrets))
    for step in plan.steps():
        if not isinstance(step, Run) or step.rank is None:
            continue
        spec = step.container
        if spec is not None:
            labels = dict(spec.labels)
            if LABEL_PREFIX + "role" not in labels:
                continue
            specs[spec.name] = spec
            out.append(RankArgv(step.host, step.rank, labels[LABEL_PREFIX + "role"], step.argv[0], spec.image,
                                _engine_argv(spec), spec.env, secrets,
                                _hotfixes(plan, step.host, step.rank, recipe.patches.hotfixes),
                                _mounted(plan, step.host, spec)))
        elif SERVE_MARK in step.argv:
            container = next((name for name in specs if name in step.argv), None)
            if container is None:
                continue
            spec = specs[container]
            argv = step.argv[step.argv.index(SERVE_MARK) + 1:]
            out.append(RankArgv(step.host, step.rank, "serve", step.argv[0], spec.image, tuple(argv), spec.env, secrets,
                                _hotfixes(plan, step.host, step.rank, recipe.patches.hotfixes),
                                _mounted(plan, step.host, spec)))
    return out


def proof_run(r: RankArgv, name: str) -> tuple[str, ...]:
    """The throwaway container that reads ``r``'s argv: the image as the rank runs it, its
    environment (never a secret), no network, no GPU; the program and what it is to read come
    on standard input (``program_input``), so nothing of it shows in the host's process list."""
    from inkctl import runtimes

    spec = ContainerSpec(name=name, image=r.image, entrypoint="python3", command=("-",),
                         labels=((LABEL_PREFIX + "proof", "1"),), network="bridge",
                         options=("--network", "none", "--interactive"), env=(*r.env, *OFFLINE))
    return runtimes.get(r.runtime).run_once(spec)


def program_input(r: RankArgv, program: bytes) -> bytes:
    """What the proof container's python3 reads: the request, then the program."""
    return b"INKCTL_REQUEST = " + repr(r.request()).encode() + b"\n" + program
