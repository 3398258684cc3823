"""TensorRT-LLM (``trtllm-serve``, PyTorch backend): its recipe section, command line, options
file, launch, flags, rules, boot lines and metrics.

One host: ``trtllm-serve MODEL --backend pytorch --tp_size N [--ep_size M]`` spawns its own MPI
ranks, one per GPU (tensor x pipeline). Across hosts TensorRT-LLM runs under MPI (``mpirun`` or
Slurm with ``trtllm-llmapi-launch``), which inkctl does not plan: a multi-host recipe is refused.

The LLM API options the command line has no flag for (attention DP, the KV cache's dtype, CUDA
graphs, MoE kernels, speculative decoding) go in one YAML file, ``--extra_llm_api_options``: the
plan puts it on the host (its sha256 in the plan, its name carrying the digest, so a changed file
is a changed argv) and the container reads it from the engine-files mount.
"""

from __future__ import annotations

import functools
import hashlib
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from inkctl.engines._common import expert_on, expert_size_finding, extra_args, flag_findings, gpu_count_finding, opt, problem, proof_program
from inkctl.errors import Problem
from inkctl.recipe.engine import EngineBase
from inkctl.recipe.engine_registry import BootPhases, EngineSpec, Metrics

if TYPE_CHECKING:
    from inkctl.plan.hostvars import HostContext
    from inkctl.plan.stages.launch import Launch
    from inkctl.plan.step import Stage
    from inkctl.recipe.model import Recipe

KIND = "trtllm"
# speculative.method -> speculative_config.decoding_type (TensorRT-LLM's LLM API)
DECODING = {"mtp": "MTP", "eagle3": "Eagle", "eagle": "Eagle", "ngram": "NGram", "draft_model": "DraftTarget"}


class TensorRTLLM(EngineBase):
    """TensorRT-LLM (``trtllm-serve``, PyTorch backend)."""

    kind: Literal["trtllm"] = Field(description="Engine kind.")
    backend: Literal["pytorch"] = Field("pytorch", description="trtllm-serve --backend: the PyTorch backend (the TensorRT engine-build path is not planned).")
    launcher: list[str] = Field(default=["trtllm-serve"], description="Command that starts the server, before its arguments.")
    llm_api_options: dict[str, Any] = Field(
        default_factory=dict,
        description="LLM API options written to the YAML file the plan puts and passes as --extra_llm_api_options "
                    "(e.g. enable_attention_dp, cuda_graph_config, kv_cache_config, moe_config); the typed fields add theirs.")


def _engine(r: Recipe) -> TensorRTLLM:
    assert isinstance(r.engine, TensorRTLLM)
    return r.engine


# --- the options file -------------------------------------------------------------------------

def typed_options(r: Recipe) -> dict[str, tuple[str, Any]]:
    """The LLM API options the typed fields set: option -> (the field, its value)."""
    a, out = r.engine.args, dict[str, tuple[str, Any]]()
    if a.kv_cache_dtype:
        out["kv_cache_config"] = ("engine.args.kv_cache_dtype", {"dtype": a.kv_cache_dtype})
    if a.attention_backend:
        out["attn_backend"] = ("engine.args.attention_backend", a.attention_backend)
    if a.data_parallel.attention:
        out["enable_attention_dp"] = ("engine.args.data_parallel.attention", True)
    if a.enforce_eager:
        out["cuda_graph_config"] = ("engine.args.enforce_eager", None)
    spec = speculative_config(r)
    if spec is not None:
        out["speculative_config"] = ("speculative", spec)
    return out


def speculative_config(r: Recipe) -> dict[str, Any] | None:
    """speculative: as TensorRT-LLM's speculative_config (MTP heads, Eagle3 with its draft, n-gram)."""
    spec = r.speculative
    if spec is None or spec.method.lower() not in DECODING:
        return None
    kind = DECODING[spec.method.lower()]
    out: dict[str, Any] = {"decoding_type": kind}
    n = spec.num_speculative_tokens
    if kind == "MTP":
        out["num_nextn_predict_layers"] = n or 1
    elif n is not None:
        out["max_draft_len"] = n
    if spec.draft is not None:
        out["speculative_model_dir"] = spec.draft.repo
    if kind == "Eagle" and spec.method.lower() == "eagle3":
        out["eagle3_one_model"] = True
    return out


def options(r: Recipe) -> dict[str, Any]:
    """What the options file holds: the recipe's llm_api_options with the typed fields' options
    (a key given both ways is refused by engine_findings)."""
    merged = dict(_engine(r).llm_api_options)
    merged.update({k: v for k, (_, v) in typed_options(r).items()})
    return merged


def options_file(r: Recipe) -> tuple[str, str] | None:
    """(file name, YAML text) of the options file, or None when there is nothing to say. The name
    carries the text's digest: another file is another argv, so the plan's hash sees it."""
    doc = options(r)
    if not doc:
        return None
    import yaml

    text = ("# trtllm-serve --extra_llm_api_options, written by inkctl from engine.llm_api_options and the "
            "typed fields\n" + yaml.safe_dump(doc, sort_keys=True, default_flow_style=False))
    return f"llm-api-options-{hashlib.sha256(text.encode()).hexdigest()[:12]}.yaml", text


def files(r: Recipe) -> list[tuple[str, str]]:
    found = options_file(r)
    return [found] if found else []


# --- the command line ------------------------------------------------------------------------

def launch(r: Recipe, ctx: HostContext, nodes: int) -> list[str]:
    from inkctl.plan.stages.launch import ENGINE_FILES

    e, a, m = _engine(r), r.engine.args, r.model
    argv = [*e.launcher, m.repo, "--backend", e.backend, "--tp_size", str(a.tensor_parallel)]
    if a.pipeline_parallel > 1:
        argv += ["--pp_size", str(a.pipeline_parallel)]
    if expert_on(r):
        assert a.expert is not None
        argv += ["--ep_size", str(a.expert.size or a.tensor_parallel)]
    opt(argv, "--kv_cache_free_gpu_memory_fraction", a.memory_fraction)
    opt(argv, "--max_seq_len", a.max_model_len)
    opt(argv, "--max_batch_size", a.max_running_requests)
    opt(argv, "--reasoning_parser", a.reasoning_parser)
    opt(argv, "--tool_parser", a.tool_call_parser)
    opt(argv, "--revision", m.revision)
    if m.trust_remote_code:
        argv.append("--trust_remote_code")
    found = options_file(r)
    if found is not None:
        argv += ["--extra_llm_api_options", f"{ENGINE_FILES}/{found[0]}"]
    argv += extra_args(r, ctx)
    argv += ["--host", a.bind_host, "--port", str(a.port)]
    return argv


def stages(b: Launch) -> list[Stage]:
    from inkctl.plan.stages.launch import all_at_once

    return all_at_once(b, lambda c: launch(b.recipe, c, b.nodes), "workers")


# --- the rules --------------------------------------------------------------------------------

def world_gpus(r: Recipe) -> int:
    a = r.engine.args
    return a.tensor_parallel * a.pipeline_parallel


def parallel_findings(r: Recipe) -> list[Problem]:
    a, hw, out = r.engine.args, r.hardware, list[Problem]()
    if hw.nodes > 1:
        out.append(problem("hardware.nodes", f"TensorRT-LLM across {hw.nodes} hosts runs under MPI (mpirun, or Slurm "
                           "with trtllm-llmapi-launch): inkctl plans one host of trtllm-serve for now",
                           "use one host (hardware.nodes: 1), or vLLM/SGLang for a multi-host deployment"))
        return out
    found = gpu_count_finding(r, world_gpus(r))
    if found is not None:
        out.append(found)
    dp = a.data_parallel
    if dp.size > 1:
        out.append(problem("engine.args.data_parallel.size", "trtllm-serve runs one server; its data parallelism is "
                           "attention DP inside the tensor group (data_parallel.attention), not replicas",
                           "remove size; set data_parallel.attention: true for attention DP"))
    return out


def expert_findings(r: Recipe) -> list[Problem]:
    ep = r.engine.args.expert
    if not expert_on(r):
        return []
    assert ep is not None
    out = expert_size_finding(r, "TensorRT-LLM's MoE splits the tensor group into expert and tensor ranks")
    for field in ("all2all_backend", "deepep_mode", "deepep_max_dispatch_tokens_per_rank"):
        if getattr(ep, field, None):
            out.append(problem(f"engine.args.expert.{field}", f"{field} is not a TensorRT-LLM option",
                               "choose the MoE kernels with engine.llm_api_options.moe_config.backend"))
    if ep.eplb:
        out.append(problem("engine.args.expert.eplb", "TensorRT-LLM's expert load balancer is set in its options file",
                           "remove eplb; set engine.llm_api_options.moe_config.load_balancer"))
    return out


def engine_findings(r: Recipe) -> list[Problem]:
    e, out = _engine(r), list[Problem]()
    for key, (field, _) in typed_options(r).items():
        if key in e.llm_api_options:
            out.append(problem(f"engine.llm_api_options.{key}", f"{key} is set by {field} too: it would be written twice",
                               f"remove it from llm_api_options, or {field}"))
    if r.model.served_name and r.model.served_name != r.model.repo:
        out.append(problem("model.served_name", "trtllm-serve serves the model under MODEL, the repository id: it "
                           "has no --served_model_name in the release inkctl has a table for",
                           "remove served_name (clients ask for model.repo)"))
    return out + flag_findings(r)


def speculative_findings(r: Recipe) -> list[Problem]:
    spec = r.speculative
    if spec is None:
        return []
    out = []
    if spec.method.lower() not in DECODING:
        out.append(problem("speculative.method", f"TensorRT-LLM has no speculative decoding {spec.method!r}",
                           f"known: {', '.join(DECODING)}"))
    for field in ("num_steps", "eagle_topk"):
        if getattr(spec, field) is not None:
            out.append(problem(f"speculative.{field}", f"speculative.{field} is SGLang's; TensorRT-LLM takes "
                               "num_speculative_tokens (max_draft_len, or the MTP layers)", "remove it"))
    if spec.config:
        out.append(problem("speculative.config", "speculative.config is vLLM's --speculative-config",
                           "put TensorRT-LLM's own keys in engine.llm_api_options.speculative_config"))
    if spec.method.lower() in ("eagle3", "eagle", "draft_model") and spec.draft is None:
        out.append(problem("speculative.draft", f"{spec.method} needs a draft model (speculative_model_dir)",
                           "set speculative.draft.repo"))
    return out


# --- the flags (trtllm-serve's click options: underscores) -------------------------------------

FLAG_OF = {  # typed field -> the flags it passes (launch above)
    "memory_fraction": ("--kv_cache_free_gpu_memory_fraction",), "max_model_len": ("--max_seq_len",),
    "max_running_requests": ("--max_batch_size",), "reasoning_parser": ("--reasoning_parser",),
    "tool_call_parser": ("--tool_parser",),
}
ONLY = {  # flags vLLM and SGLang do not have -> the typed field of that meaning (None: none)
    "--tp_size": "tensor_parallel", "--tensor_parallel_size": "tensor_parallel", "--pp_size": "pipeline_parallel",
    "--pipeline_parallel_size": "pipeline_parallel", "--kv_cache_free_gpu_memory_fraction": "memory_fraction",
    "--free_gpu_memory_fraction": "memory_fraction", "--max_seq_len": "max_model_len",
    "--max_batch_size": "max_running_requests", "--ep_size": None, "--moe_expert_parallel_size": None,
    "--extra_llm_api_options": None, "--max_num_tokens": None, "--backend": None,
}
SET_BY_INKCTL = frozenset({
    "--tp_size", "--tensor_parallel_size", "--pp_size", "--pipeline_parallel_size", "--ep_size",
    "--moe_expert_parallel_size", "--backend", "--host", "--port", "--extra_llm_api_options", "--config",
    "--trust_remote_code", "--revision",
})


# --- the boot log (TensorRT-LLM's PyTorch backend) ---------------------------------------------

_NUM = r"(\d+(?:\.\d+)?)"


@functools.lru_cache(maxsize=None)
def _rx(name: str) -> re.Pattern[str]:
    """The regexes of the boot log, compiled when the first line comes (not when validate imports this)."""
    return re.compile({"stamp": r"^\[(\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\] \[TRT-LLM\]",
                       "kv": r"\[MemUsageChange\] Allocated " + _NUM + r" GiB for max tokens in paged KV cache"}[name])


_GRAPHS_BEGIN = "Creating CUDA graph instances for"
_GRAPHS_STEP = "CUDA graph warmup for batch size="


def _stamp(line: str) -> datetime | None:
    m = _rx("stamp").search(line)
    return datetime.strptime(m.group(1), "%m/%d/%Y-%H:%M:%S") if m else None


def _feed(p: Any, line: str) -> None:
    """The KV cache's size; the CUDA graphs' time: from the stamp of "Creating CUDA graph
    instances" to the stamp of the last warmup line (TensorRT-LLM prints no elapsed time)."""
    if m := _rx("kv").search(line):
        p.kv_cache_gib = float(m.group(1))
    elif _GRAPHS_BEGIN in line:
        p.__dict__["_trtllm_graphs"] = _stamp(line)
    elif _GRAPHS_STEP in line:
        begin, now = p.__dict__.get("_trtllm_graphs"), _stamp(line)
        if begin is not None and now is not None:
            p.seconds["graphs"] = (now - begin).total_seconds()


BOOT = BootPhases(
    phases=(("weights", r"^Model init total -- " + _NUM + r"s"),),
    keywords=("Model init total", "MemUsageChange", "CUDA graph"),
    feed=_feed,
)

_JOB = '{job="inkctl-engines"}'
METRICS = Metrics(
    running=("trtllm_num_requests_running",), waiting=("trtllm_num_requests_waiting",),
    kv_usage=("trtllm_kv_cache_utilization",), generated=("trtllm_generation_tokens_total",),
    ttft=("trtllm_time_to_first_token_seconds",), e2e=("trtllm_e2e_request_latency_seconds",),
    panels=(
        ("Requests running", f"sum by (replica) (trtllm_num_requests_running{_JOB})", "short"),
        ("Requests waiting", f"sum by (replica) (trtllm_num_requests_waiting{_JOB})", "short"),
        ("KV cache usage", f"max by (replica) (trtllm_kv_cache_utilization{_JOB})", "percentunit"),
        ("Generation tokens/s", f"sum by (replica) (rate(trtllm_generation_tokens_total{_JOB}[1m]))", "short"),
        ("TTFT p50", f"histogram_quantile(0.5, sum by (le, replica) (rate(trtllm_time_to_first_token_seconds_bucket{_JOB}[1m])))", "s"),
        ("TTFT p99", f"histogram_quantile(0.99, sum by (le, replica) (rate(trtllm_time_to_first_token_seconds_bucket{_JOB}[1m])))", "s"),
        ("Requests finished/s", f"sum by (replica) (rate(trtllm_request_success_total{_JOB}[1m]))", "reqps"),
    ),
    path="/prometheus/metrics",
)

SPEC = EngineSpec(
    kind=KIND, name="TensorRT-LLM", config=TensorRTLLM, programs=(("trtllm-serve",),),
    command=launch, stages=stages, env=lambda r: [],
    compile_cache_env=(("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
                       ("FLASHINFER_WORKSPACE_BASE", "flashinfer")),
    flag_of=FLAG_OF, only_flags=ONLY, set_by_inkctl=SET_BY_INKCTL,
    world_gpus=world_gpus, parallel_findings=parallel_findings, expert_findings=expert_findings,
    engine_findings=engine_findings, speculative_findings=speculative_findings,
    ports=lambda r: [], serves_in_head=lambda r: False, variant=lambda r: None, boot=BOOT, metrics=METRICS,
    files=files, server_lines=("Uvicorn running on",), proof_program=proof_program("trtllm"),
)
