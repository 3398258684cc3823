"""What the engine modules share: small argv and rule helpers (no engine's name in here)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from inkctl.errors import Problem

if TYPE_CHECKING:
    from inkctl.recipe.model import Recipe

# cache location variables of the libraries under the engines (Triton, Inductor, FlashInfer, DeepGEMM),
# relative to the compile cache directory (plan/compilecache.py)
COMPILE_CACHE_COMMON = (("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
                        ("FLASHINFER_WORKSPACE_BASE", "flashinfer"), ("DG_JIT_CACHE_DIR", "deep_gemm"))


def opt(argv: list[str], flag: str, value: object) -> None:
    if value is not None:
        argv += [flag, str(value)]


def problem(path: str, message: str, hint: str | None = None) -> Problem:
    return Problem(message, path=path, hint=hint)


def expert_on(r: Recipe) -> bool:
    ep = r.engine.args.expert
    return ep is not None and ep.enabled


def expert_size_finding(r: Recipe, why: str) -> list[Problem]:
    """Engines whose expert ranks live inside the tensor group: the expert size divides
    tensor_parallel (``why``: the engine's own reason, said in the message)."""
    a, ep = r.engine.args, r.engine.args.expert
    size = (ep.size if ep is not None else None) or a.tensor_parallel
    if a.tensor_parallel % size:
        return [problem("engine.args.expert.size", f"expert size {size} does not divide tensor_parallel "
                        f"{a.tensor_parallel} ({why})", f"use a divisor of {a.tensor_parallel}")]
    return []


def port_clash(r: Recipe, *rendezvous: int) -> list[Problem]:
    """The API port may not be one of the head's rendezvous ports (multi-node)."""
    port = r.engine.args.port
    return [problem("engine.args.port", f"port {port} is also the rendezvous port")] if r.multinode and port in rendezvous else []


def gpu_count_finding(r: Recipe, world: int) -> Problem | None:
    """tensor x pipeline (x data) against the GPUs the hosts provide."""
    a, hw = r.engine.args, r.hardware
    dp, have = a.data_parallel, hw.nodes * hw.gpus_per_host
    if world == have:
        return None
    tp_pp = f"tensor_parallel {a.tensor_parallel} x pipeline_parallel {a.pipeline_parallel}"
    return problem("engine.args.tensor_parallel",
                   f"{tp_pp}{f' x data_parallel {dp.size}' if dp.size > 1 else ''} = {world} GPUs, but the hosts provide "
                   f"{hw.nodes} x {hw.gpus_per_host} = {have}",
                   "make tensor_parallel x pipeline_parallel" + (" x data_parallel" if dp.size > 1 else "")
                   + " equal hardware.nodes x hardware.gpus_per_host")


PROOF_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proof")
PROOF_SHARED = re.compile(r"^from inkctl\.engines\.proof\.common import \([^)]*\)\n", re.M)


def proof_program(name: str):
    """The spec's ``proof_program``: ``inkctl/engines/proof/<name>.py`` with the shared part
    (``common.py``) inlined where the program imports it: one file the image's python3 runs."""
    def read() -> bytes:
        with open(os.path.join(PROOF_DIR, f"{name}.py")) as f:
            text = f.read()
        with open(os.path.join(PROOF_DIR, "common.py")) as f:
            shared = f.read()
        return PROOF_SHARED.sub(lambda _: shared + "\n", text, count=1).encode()

    return read


def extra_args(r, ctx) -> list[str]:
    """``engine.args.extra`` for every rank, then ``head_extra`` on the head or ``worker_extra``
    on the others, each value expanded for the rank's host."""
    a = r.engine.args
    own = ("engine.args.head_extra", a.head_extra) if ctx.rank == 0 else ("engine.args.worker_extra", a.worker_extra)
    return [ctx.expand(x, "engine.args.extra") for x in a.extra] + [ctx.expand(x, own[0]) for x in own[1]]


MARK = "--inkctl-extra-goes-here"


def planned_flags(r) -> dict[str, set[int]]:
    """Every flag the plan itself writes on the engine processes that take ``engine.args.extra``:
    flag -> the ranks it is on. Read off the plan ``up`` runs (on placeholder hosts), each engine
    process as the argv proof reads it (the Ray head's ``vllm serve`` included; a ``ray start``,
    which never takes extra, not)."""
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.proof import rank_argvs

    args = r.engine.args.model_copy(update={"extra": [MARK], "head_extra": [], "worker_extra": []})
    bare = r.model_copy(update={"engine": r.engine.model_copy(update={"args": args})})
    out: dict[str, set[int]] = {}
    for ra in rank_argvs(build_plan(bare, None), bare):
        if MARK in ra.argv:
            for tok in ra.argv:
                if tok.startswith("--") and tok != MARK:
                    out.setdefault(tok.split("=", 1)[0], set()).add(ra.rank)
    return out


def may_plan(spec) -> set[str]:
    """Every flag the engine's plan may write: set from typed fields, or named in ``planned_by``."""
    return set(spec.set_by_inkctl) | set(spec.planned_by) | {f for flags in spec.flag_of.values() for f in flags}


def flag_findings(r) -> list[Problem]:
    """What the engine would refuse or read twice in ``engine.args.extra``/``head_extra``/
    ``worker_extra``: a flag the plan already writes (argparse keeps the last one, silently: a
    ``--distributed-executor-backend mp`` after the plan's ``ray`` breaks a two-host Ray boot), and
    a flag a headless worker refuses given to the workers (``engine.args.head_extra`` takes it)."""
    from inkctl.recipe.checks.engine_flags import typed_flags
    from inkctl.recipe.engine_registry import spec_of

    spec = spec_of(r.engine.kind)
    a = r.engine.args
    given = {x.split("=", 1)[0] for x in (*a.extra, *a.head_extra, *a.worker_extra)}
    # the plan is built (and read) only when a given flag is one the engine's plan can write: what
    # every flag of every bundled plan is, the test holds (tests/unit/test_argv_flags.py)
    planned = planned_flags(r) if given & may_plan(spec) else {}
    told = set(spec.set_by_inkctl) | set(typed_flags(r.engine.kind, a))  # rules.py says those already
    out = []
    for name, items in (("extra", a.extra), ("head_extra", a.head_extra), ("worker_extra", a.worker_extra)):
        for i, x in enumerate(items):
            flag = x.split("=", 1)[0]
            if not flag.startswith("--"):
                continue
            path = f"engine.args.{name}[{i}]"
            ranks = planned.get(flag, set())
            if ranks and (flag not in told or name != "extra") and (name == "extra" or (0 in ranks) == (name == "head_extra")):
                field = spec.field_of(flag)
                use = f"set {field} instead" if field else "the plan writes it from the recipe's fields"
                out.append(problem(path, f"{flag} is already in the planned argv: given again, {spec.name} keeps "
                                   "the last one without a word", f"remove it; {use}"))
            elif flag in spec.worker_refuses and r.multinode and name != "head_extra":
                out.append(problem(path, f"{flag} goes to the head only: {spec.name} refuses it on a headless worker "
                                   "rank", "move it to engine.args.head_extra"))
    return out
