"""The engines inkctl knows: one ``EngineSpec`` per kind, each in a module of its own.

An engine is one module (``inkctl/engines/<kind>.py``, or any importable module registered
with ``register``) that defines ``SPEC = EngineSpec(...)``. Every slot is filled: the test
``tests/unit/test_engine_spec.py`` checks it for every registered kind. Nothing outside the
engine modules compares an engine's name: it asks the spec (``spec_of(kind)``).

The registry is lazy: it knows the kinds by module name (the files in ``inkctl/engines/``,
listed, not imported) and imports an engine's module the first time something asks for its
spec, so validating or planning one recipe imports that recipe's engine only.

This module is data: it names no argv. The slots that build argv and stages (``command``,
``stages``) are callables whose types live on the plan floor (``Launch``, ``HostContext``,
``Stage``); here they are typed loosely, the engine modules type them exactly.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

PACKAGE = "inkctl.engines"
_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "engines")
# the order the kinds are listed in (errors, the schema's union): these first, then the others by name
FIRST = ("vllm", "sglang")


@dataclass(frozen=True)
class Metrics:
    """The Prometheus names an engine serves on ``path`` (several where releases renamed one)."""

    running: tuple[str, ...]  # requests running (a gauge)
    waiting: tuple[str, ...]  # requests queued (a gauge)
    kv_usage: tuple[str, ...]  # KV cache use, 0..1
    generated: tuple[str, ...]  # generated tokens (a counter)
    ttft: tuple[str, ...]  # time to first token (a histogram)
    e2e: tuple[str, ...]  # request latency (a histogram)
    panels: tuple[tuple[str, str, str], ...]  # Grafana: (title, PromQL over job="inkctl-engines", unit)
    path: str = "/metrics"  # where the engine serves them in the Prometheus format


@dataclass(frozen=True)
class BootPhases:
    """The lines an engine prints while it boots (``execute/supervise/bootphases.py`` reads them).

    ``phases``: (phase key, regex whose group 1 is the seconds), matched in order, the first wins;
    a regex may be given as its source text: compiled when the first log line comes, not when
    ``validate`` imports the engine (start-up).
    ``feed``: the engine's own reading of any other line (compile cache warm/cold, KV cache
    size, a phase measured between two stamped lines): ``feed(rank_phases, line)``.
    ``keywords``: a line without one of these is skipped before any regex runs."""

    phases: tuple[tuple[str, re.Pattern[str] | str], ...]
    keywords: tuple[str, ...]
    feed: Callable[[Any, str], None]


@dataclass(frozen=True)
class EngineSpec:
    """Everything inkctl knows of one engine kind. ``r`` is a ``Recipe`` whose ``engine.kind``
    is this kind; the slots are called only for such recipes."""

    kind: str  # engine.kind in a recipe
    name: str  # as people write it: 'vLLM'
    config: type  # the pydantic model of the recipe's engine section (an ``EngineBase`` with ``kind: Literal[KIND]``)
    # the command lines and how the ranks start (plan floor)
    command: Callable[..., list[str]]  # (r, ctx: HostContext, nodes) -> one rank's argv (what a worker rank runs)
    stages: Callable[[Any], list[Any]]  # (b: Launch) -> the launch stages
    env: Callable[[Any], list[tuple[str, str]]]  # (r) -> further container environment the engine's options need
    compile_cache_env: tuple[tuple[str, str], ...]  # (variable, subdirectory of the compile cache) the engine reads
    # flags (engine.args.extra is checked against these; the release tables are data files: engine_releases/)
    flag_of: Mapping[str, tuple[str, ...]]  # typed field of EngineArgs -> the flags it passes
    only_flags: Mapping[str, str | None]  # flags this engine has and the others do not -> typed field of that meaning
    set_by_inkctl: frozenset[str]  # flags inkctl writes from typed fields: refused in engine.args.extra
    # the rules (recipe floor: called by rules.py)
    world_gpus: Callable[[Any], int]  # (r) -> GPUs the engine arguments ask for
    parallel_findings: Callable[[Any], list[Any]]  # (r) -> Problems of the parallel layout (GPU count, data parallelism)
    expert_findings: Callable[[Any], list[Any]]  # (r) -> Problems of engine.args.expert (called when it is enabled)
    engine_findings: Callable[[Any], list[Any]]  # (r) -> Problems of the engine's own fields
    speculative_findings: Callable[[Any], list[Any]]  # (r) -> Problems of speculative: for this engine
    ports: Callable[[Any], list[tuple[int, str]]]  # (r) -> the head's ports besides the API one: (port, what)
    serves_in_head: Callable[[Any], bool]  # (r) -> the server runs as a second process in the head's container
    variant: Callable[[Any], str | None]  # (r) -> how the ranks form one server, where the engine has several ways ('ray')
    # running (execute floor)
    boot: BootPhases
    metrics: Metrics
    # slots added after the first engines (a default each: an engine written before them still loads)
    files: Callable[[Any], list[tuple[str, str]]] = lambda r: []  # (r) -> (name, text) files the engine reads:
    # put on each rank's host (hashed, shown by `plan`) and mounted read-only at plan.stages.launch.ENGINE_FILES
    renamed: Mapping[str, str] = field(default_factory=dict)  # flag a release replaced -> what replaces it (a flag, or flag=value): validate names it
    server_lines: tuple[str, ...] = ()  # log lines (any case) with which the engine says its HTTP server is up
    overlap_findings: Callable[[Any], list[Any]] = lambda r: []  # (r) -> a setting given twice in two ways (env and field)
    api_key_env: tuple[str, ...] = ()  # the variable a rank's env file gives the recipe's api_key under
    api_key_config: bool = False  # the engine reads its key from a --config file (written inside the container)
    host_ip_env: tuple[str, ...] = ()  # the engine's variable for the address a rank advertises to the others (none: ())
    served_aliases: bool = False  # the engine answers to several names (model.served_aliases after served_name)
    programs: tuple[tuple[str, ...], ...] = ()  # the words that start its server on a command line (`inkctl import` reads them)
    underscore_flags: bool = False  # its parser takes --a_b for --a-b (an imported command may spell flags so)
    # prefill/decode disaggregation (fleet.disagg): the KV transfer backends the engine's P/D takes (none: no P/D),
    # and (role, transfer, bootstrap_port, address) -> (engine flags, container env) of one replica of a role
    disagg_backends: tuple[str, ...] = ()
    disagg_role: Callable[..., tuple[list[str], list[tuple[str, str]]]] = lambda role, t, port, address: ([], [])
    # () -> the program that has the engine in the image read a rank's argv (inkctl/engines/proof/), None: none
    proof_program: Callable[[], bytes | None] = lambda: None
    worker_refuses: frozenset[str] = frozenset()  # flags a headless or worker rank refuses (head_extra takes them)
    planned_by: Mapping[str, str] = field(default_factory=dict)  # a flag the plan writes -> the recipe field behind it

    def field_of(self, flag: str) -> str | None:
        """The recipe field behind a flag the plan writes: ``planned_by``, else the typed field
        that passes it (``flag_of``); None when neither says."""
        return self.planned_by.get(flag) or next((f"engine.args.{k}" for k, flags in self.flag_of.items() if flag in flags), None)

_modules: dict[str, str] = {}  # kind -> module, registered or found in inkctl/engines/
_specs: dict[str, EngineSpec] = {}


def _found() -> list[str]:
    try:
        names = os.listdir(_DIR)
    except OSError:
        return []
    return sorted(n[:-3] for n in names if n.endswith(".py") and not n.startswith("_"))


def _known() -> dict[str, str]:
    if not _modules:
        found = _found()
        for kind in [k for k in FIRST if k in found] + [k for k in found if k not in FIRST]:
            _modules.setdefault(kind, f"{PACKAGE}.{kind}")
    return _modules


def register(kind: str, module: str) -> None:
    """Make ``kind`` known: its spec is ``module.SPEC``, imported when first asked for."""
    _known()
    _modules[kind] = module
    _specs.pop(kind, None)


def unregister(kind: str) -> None:
    _modules.pop(kind, None)
    _specs.pop(kind, None)


def kinds() -> tuple[str, ...]:
    """Every known kind, in the order errors and the schema list them. Imports nothing."""
    return tuple(_known())


def known(kind: object) -> bool:
    return isinstance(kind, str) and kind in _known()


def spec_of(kind: str) -> EngineSpec:
    """The spec of ``kind`` (imports its module the first time)."""
    spec = _specs.get(kind)
    if spec is None:
        spec = importlib.import_module(_known()[kind]).SPEC
        if spec.kind != kind:
            raise ValueError(f"{_known()[kind]}.SPEC is kind {spec.kind!r}, registered as {kind!r}")
        _specs[kind] = spec
    return spec


def specs() -> list[EngineSpec]:
    """Every engine's spec (imports every engine module: for the schema and the rare check across engines)."""
    return [spec_of(k) for k in kinds()]


def name_of(kind: str) -> str:
    return spec_of(kind).name
