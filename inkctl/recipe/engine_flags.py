"""Which engine a flag belongs to, and which typed field already passes it.

vLLM and SGLang both refuse an argument they do not know, at start, after the image is pulled
and the hosts are busy: a flag of the other engine in ``engine.args.extra`` is found here
instead. The lists hold the flags that differ between the two (the names in each engine's
``--help``: vLLM's engine arguments, SGLang's server arguments); a flag in neither passes.
"""

from __future__ import annotations

# flag -> the typed field that has the same meaning (None: no typed field)
SGLANG_ONLY = {
    "--mem-fraction-static": "memory_fraction", "--tp-size": "tensor_parallel", "--tp": "tensor_parallel",
    "--pp-size": "pipeline_parallel", "--context-length": "max_model_len",
    "--max-running-requests": "max_running_requests", "--disable-cuda-graph": "enforce_eager",
    "--model-path": None, "--dist-init-addr": None, "--chunked-prefill-size": None, "--cuda-graph-max-bs": None,
    "--disable-radix-cache": None, "--enable-torch-compile": None, "--dp-size": None, "--ep-size": None,
    "--schedule-policy": None, "--enable-dp-attention": None, "--mem-fraction": None,
}
VLLM_ONLY = {
    "--gpu-memory-utilization": "memory_fraction", "--tensor-parallel-size": "tensor_parallel",
    "--pipeline-parallel-size": "pipeline_parallel", "--max-model-len": "max_model_len",
    "--max-num-seqs": "max_running_requests", "--enforce-eager": "enforce_eager",
    "--enable-auto-tool-choice": "tool_call_parser", "--max-num-batched-tokens": None,
    "--enable-prefix-caching": None, "--distributed-executor-backend": None, "--compilation-config": None,
    "--enable-expert-parallel": None, "--data-parallel-size": None, "--swap-space": None,
    "--enable-chunked-prefill": None, "--headless": None, "--master-addr": None,
}
ONLY = {"vllm": VLLM_ONLY, "sglang": SGLANG_ONLY}
FLAG_OF = {  # typed field -> the flags it passes, per engine (plan/engines.py)
    "vllm": {"memory_fraction": ["--gpu-memory-utilization"], "max_model_len": ["--max-model-len"],
             "max_running_requests": ["--max-num-seqs"], "kv_cache_dtype": ["--kv-cache-dtype"],
             "attention_backend": ["--attention-backend"], "reasoning_parser": ["--reasoning-parser"],
             "tool_call_parser": ["--tool-call-parser", "--enable-auto-tool-choice"],
             "enforce_eager": ["--enforce-eager"]},
    "sglang": {"memory_fraction": ["--mem-fraction-static"], "max_model_len": ["--context-length"],
               "max_running_requests": ["--max-running-requests"], "kv_cache_dtype": ["--kv-cache-dtype"],
               "attention_backend": ["--attention-backend"], "reasoning_parser": ["--reasoning-parser"],
               "tool_call_parser": ["--tool-call-parser"], "enforce_eager": ["--disable-cuda-graph"]},
}
NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


def other_engines_flag(kind: str, flag: str) -> tuple[str, str | None] | None:
    """(the other engine, the typed field meaning the same) when FLAG is only the other engine's."""
    other = "sglang" if kind == "vllm" else "vllm"
    if flag in ONLY[other] and flag not in ONLY[kind]:
        return other, ONLY[other][flag]
    return None


def typed_flags(kind: str, args) -> dict[str, str]:
    """flag -> the typed field (set in ARGS) that already passes it."""
    out = {}
    for field, flags in FLAG_OF[kind].items():
        value = getattr(args, field)
        if value is not None and value is not False:
            out.update({f: field for f in flags})
    return out
