"""vLLM (``vllm serve``): its recipe section, command line, launch, flags, rules, boot lines and metrics.

Multi-node: vLLM native (``--nnodes/--node-rank/--master-addr/--master-port``, ``--headless`` on
the ranks above 0), every rank at once; or Ray (``multinode: ray``): the Ray head, wait for it,
join the workers, wait for all nodes, then ``vllm serve`` on the head (a second process in the
head's container). Data parallelism: every data-parallel rank is a tensor x pipeline group
inside one host; each host runs data_parallel / nodes ranks (``--data-parallel-size-local``).
Expert parallelism spreads the experts over all tensor x data ranks (its size is not a flag).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from inkctl.engines._common import (COMPILE_CACHE_COMMON, expert_on, extra_args, flag_findings, gpu_count_finding, opt,
                                    port_clash, problem, proof_program)
from inkctl.errors import Problem
from inkctl.recipe.engine import EngineBase
from inkctl.recipe.engine_registry import BootPhases, EngineSpec, Metrics

if TYPE_CHECKING:
    from inkctl.plan.hostvars import HostContext
    from inkctl.plan.stages.launch import Launch
    from inkctl.plan.step import Stage
    from inkctl.recipe.model import Recipe

KIND = "vllm"
ALL2ALL = ("naive", "allgather_reducescatter", "pplx", "deepep_high_throughput", "deepep_low_latency",
           "flashinfer_all2allv")


class VLLM(EngineBase):
    """vLLM (``vllm serve``)."""

    kind: Literal["vllm"] = Field(description="Engine kind.")
    multinode: Literal["native", "ray"] = Field(
        "native",
        description="How ranks form one server across hosts: vLLM native (--nnodes/--node-rank/--master-addr/--master-port, --headless on workers) or Ray (head and workers, then vllm serve --distributed-executor-backend ray on the head).",
    )
    master_port: int = Field(29501, ge=1, le=65535, description="Rendezvous port on the head for native multi-node.")
    ray_port: int = Field(6379, ge=1, le=65535, description="Ray GCS port on the head (multinode: ray).")


def _engine(r: Recipe) -> VLLM:
    assert isinstance(r.engine, VLLM)
    return r.engine


# --- the command line ------------------------------------------------------------------------

def serve(r: Recipe, ctx: HostContext, nodes: int, *, ray: bool = False) -> list[str]:
    """``vllm serve`` for one rank. With Ray only the head runs it; workers join Ray instead."""
    e, a, m = _engine(r), r.engine.args, r.model
    argv = ["vllm", "serve", m.repo]
    opt(argv, "--revision", m.revision)
    opt(argv, "--served-model-name", m.served_name)
    argv += m.served_aliases if m.served_name else []
    argv += ["--host", a.bind_host, "--port", str(a.port)]
    argv += ["--tensor-parallel-size", str(a.tensor_parallel)]
    if a.pipeline_parallel > 1:
        argv += ["--pipeline-parallel-size", str(a.pipeline_parallel)]
    opt(argv, "--max-model-len", a.max_model_len)
    opt(argv, "--gpu-memory-utilization", a.memory_fraction)
    opt(argv, "--kv-cache-dtype", a.kv_cache_dtype)
    opt(argv, "--attention-backend", a.attention_backend)
    opt(argv, "--max-num-seqs", a.max_running_requests)
    opt(argv, "--reasoning-parser", a.reasoning_parser)
    if a.tool_call_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", a.tool_call_parser]
    if a.enforce_eager:
        argv.append("--enforce-eager")
    if m.trust_remote_code:
        argv.append("--trust-remote-code")
    argv += parallel_args(r, ctx.rank, ctx.head_address)
    argv += speculative_args(r)
    if ray:
        argv += ["--distributed-executor-backend", "ray"]
    elif nodes > 1 and a.data_parallel.size > 1:
        pass  # data-parallel ranks per host: the --data-parallel-* flags above say where the head is
    elif nodes > 1:
        argv += ["--nnodes", str(nodes), "--node-rank", str(ctx.rank),
                 "--master-addr", ctx.head_address, "--master-port", str(e.master_port)]
        if ctx.rank > 0:
            argv.append("--headless")
    argv += extra_args(r, ctx)
    return argv


def dp_local(r: Recipe) -> int:
    """Data-parallel ranks per host (--data-parallel-size-local)."""
    return max(1, r.engine.args.data_parallel.size // r.hardware.nodes)


def parallel_args(r: Recipe, rank: int, head_address: str) -> list[str]:
    """The data- and expert-parallel flags for one host (rank = the host's index)."""
    a, hw = r.engine.args, r.hardware
    dp, ep, argv = a.data_parallel, a.expert, []
    if dp.size > 1:
        argv += ["--data-parallel-size", str(dp.size)]
        if hw.nodes > 1:
            local = dp_local(r)
            argv += ["--data-parallel-size-local", str(local), "--data-parallel-address", head_address,
                     "--data-parallel-rpc-port", str(dp.rpc_port)]
            if rank > 0:
                argv += ["--data-parallel-start-rank", str(rank * local), "--headless"]
    if ep is not None and ep.enabled:
        argv.append("--enable-expert-parallel")
        if ep.all2all_backend:
            argv += ["--all2all-backend", ep.all2all_backend]
        if ep.eplb:
            argv.append("--enable-eplb")
    return argv


def speculative_args(r: Recipe) -> list[str]:
    """``--speculative-config``: one JSON object (method, model, num_speculative_tokens, revision)."""
    spec = r.speculative
    if spec is None:
        return []
    cfg: dict = {"method": spec.method}
    if spec.draft is not None:
        cfg["model"] = spec.draft.repo
        if spec.draft.revision:
            cfg["revision"] = spec.draft.revision
    if spec.num_speculative_tokens is not None:
        cfg["num_speculative_tokens"] = spec.num_speculative_tokens
    cfg.update({k: v for k, v in spec.config.items() if k not in cfg})
    return ["--speculative-config", json.dumps(cfg, separators=(",", ":"))]


def ray_start(r: Recipe, ctx: HostContext) -> list[str]:
    """``ray start`` for one rank: the head opens the GCS, workers join it. Blocks (PID 1)."""
    e = _engine(r)
    if ctx.rank == 0:
        return ["ray", "start", "--head", "--port", str(e.ray_port), "--node-ip-address", ctx.rank_address, "--block"]
    return ["ray", "start", "--address", f"{ctx.head_address}:{e.ray_port}", "--node-ip-address", ctx.rank_address, "--block"]


def over_ray(r: Recipe) -> bool:
    return _engine(r).multinode == "ray" and r.hardware.nodes > 1


# --- the launch -------------------------------------------------------------------------------

def stages(b: Launch) -> list[Stage]:
    """Native: every rank at once (ranks above 0 run ``--headless``). Ray needs its order."""
    from inkctl.plan.stages.launch import all_at_once

    if over_ray(b.recipe):
        return _ray_stages(b)
    return all_at_once(b, lambda c: serve(b.recipe, c, b.nodes), "headless workers")


def _ray_stages(b: Launch) -> list[Stage]:
    """The Ray head, wait for it, join the workers, wait for all nodes, then ``vllm serve`` on the
    head (a second process in the head's container)."""
    from inkctl import runtimes
    from inkctl.plan.stages.launch import SERVE_IN_HEAD
    from inkctl.plan.step import Run, Stage, WaitFor

    r, head, nodes, rt = b.recipe, b.head, b.nodes, b.runtime
    e = _engine(r)
    status = runtimes.get(rt).exec(b.containers[0].name, "ray", "status")
    argv = serve(r, head, nodes, ray=True)
    return [
        Stage("ray-head", "start the Ray head on rank 0", (b.run_step(head, ray_start(r, head), "start Ray head"),)),
        Stage("ray-head-ready", "wait until the Ray head answers", (
            WaitFor(host=head.name, rank=0, purpose="wait for the Ray head", argv=status, timeout_s=180),)),
        Stage("ray-workers", "join every worker to the Ray head", tuple(
            b.run_step(c, ray_start(r, c), f"join Ray at {c.head_address}:{e.ray_port}")
            for c in b.workers)),
        Stage("ray-cluster-ready", f"wait until Ray sees all {nodes} nodes", (
            WaitFor(host=head.name, rank=0, purpose=f"wait for {nodes} Ray nodes", argv=status, timeout_s=300,
                    expect=" node_", expect_count=nodes),)),
        Stage("serve", "start vllm serve on the Ray head", (Run(
            host=head.name, rank=0, purpose="start vllm serve (Ray executor)",
            argv=runtimes.get(rt).exec(b.containers[0].name, "sh", "-c", SERVE_IN_HEAD, "inkctl-serve", *argv,
                               detach=True)),)),
    ]


def ports(r: Recipe) -> list[tuple[int, str]]:
    if not r.multinode:
        return []
    e = _engine(r)
    return [(e.ray_port, "ray")] if e.multinode == "ray" else [(e.master_port, "master")]


# --- the rules --------------------------------------------------------------------------------

def world_gpus(r: Recipe) -> int:
    a = r.engine.args
    return a.tensor_parallel * a.pipeline_parallel * a.data_parallel.size


def parallel_findings(r: Recipe) -> list[Problem]:
    a, hw = r.engine.args, r.hardware
    dp, out = a.data_parallel, []
    found = gpu_count_finding(r, world_gpus(r))
    if found is not None:
        out.append(found)
    elif dp.size > 1 and hw.nodes > 1 and dp.size % hw.nodes:
        out.append(problem("engine.args.data_parallel.size", f"data_parallel {dp.size} does not split evenly over "
                           f"{hw.nodes} hosts (vLLM runs data_parallel / nodes ranks on each)",
                           f"use a multiple of {hw.nodes}"))
    if dp.attention:
        out.append(problem("engine.args.data_parallel.attention", "DP attention is SGLang's (--enable-dp-attention)",
                           "remove it: vLLM's data parallelism needs no switch"))
    return out


def expert_findings(r: Recipe) -> list[Problem]:
    a, ep, out = r.engine.args, r.engine.args.expert, list[Problem]()
    if not expert_on(r):
        return out
    assert ep is not None
    if ep.size is not None and ep.size != a.tensor_parallel * a.data_parallel.size:
        out.append(problem("engine.args.expert.size", f"vLLM spreads experts over tensor_parallel x data_parallel = "
                           f"{a.tensor_parallel * a.data_parallel.size} ranks; it takes no size ({ep.size} given)", "remove size"))
    if ep.all2all_backend and ep.all2all_backend not in ALL2ALL:
        out.append(problem("engine.args.expert.all2all_backend", f"vLLM has no all2all backend {ep.all2all_backend!r}",
                           f"known: {', '.join(ALL2ALL)}"))
    if ep.deepep_mode:
        out.append(problem("engine.args.expert.deepep_mode", "deepep_mode is SGLang's (--deepep-mode)",
                           "vLLM picks the DeepEP kernels by all2all_backend: deepep_high_throughput or deepep_low_latency"))
    if ep.deepep_max_dispatch_tokens_per_rank:
        out.append(problem("engine.args.expert.deepep_max_dispatch_tokens_per_rank",
                           "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK is SGLang's", "remove it"))
    return out


def engine_findings(r: Recipe) -> list[Problem]:
    e, out = _engine(r), []
    if e.multinode == "ray" and not r.multinode:
        out.append(Problem("Ray on a single node adds a moving part for nothing", path="engine.multinode",
                           hint="use multinode: native", severity="warning"))
    return out + port_clash(r, e.master_port, e.ray_port) + flag_findings(r)


def speculative_findings(r: Recipe) -> list[Problem]:
    spec = r.speculative
    if spec is not None and (spec.num_steps is not None or spec.eagle_topk is not None):
        field = "num_steps" if spec.num_steps is not None else "eagle_topk"
        return [Problem(f"speculative.{field} is SGLang's; vLLM takes num_speculative_tokens",
                        path=f"speculative.{field}", hint="remove it")]
    return []


# --- the flags (the names in vLLM's --help: its engine arguments) ------------------------------

FLAG_OF = {  # typed field -> the flags it passes (serve above)
    "memory_fraction": ("--gpu-memory-utilization",), "max_model_len": ("--max-model-len",),
    "max_running_requests": ("--max-num-seqs",), "kv_cache_dtype": ("--kv-cache-dtype",),
    "attention_backend": ("--attention-backend",), "reasoning_parser": ("--reasoning-parser",),
    "tool_call_parser": ("--tool-call-parser", "--enable-auto-tool-choice"), "enforce_eager": ("--enforce-eager",),
}
ONLY = {  # flags SGLang does not have -> the typed field that has the same meaning (None: no typed field)
    "--gpu-memory-utilization": "memory_fraction", "--tensor-parallel-size": "tensor_parallel",
    "--pipeline-parallel-size": "pipeline_parallel", "--max-model-len": "max_model_len",
    "--max-num-seqs": "max_running_requests", "--enforce-eager": "enforce_eager",
    "--enable-auto-tool-choice": "tool_call_parser", "--max-num-batched-tokens": None,
    "--enable-prefix-caching": None, "--distributed-executor-backend": None, "--compilation-config": None,
    "--enable-expert-parallel": None, "--data-parallel-size": None, "--swap-space": None,
    "--enable-chunked-prefill": None, "--headless": None, "--master-addr": None,
}
SET_BY_INKCTL = frozenset({
    "--tensor-parallel-size", "--pipeline-parallel-size", "--port", "--host", "--nnodes", "--node-rank",
    "--master-addr", "--master-port", "--headless", "--model", "--served-model-name", "--trust-remote-code",
    "--data-parallel-size", "-dp", "--data-parallel-size-local", "--data-parallel-address",
    "--data-parallel-rpc-port", "--data-parallel-start-rank", "--enable-expert-parallel", "--speculative-config",
})


# --- the boot log (vLLM v0.11-v0.28 worker/engine code) ---------------------------------------

_NUM = r"(\d+(?:\.\d+)?)"
# regex texts, compiled by re on the first log line (not when validate imports this module)
_COMPILED = r"Compiling a graph for .* takes " + _NUM + r" s"
_CACHED = r"Directly load the compiled graph\(s\) for .* from the cache, took " + _NUM + r" s"
_KV = r"Available KV cache memory: " + _NUM + r" GiB"


def _feed(p, line: str) -> None:
    if re.search(_CACHED, line):
        p.compile_cache = "warm"
    elif re.search(_COMPILED, line):
        p.compile_cache = p.compile_cache or "cold"
    elif m := re.search(_KV, line):
        p.kv_cache_gib = float(m.group(1))


BOOT = BootPhases(
    phases=(
        ("weights", r"Loading weights took " + _NUM + r" seconds"),
        ("model_load", r"Model loading took [\d.]+ GiB (?:memory )?and " + _NUM + r" seconds"),
        ("profile", r"Memory profiling takes " + _NUM + r" seconds"),
        ("compile", r"torch\.compile (?:takes|took) " + _NUM + r" s in total"),
        ("graphs", r"Graph capturing finished in " + _NUM + r" secs"),
        ("init_engine", r"init engine \(profile, create kv cache, warmup model\) took " + _NUM + r" (?:s|seconds)"),
    ),
    keywords=("took", "takes", "elapsed", "Load weight", "Available KV", "Compiling a graph", "Directly load"),
    feed=_feed,
)

_JOB = '{job="inkctl-engines"}'
METRICS = Metrics(
    running=("vllm:num_requests_running",), waiting=("vllm:num_requests_waiting",),
    kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),  # the second before v0.10
    generated=("vllm:generation_tokens_total",), ttft=("vllm:time_to_first_token_seconds",),
    e2e=("vllm:e2e_request_latency_seconds",),
    panels=(
        ("Requests running", f"sum by (replica) (vllm:num_requests_running{_JOB})", "short"),
        ("Requests waiting", f"sum by (replica) (vllm:num_requests_waiting{_JOB})", "short"),
        ("KV cache usage", f"max by (replica) (vllm:kv_cache_usage_perc{_JOB})", "percentunit"),
        ("Generation tokens/s", f"sum by (replica) (rate(vllm:generation_tokens_total{_JOB}[1m]))", "short"),
        ("TTFT p50", f"histogram_quantile(0.5, sum by (le, replica) (rate(vllm:time_to_first_token_seconds_bucket{_JOB}[1m])))", "s"),
        ("TTFT p99", f"histogram_quantile(0.99, sum by (le, replica) (rate(vllm:time_to_first_token_seconds_bucket{_JOB}[1m])))", "s"),
        ("Requests finished/s", f"sum by (replica) (rate(vllm:request_success_total{_JOB}[1m]))", "reqps"),
    ),
)

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))


def disagg_role(role: str, transfer, port: int, address: str | None) -> tuple[list[str], list[tuple[str, str]]]:
    """A P/D replica: the NixlConnector both ways (the router says which side a request is on);
    NIXL's side channel, where a decode replica reads the prefill's block ids, on ``port``."""
    env = [("VLLM_NIXL_SIDE_CHANNEL_PORT", str(port))]
    if address:
        env.append(("VLLM_NIXL_SIDE_CHANNEL_HOST", address))
    return ["--kv-transfer-config", NIXL], env


# what a headless rank (--headless: every rank but the head, native multi-node or data parallel)
# refuses, in vLLM's own serve command: "--api-server-count=N cannot be used with --headless"
# (0.29 on; "api_server_count can't be set in headless mode" before), and "data_parallel_hybrid_lb
# is not applicable in headless mode"
WORKER_REFUSES = frozenset({"--api-server-count", "--data-parallel-hybrid-lb"})

# the flags the plan writes that no typed engine.args field passes, and the recipe field behind each
PLANNED_BY = {"--distributed-executor-backend": "engine.multinode", "--nnodes": "hardware.nodes",
              "--node-rank": "hardware.nodes (each host's rank)", "--headless": "hardware.nodes",
              "--master-addr": "the head's cluster_address (inventory)", "--master-port": "engine.master_port",
              "--host": "engine.args.bind_host", "--port": "engine.args.port",
              "--tensor-parallel-size": "engine.args.tensor_parallel", "--pipeline-parallel-size": "engine.args.pipeline_parallel",
              "--data-parallel-size": "engine.args.data_parallel.size", "--enable-expert-parallel": "engine.args.expert",
              "--served-model-name": "model.served_name", "--revision": "model.revision",
              "--trust-remote-code": "model.trust_remote_code", "--speculative-config": "speculative",
              "--all2all-backend": "engine.args.expert.all2all_backend", "--enable-eplb": "engine.args.expert.eplb",
              "--data-parallel-size-local": "engine.args.data_parallel.size", "--data-parallel-address": "the head's cluster_address",
              "--data-parallel-rpc-port": "engine.args.data_parallel.rpc_port", "--data-parallel-start-rank": "hardware.nodes"}


# vLLM: the environment variable older releases read, and the expert field whose flag replaced it
_VLLM_ENV_OF_FIELD = {"VLLM_ALL2ALL_BACKEND": "all2all_backend"}


def overlap_findings(r: Recipe) -> list[Problem]:
    out: list[Problem] = []
    ep, a = r.engine.args.expert, r.engine.args
    if ep is None:
        return out
    for var, field in _VLLM_ENV_OF_FIELD.items():
        typed, env = getattr(ep, field), r.container.env.get(var)
        if typed is None or env is None:
            continue
        same = env == typed
        out.append(Problem(f"{var}={env} in the environment beside expert.{field}: {typed} (--all2all-backend): "
                           + ("the same setting twice" if same else "two different backends; the flag wins in "
                              "releases that have it, the variable in older ones"),
                           path=f"container.env.{var}", severity="warning" if same else "error",
                           hint=f"keep expert.{field} and remove {var} from container.env"))
    size = a.tensor_parallel * a.data_parallel.size
    if ep.size is not None and ep.size == size:
        out.append(Problem(f"vLLM takes no expert size: it spreads the experts over tensor_parallel x data_parallel = "
                           f"{size} ranks itself, so size: {ep.size} is not passed (the same number)",
                           path="engine.args.expert.size", severity="warning", hint="remove size"))
    return out


SPEC = EngineSpec(
    kind=KIND, name="vLLM", config=VLLM,
    command=serve, stages=stages, env=lambda r: [],
    compile_cache_env=(("VLLM_CACHE_ROOT", "vllm"), *COMPILE_CACHE_COMMON),
    flag_of=FLAG_OF, only_flags=ONLY, set_by_inkctl=SET_BY_INKCTL,
    world_gpus=world_gpus, parallel_findings=parallel_findings, expert_findings=expert_findings,
    engine_findings=engine_findings, speculative_findings=speculative_findings,
    ports=ports, serves_in_head=over_ray, variant=lambda r: _engine(r).multinode if r.multinode else None,
    boot=BOOT, metrics=METRICS, server_lines=("Starting vLLM API server",), served_aliases=True, host_ip_env=("VLLM_HOST_IP",),
    programs=(("vllm", "serve"), ("python3", "-m", "vllm.entrypoints.openai.api_server"),
              ("python", "-m", "vllm.entrypoints.openai.api_server")),
    underscore_flags=True,
    proof_program=proof_program("vllm"), worker_refuses=WORKER_REFUSES, planned_by=PLANNED_BY,
    overlap_findings=overlap_findings, api_key_env=("VLLM_API_KEY",),
    disagg_backends=("nixl",), disagg_role=disagg_role,
)
