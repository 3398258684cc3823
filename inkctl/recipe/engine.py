"""The engine section: vLLM or SGLang, one discriminated union.

Arguments inkctl must reason about (parallelism, port, memory) are typed; the rest travel
verbatim in ``extra``.
"""


from typing import Annotated, Literal, Optional, Union

from pydantic import Field, field_validator

from inkctl.recipe.fields import ImageDigest, Strict, default_of, empty_list
from inkctl.recipe.parallel import DataParallel, ExpertParallel


class UnresolvedFlag(Strict):
    """A flag the recipe's provenance says was used, without its value. Never passed; always warned."""

    flag: str = Field(description="The engine flag, e.g. '--kernel-config'.")
    why: str = Field(description="What the provenance says and what is missing.")


class EngineArgs(Strict):
    """Engine arguments common to vLLM and SGLang. ``None`` means: leave the engine's default."""

    tensor_parallel: int = Field(1, ge=1, le=1024, description="Tensor-parallel size (vLLM --tensor-parallel-size, SGLang --tp-size).")
    pipeline_parallel: int = Field(1, ge=1, le=1024, description="Pipeline-parallel size (vLLM --pipeline-parallel-size, SGLang --pp-size).")
    data_parallel: DataParallel = Field(default_factory=default_of(DataParallel), description="Data parallelism (vLLM --data-parallel-*, SGLang --dp-size/--enable-dp-attention); multi-node vLLM gets its per-host flags planned.")
    expert: Optional[ExpertParallel] = Field(None, description="Expert parallelism for MoE models (vLLM --enable-expert-parallel/--all2all-backend/--enable-eplb, SGLang --ep-size/--moe-a2a-backend/--deepep-mode).")
    port: int = Field(8000, ge=1, le=65535, description="Port the engine's HTTP server listens on inside the container.")
    bind_host: str = Field("0.0.0.0", description="Address the engine binds (--host).")
    max_model_len: Optional[int] = Field(None, ge=1, description="Longest context served (vLLM --max-model-len, SGLang --context-length).")
    memory_fraction: Optional[float] = Field(None, gt=0, le=1, description="Share of GPU memory the engine may take (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static).")
    kv_cache_dtype: Optional[str] = Field(None, description="KV cache dtype, e.g. 'fp8_e5m2' (--kv-cache-dtype).")
    attention_backend: Optional[str] = Field(None, description="Attention backend, e.g. 'triton' (--attention-backend).")
    reasoning_parser: Optional[str] = Field(None, description="Reasoning parser name (--reasoning-parser).")
    tool_call_parser: Optional[str] = Field(None, description="Tool-call parser name (--tool-call-parser).")
    max_running_requests: Optional[int] = Field(None, ge=1, description="Concurrent requests (vLLM --max-num-seqs, SGLang --max-running-requests).")
    enforce_eager: bool = Field(False, description="Disable CUDA graphs (vLLM --enforce-eager). The bundled recipes keep graphs on: decode throughput lives there.")
    extra: list[str] = Field(default_factory=empty_list, description="Further engine arguments, passed verbatim and in order after the typed ones, e.g. [--max-num-batched-tokens, 8192]: a number may be written bare (8192 passes as '8192'; true/false must be quoted).")
    unresolved: list[UnresolvedFlag] = Field(default_factory=empty_list, description="Flags a source mentions without a value: reported by validate, never passed.")

    @field_validator("extra", mode="before")
    @classmethod
    def _bare_numbers(cls, v: object) -> object:
        """[--max-num-batched-tokens, 8192]: YAML reads 8192 as a number; an argv has only text.
        Whole numbers and plain decimals read back as written; booleans stay an error (yes/on/True)."""
        if isinstance(v, list):
            return [_as_written(x) for x in v]
        return v


def _as_written(x: object) -> object:
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float) and x == x and abs(x) not in (float("inf"),) and "e" not in repr(x):
        return repr(x)
    return x


class Image(Strict):
    """The container image, by tag and/or digest."""

    ref: str = Field(description="Image reference (repository:tag), e.g. 'vllm/vllm-openai:v0.28.0'.", min_length=1)
    digest: Optional[ImageDigest] = Field(None, description="Pinned content digest 'sha256:<64 hex>'. Unpinned images are warned about; --strict rejects them.")
    pull: bool = Field(False, description="May inkctl pull the image on a host that lacks it (otherwise preflight fails).")


class _EngineBase(Strict):
    version: str = Field(description="Engine version as the recipe's provenance states it, e.g. 'v0.28.0'.")
    image: Image = Field(description="The image the engine runs from (after any build, see patches).")
    args: EngineArgs = Field(default_factory=default_of(EngineArgs), description="Engine arguments.")
    health_path: str = Field("/health", description="HTTP path that answers 200 once the engine serves.")


class VLLM(_EngineBase):
    """vLLM (``vllm serve``)."""

    kind: Literal["vllm"] = Field(description="Engine kind.")
    multinode: Literal["native", "ray"] = Field(
        "native",
        description="How ranks form one server across hosts: vLLM native (--nnodes/--node-rank/--master-addr/--master-port, --headless on workers) or Ray (head and workers, then vllm serve --distributed-executor-backend ray on the head).",
    )
    master_port: int = Field(29501, ge=1, le=65535, description="Rendezvous port on the head for native multi-node.")
    ray_port: int = Field(6379, ge=1, le=65535, description="Ray GCS port on the head (multinode: ray).")


class SGLang(_EngineBase):
    """SGLang (``python3 -m sglang.launch_server``)."""

    kind: Literal["sglang"] = Field(description="Engine kind.")
    dist_init_port: int = Field(20000, ge=1, le=65535, description="Port on the head for --dist-init-addr in multi-node runs.")
    launcher: list[str] = Field(
        default=["python3", "-m", "sglang.launch_server"],
        description="Command that starts the server, before its arguments.",
    )


Engine = Annotated[Union[VLLM, SGLang], Field(discriminator="kind")]
