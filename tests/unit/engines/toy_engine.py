"""A toy engine kind, known to no module of inkctl: the tests register it (``register("toy",
"toy_engine")``) and it must plan, validate and render like vLLM and SGLang.

It is the smallest complete engine: ``toyserve MODEL --port N --shards TP`` on every rank,
every rank started at once, a flag table of its own (none: no release tables), its boot lines
and metric names.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from inkctl.errors import Problem
from inkctl.recipe.engine import EngineBase
from inkctl.recipe.engine_registry import BootPhases, EngineSpec, Metrics


class Toy(EngineBase):
    """Toy (``toyserve``)."""

    kind: Literal["toy"] = Field(description="Engine kind.")
    peer_port: int = Field(7000, ge=1, le=65535, description="Where the ranks meet on the head.")


def command(r, ctx, nodes: int) -> list[str]:
    a = r.engine.args
    argv = ["toyserve", r.model.repo, "--port", str(a.port), "--shards", str(a.tensor_parallel),
            "--config", "/inkctl/engine/toy.yaml"]
    if nodes > 1:
        argv += ["--peer", f"{ctx.head_address}:{r.engine.peer_port}", "--rank", str(ctx.rank)]
    return argv + [ctx.expand(x, "engine.args.extra") for x in a.extra]


def stages(b):
    from inkctl.plan.stages.launch import all_at_once

    return all_at_once(b, lambda c: command(b.recipe, c, b.nodes), "peers")


def world_gpus(r) -> int:
    return r.engine.args.tensor_parallel * r.engine.args.pipeline_parallel * r.engine.args.data_parallel.size


def parallel_findings(r) -> list[Problem]:
    have = r.hardware.nodes * r.hardware.gpus_per_host
    if world_gpus(r) != have:
        return [Problem(f"toy wants {world_gpus(r)} GPUs, the hosts have {have}", path="engine.args.tensor_parallel")]
    return []


SPEC = EngineSpec(
    kind="toy", name="Toy", config=Toy,
    command=command, stages=stages, env=lambda r: [("TOY_LOG", "1")],
    compile_cache_env=(("TOY_CACHE", "toy"),),
    flag_of={"max_model_len": ("--max-len",)}, only_flags={"--shards": "tensor_parallel"},
    set_by_inkctl=frozenset({"--port", "--shards", "--peer", "--rank"}),
    world_gpus=world_gpus, parallel_findings=parallel_findings, expert_findings=lambda r: [],
    engine_findings=lambda r: [], speculative_findings=lambda r: [],
    ports=lambda r: [(r.engine.peer_port, "peer")] if r.multinode else [],
    serves_in_head=lambda r: False, variant=lambda r: None,
    files=lambda r: [("toy.yaml", f"shards: {r.engine.args.tensor_parallel}\n")],
    boot=BootPhases(phases=(("weights", re.compile(r"toy weights in (\d+(?:\.\d+)?) s")),), keywords=("toy",),
                    feed=lambda p, line: None),
    metrics=Metrics(running=("toy_running",), waiting=("toy_waiting",), kv_usage=("toy_kv",),
                    generated=("toy_tokens_total",), ttft=("toy_ttft_seconds",), e2e=("toy_e2e_seconds",),
                    panels=(("Requests running", 'sum by (replica) (toy_running{job="inkctl-engines"})', "short"),)),
)
