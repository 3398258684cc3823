"""SGLang (``python3 -m sglang.launch_server``): its recipe section, command line, launch, flags,
rules, boot lines and metrics.

Every rank starts at once; the ``--dist-init-addr`` ranks retry until the head answers.
Without DP attention: data_parallel copies of a tensor x pipeline group. With
``--enable-dp-attention`` the data-parallel ranks live inside the tensor group:
tensor_parallel x pipeline_parallel = nodes x gpus_per_host and data_parallel divides
tensor_parallel. ``--ep-size`` divides tensor_parallel.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from inkctl.engines._common import (COMPILE_CACHE_COMMON, expert_on, expert_size_finding, extra_args, flag_findings, gpu_count_finding, opt,
                                    port_clash, problem, proof_program)
from inkctl.errors import Problem
from inkctl.recipe.engine import EngineBase
from inkctl.recipe.engine_registry import BootPhases, EngineSpec, Metrics

if TYPE_CHECKING:
    from inkctl.plan.hostvars import HostContext
    from inkctl.plan.stages.launch import Launch
    from inkctl.plan.step import Stage
    from inkctl.recipe.model import Recipe

KIND = "sglang"
A2A = ("none", "deepep", "mooncake", "mori", "ascend_fuseep", "flashinfer")


class SGLang(EngineBase):
    """SGLang (``python3 -m sglang.launch_server``)."""

    kind: Literal["sglang"] = Field(description="Engine kind.")
    dist_init_port: int = Field(20000, ge=1, le=65535, description="Port on the head for --dist-init-addr in multi-node runs.")
    launcher: list[str] = Field(
        default=["python3", "-m", "sglang.launch_server"],
        description="Command that starts the server, before its arguments.",
    )


def _engine(r: Recipe) -> SGLang:
    assert isinstance(r.engine, SGLang)
    return r.engine


# --- the command line ------------------------------------------------------------------------

def launch(r: Recipe, ctx: HostContext, nodes: int) -> list[str]:
    e, a, m = _engine(r), r.engine.args, r.model
    argv = list(e.launcher) + ["--model-path", m.repo]
    opt(argv, "--revision", m.revision)
    opt(argv, "--served-model-name", m.served_name)
    argv += ["--tp-size", str(a.tensor_parallel)]
    if a.pipeline_parallel > 1:
        argv += ["--pp-size", str(a.pipeline_parallel)]
    opt(argv, "--mem-fraction-static", a.memory_fraction)
    opt(argv, "--context-length", a.max_model_len)
    opt(argv, "--max-running-requests", a.max_running_requests)
    opt(argv, "--attention-backend", a.attention_backend)
    opt(argv, "--kv-cache-dtype", a.kv_cache_dtype)
    opt(argv, "--reasoning-parser", a.reasoning_parser)
    opt(argv, "--tool-call-parser", a.tool_call_parser)
    if a.enforce_eager:
        argv.append("--disable-cuda-graph")
    if m.trust_remote_code:
        argv.append("--trust-remote-code")
    argv += parallel_args(r)
    argv += speculative_args(r)
    if nodes > 1:
        argv += ["--nnodes", str(nodes), "--node-rank", str(ctx.rank),
                 "--dist-init-addr", f"{ctx.head_address}:{e.dist_init_port}"]
    argv += extra_args(r, ctx)
    argv += ["--host", a.bind_host, "--port", str(a.port)]
    return argv


def parallel_args(r: Recipe) -> list[str]:
    a = r.engine.args
    dp, ep, argv = a.data_parallel, a.expert, []
    if dp.size > 1:
        argv += ["--dp-size", str(dp.size)]
    if dp.attention:
        argv.append("--enable-dp-attention")
    if ep is not None and ep.enabled:
        argv += ["--ep-size", str(ep.size or a.tensor_parallel)]
        if ep.all2all_backend:
            argv += ["--moe-a2a-backend", ep.all2all_backend]
        if ep.deepep_mode:
            argv += ["--deepep-mode", ep.deepep_mode]
        if ep.eplb:
            argv.append("--enable-eplb")
    return argv


def speculative_args(r: Recipe) -> list[str]:
    """``--speculative-algorithm`` with ``--speculative-draft-model-path`` (and its revision,
    ``--speculative-num-steps``, ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``)."""
    spec = r.speculative
    if spec is None:
        return []
    argv = ["--speculative-algorithm", spec.method]
    if spec.draft is not None:
        argv += ["--speculative-draft-model-path", spec.draft.repo]
        if spec.draft.revision:
            argv += ["--speculative-draft-model-revision", spec.draft.revision]
    for flag, value in (("--speculative-num-steps", spec.num_steps), ("--speculative-eagle-topk", spec.eagle_topk),
                        ("--speculative-num-draft-tokens", spec.num_speculative_tokens)):
        if value is not None:
            argv += [flag, str(value)]
    return argv


def env(r: Recipe) -> list[tuple[str, str]]:
    ep = r.engine.args.expert
    if ep is not None and ep.enabled and ep.deepep_max_dispatch_tokens_per_rank:
        return [("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", str(ep.deepep_max_dispatch_tokens_per_rank))]
    return []


def stages(b: Launch) -> list[Stage]:
    from inkctl.plan.stages.launch import all_at_once

    return all_at_once(b, lambda c: launch(b.recipe, c, b.nodes), "workers")


def ports(r: Recipe) -> list[tuple[int, str]]:
    return [(_engine(r).dist_init_port, "dist-init")] if r.multinode else []


# --- the rules --------------------------------------------------------------------------------

def world_gpus(r: Recipe) -> int:
    """tensor x pipeline x data, but with DP attention the data-parallel ranks are inside the tensor group."""
    a = r.engine.args
    dp = 1 if a.data_parallel.attention else a.data_parallel.size
    return a.tensor_parallel * a.pipeline_parallel * dp


def parallel_findings(r: Recipe) -> list[Problem]:
    a, hw, dp = r.engine.args, r.hardware, r.engine.args.data_parallel
    if not dp.attention:
        found = gpu_count_finding(r, world_gpus(r))
        return [found] if found is not None else []
    out, have = [], hw.nodes * hw.gpus_per_host
    if a.tensor_parallel * a.pipeline_parallel != have:
        out.append(problem("engine.args.tensor_parallel",
                           f"tensor_parallel {a.tensor_parallel} x pipeline_parallel {a.pipeline_parallel} = "
                           f"{a.tensor_parallel * a.pipeline_parallel} GPUs, but the hosts provide "
                           f"{hw.nodes} x {hw.gpus_per_host} = {have} (with DP attention the data-parallel ranks "
                           "live inside the tensor-parallel group)",
                           "make tensor_parallel x pipeline_parallel equal hardware.nodes x hardware.gpus_per_host"))
    if a.tensor_parallel % dp.size:
        out.append(problem("engine.args.data_parallel.size", f"data_parallel {dp.size} does not divide "
                           f"tensor_parallel {a.tensor_parallel} (DP attention splits the tensor group)",
                           f"use a divisor of {a.tensor_parallel}, e.g. {a.tensor_parallel}"))
    return out


def expert_findings(r: Recipe) -> list[Problem]:
    ep = r.engine.args.expert
    if not expert_on(r):
        return []
    assert ep is not None
    out = expert_size_finding(r, "SGLang's expert ranks live inside the tensor group")
    if ep.all2all_backend and ep.all2all_backend not in A2A:
        out.append(problem("engine.args.expert.all2all_backend", f"SGLang has no --moe-a2a-backend {ep.all2all_backend!r}",
                           f"known: {', '.join(A2A)}"))
    if ep.deepep_mode and ep.all2all_backend != "deepep":
        out.append(problem("engine.args.expert.deepep_mode", "deepep_mode needs all2all_backend: deepep"))
    return out


def speculative_findings(r: Recipe) -> list[Problem]:
    if r.speculative is not None and r.speculative.config:
        return [Problem("speculative.config is vLLM's --speculative-config; SGLang takes --speculative-* flags",
                        path="speculative.config", hint="remove it, or pass SGLang's flags in engine.args.extra")]
    return []


# --- the flags (the names in SGLang's --help: its server arguments) ---------------------------

FLAG_OF = {  # typed field -> the flags it passes (launch above)
    "memory_fraction": ("--mem-fraction-static",), "max_model_len": ("--context-length",),
    "max_running_requests": ("--max-running-requests",), "kv_cache_dtype": ("--kv-cache-dtype",),
    "attention_backend": ("--attention-backend",), "reasoning_parser": ("--reasoning-parser",),
    "tool_call_parser": ("--tool-call-parser",), "enforce_eager": ("--disable-cuda-graph",),
}
ONLY = {  # flags vLLM does not have -> the typed field that has the same meaning (None: no typed field)
    "--mem-fraction-static": "memory_fraction", "--tp-size": "tensor_parallel", "--tp": "tensor_parallel",
    "--pp-size": "pipeline_parallel", "--context-length": "max_model_len",
    "--max-running-requests": "max_running_requests", "--disable-cuda-graph": "enforce_eager",
    "--model-path": None, "--dist-init-addr": None, "--chunked-prefill-size": None, "--cuda-graph-max-bs": None,
    "--disable-radix-cache": None, "--enable-torch-compile": None, "--dp-size": None, "--ep-size": None,
    "--schedule-policy": None, "--enable-dp-attention": None, "--mem-fraction": None,
}
# flags a release replaced (sglang#38375; the tables date the removals: gone by 0.5.20)
RENAMED = {"--cuda-graph-max-bs": "--cuda-graph-max-bs-decode",
           "--disable-piecewise-cuda-graph": "--cuda-graph-backend-prefill=disabled",
           "--enable-piecewise-cuda-graph": "--cuda-graph-backend-prefill=tc_piecewise",
           "--stream-output": "--incremental-streaming-output"}
SET_BY_INKCTL = frozenset({
    "--tp-size", "--tp", "--pp-size", "--port", "--host", "--nnodes", "--node-rank", "--dist-init-addr",
    "--model-path", "--served-model-name", "--trust-remote-code", "--dp-size", "--dp", "--enable-dp-attention",
    "--ep-size", "--ep", "--speculative-algorithm", "--speculative-draft-model-path",
    "--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--model",  # its aliases
})


# --- the boot log (SGLang v0.5 model runner) --------------------------------------------------

_NUM = r"(\d+(?:\.\d+)?)"
_BEGIN = "Load weight begin."
_END = "Load weight end."
_STAMP = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"  # compiled by re on the first log line


def _stamp(line: str) -> datetime | None:
    m = re.search(_STAMP, line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S") if m else None


def _feed(p, line: str) -> None:
    """v0.5.0 prints no elapsed time on "Load weight end.": the phase is the time between the
    stamps of begin and end (``[2026-11-29 16:21:24 TP0]``)."""
    if _BEGIN in line:
        p._weights_begin = _stamp(line)
    elif _END in line and "weights" not in p.seconds:
        end = _stamp(line)
        if end is not None and p._weights_begin is not None:
            p.seconds["weights"] = (end - p._weights_begin).total_seconds()


BOOT = BootPhases(
    phases=(
        ("dist_init", r"Init torch distributed ends\. elapsed=" + _NUM + r" s"),
        ("weights", r"Load weight end\. elapsed=" + _NUM + r" s"),
        ("graphs", r"Capture (?:[\w ]+ )?(?:cuda|CUDA) graph end\. (?:Time elapsed: |elapsed=)" + _NUM + r" s"),
    ),
    keywords=("took", "takes", "elapsed", "Load weight", "Available KV", "Compiling a graph", "Directly load"),
    feed=_feed,
)

_JOB = '{job="inkctl-engines"}'
METRICS = Metrics(
    running=("sglang:num_running_reqs", "sglang:num_requests_running"),
    waiting=("sglang:num_queue_reqs", "sglang:num_requests_waiting"),
    kv_usage=("sglang:token_usage",), generated=("sglang:generation_tokens_total",),
    ttft=("sglang:time_to_first_token_seconds",), e2e=("sglang:e2e_request_latency_seconds",),
    panels=(
        ("Requests running", f"sum by (replica) (sglang:num_running_reqs{_JOB})", "short"),
        ("Requests waiting", f"sum by (replica) (sglang:num_queue_reqs{_JOB})", "short"),
        ("KV cache usage", f"max by (replica) (sglang:token_usage{_JOB})", "percentunit"),
        ("Generation tokens/s", f"sum by (replica) (rate(sglang:generation_tokens_total{_JOB}[1m]))", "short"),
        ("TTFT p50", f"histogram_quantile(0.5, sum by (le, replica) (rate(sglang:time_to_first_token_seconds_bucket{_JOB}[1m])))", "s"),
        ("TTFT p99", f"histogram_quantile(0.99, sum by (le, replica) (rate(sglang:time_to_first_token_seconds_bucket{_JOB}[1m])))", "s"),
        ("Requests finished/s", f"sum by (replica) (rate(sglang:e2e_request_latency_seconds_count{_JOB}[1m]))", "reqps"),
    ),
)

def disagg_role(role: str, transfer, port: int, address: str | None) -> tuple[list[str], list[tuple[str, str]]]:
    """A P/D replica: --disaggregation-mode; a prefill's bootstrap server (where a decode replica
    meets it for the KV handshake) on ``port``."""
    flags = ["--disaggregation-mode", role, "--disaggregation-transfer-backend", transfer.backend or "nixl"]
    if role == "prefill":
        flags += ["--disaggregation-bootstrap-port", str(port)]
    if transfer.ib_device:
        flags += ["--disaggregation-ib-device", transfer.ib_device]
    return flags, []


# the flags the plan writes that no typed engine.args field passes, and the recipe field behind each
PLANNED_BY = {"--nnodes": "hardware.nodes", "--node-rank": "hardware.nodes (each host's rank)",
              "--dist-init-addr": "engine.dist_init_port and the head's cluster_address", "--host": "engine.args.bind_host",
              "--port": "engine.args.port", "--tp-size": "engine.args.tensor_parallel", "--pp-size": "engine.args.pipeline_parallel",
              "--dp-size": "engine.args.data_parallel.size", "--ep-size": "engine.args.expert",
              "--model-path": "model.repo", "--served-model-name": "model.served_name", "--revision": "model.revision",
              "--trust-remote-code": "model.trust_remote_code", "--speculative-algorithm": "speculative"}

SPEC = EngineSpec(
    kind=KIND, name="SGLang", config=SGLang,
    programs=(("sglang", "serve"), ("python3", "-m", "sglang.launch_server"), ("python", "-m", "sglang.launch_server")),
    command=launch, stages=stages, env=env,
    compile_cache_env=(*COMPILE_CACHE_COMMON, ("SGLANG_DG_CACHE_DIR", "deep_gemm")),
    flag_of=FLAG_OF, only_flags=ONLY, set_by_inkctl=SET_BY_INKCTL,
    world_gpus=world_gpus, parallel_findings=parallel_findings, expert_findings=expert_findings,
    engine_findings=lambda r: port_clash(r, _engine(r).dist_init_port) + flag_findings(r),
    speculative_findings=speculative_findings,
    ports=ports, serves_in_head=lambda r: False, variant=lambda r: None, boot=BOOT, metrics=METRICS,
    renamed=RENAMED,
    server_lines=("The server is fired up",), host_ip_env=("SGLANG_HOST_IP",), proof_program=proof_program("sglang"),
    planned_by=PLANNED_BY, api_key_env=("INKCTL_API_KEY",), api_key_config=True,
    disagg_backends=("nixl", "mooncake"), disagg_role=disagg_role,
)
