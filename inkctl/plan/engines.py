"""The engine command per rank: exactly the argv that starts vLLM or SGLang on one host."""

from __future__ import annotations

from inkctl.plan.hostvars import HostContext
from inkctl.recipe import parallel, speculative
from inkctl.recipe.engine import SGLang, VLLM
from inkctl.recipe.model import Recipe


def _opt(argv: list[str], flag: str, value: object) -> None:
    if value is not None:
        argv += [flag, str(value)]


def vllm_serve(r: Recipe, ctx: HostContext, nodes: int, *, ray: bool = False) -> list[str]:
    """``vllm serve`` for one rank. With Ray only the head runs it; workers join Ray instead."""
    e, a, m = r.engine, r.engine.args, r.model
    assert isinstance(e, VLLM)
    argv = ["vllm", "serve", m.repo]
    _opt(argv, "--revision", m.revision)
    _opt(argv, "--served-model-name", m.served_name)
    argv += m.served_aliases if m.served_name else []
    argv += ["--host", a.bind_host, "--port", str(a.port)]
    argv += ["--tensor-parallel-size", str(a.tensor_parallel)]
    if a.pipeline_parallel > 1:
        argv += ["--pipeline-parallel-size", str(a.pipeline_parallel)]
    _opt(argv, "--max-model-len", a.max_model_len)
    _opt(argv, "--gpu-memory-utilization", a.memory_fraction)
    _opt(argv, "--kv-cache-dtype", a.kv_cache_dtype)
    _opt(argv, "--attention-backend", a.attention_backend)
    _opt(argv, "--max-num-seqs", a.max_running_requests)
    _opt(argv, "--reasoning-parser", a.reasoning_parser)
    if a.tool_call_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", a.tool_call_parser]
    if a.enforce_eager:
        argv.append("--enforce-eager")
    if m.trust_remote_code:
        argv.append("--trust-remote-code")
    argv += parallel.vllm_args(r, ctx.rank, ctx.head_address)
    argv += speculative.vllm_args(r)
    if ray:
        argv += ["--distributed-executor-backend", "ray"]
    elif nodes > 1 and a.data_parallel.size > 1:
        pass  # data-parallel ranks per host: the --data-parallel-* flags above say where the head is
    elif nodes > 1:
        argv += ["--nnodes", str(nodes), "--node-rank", str(ctx.rank),
                 "--master-addr", ctx.head_address, "--master-port", str(e.master_port)]
        if ctx.rank > 0:
            argv.append("--headless")
    argv += [ctx.expand(x, "engine.args.extra") for x in a.extra]
    return argv


def ray_start(r: Recipe, ctx: HostContext) -> list[str]:
    """``ray start`` for one rank: the head opens the GCS, workers join it. Blocks (PID 1)."""
    e = r.engine
    assert isinstance(e, VLLM)
    if ctx.rank == 0:
        return ["ray", "start", "--head", "--port", str(e.ray_port), "--node-ip-address", ctx.rank_address, "--block"]
    return ["ray", "start", "--address", f"{ctx.head_address}:{e.ray_port}", "--node-ip-address", ctx.rank_address, "--block"]


def sglang_launch(r: Recipe, ctx: HostContext, nodes: int) -> list[str]:
    e, a, m = r.engine, r.engine.args, r.model
    assert isinstance(e, SGLang)
    argv = list(e.launcher) + ["--model-path", m.repo]
    _opt(argv, "--revision", m.revision)
    _opt(argv, "--served-model-name", m.served_name)
    argv += ["--tp-size", str(a.tensor_parallel)]
    if a.pipeline_parallel > 1:
        argv += ["--pp-size", str(a.pipeline_parallel)]
    _opt(argv, "--mem-fraction-static", a.memory_fraction)
    _opt(argv, "--context-length", a.max_model_len)
    _opt(argv, "--max-running-requests", a.max_running_requests)
    _opt(argv, "--attention-backend", a.attention_backend)
    _opt(argv, "--kv-cache-dtype", a.kv_cache_dtype)
    _opt(argv, "--reasoning-parser", a.reasoning_parser)
    _opt(argv, "--tool-call-parser", a.tool_call_parser)
    if a.enforce_eager:
        argv.append("--disable-cuda-graph")
    if m.trust_remote_code:
        argv.append("--trust-remote-code")
    argv += parallel.sglang_args(r)
    argv += speculative.sglang_args(r)
    if nodes > 1:
        argv += ["--nnodes", str(nodes), "--node-rank", str(ctx.rank),
                 "--dist-init-addr", f"{ctx.head_address}:{e.dist_init_port}"]
    argv += [ctx.expand(x, "engine.args.extra") for x in a.extra]
    argv += ["--host", a.bind_host, "--port", str(a.port)]
    return argv
