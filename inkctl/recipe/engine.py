"""The engine section: what every engine shares (``EngineBase``, ``EngineArgs``, ``Image``) and
``Engine``, the field that holds one of the registered engines' sections, chosen by ``kind``.

Each engine's own section (``VLLM``, ``SGLang``...) is defined in its module
(``inkctl/engines/<kind>.py``) and known through the registry (``engine_registry.py``):
``Engine`` validates like a discriminated union on ``kind`` (the same errors, located the same
way, the same JSON Schema) but imports only the engine module the recipe names.

Arguments inkctl must reason about (parallelism, port, memory) are typed; the rest travel
verbatim in ``extra``.
"""


from typing import TYPE_CHECKING, Annotated, Any, Optional, Union

from pydantic import Field, GetCoreSchemaHandler, GetJsonSchemaHandler, TypeAdapter, field_validator
from pydantic_core import PydanticKnownError, SchemaValidator, core_schema

from inkctl.recipe import engine_registry
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
    head_extra: list[str] = Field(default_factory=empty_list, description="Further engine arguments for the head (rank 0) only, after extra: flags a headless or worker rank refuses, such as vLLM's --api-server-count.")
    worker_extra: list[str] = Field(default_factory=empty_list, description="Further engine arguments for every rank but the head, after extra.")
    unresolved: list[UnresolvedFlag] = Field(default_factory=empty_list, description="Flags a source mentions without a value: reported by validate, never passed.")

    @field_validator("extra", "head_extra", "worker_extra", mode="before")
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


class EngineBase(Strict):
    """What every engine's section has; an engine's own model adds ``kind: Literal[KIND]`` and its fields."""

    if TYPE_CHECKING:
        kind: str

    version: str = Field(description="Engine version as the recipe's provenance states it, e.g. 'v0.28.0'.")
    image: Image = Field(description="The image the engine runs from (after any build, see patches).")
    args: EngineArgs = Field(default_factory=default_of(EngineArgs), description="Engine arguments.")
    health_path: str = Field("/health", description="HTTP path that answers 200 once the engine serves.")


class EngineUnion:
    """The ``engine`` field's type: a union of the registered engines' sections, tagged by ``kind``,
    resolved when a value arrives (not when the Recipe class is made): the value's kind picks
    one module to import. Errors carry the tag in their loc as pydantic's tagged union does
    (``engine.vllm.args...``); an unknown or missing kind is pydantic's own union_tag_* error."""

    _validators: dict[tuple[str, type], SchemaValidator] = {}

    def union(self) -> Any:
        """The union of every registered engine's section (imports every engine module)."""
        members = tuple(s.config for s in engine_registry.specs())
        return Annotated[Union[members], Field(discriminator="kind")]

    def _validator(self, kind: str) -> SchemaValidator:
        config: Any = engine_registry.spec_of(kind).config
        v = self._validators.get((kind, config))
        if v is None:
            config.model_rebuild()  # the models are built on first use (fields.Strict: defer_build)
            schema = core_schema.tagged_union_schema({kind: config.__pydantic_core_schema__}, discriminator="kind")
            v = self._validators[(kind, config)] = SchemaValidator(schema)
        return v

    def validate(self, value: Any, info: core_schema.ValidationInfo) -> Any:
        if isinstance(value, EngineBase):
            return value
        kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
        if kind is None:
            if not isinstance(value, dict):
                raise PydanticKnownError("model_attributes_type")
            raise PydanticKnownError("union_tag_not_found", {"discriminator": "'kind'"})
        if not engine_registry.known(kind):
            expected = ", ".join(f"'{k}'" for k in engine_registry.kinds())
            raise PydanticKnownError("union_tag_invalid", {"discriminator": "'kind'", "tag": str(kind),
                                                           "expected_tags": expected})
        return self._validator(kind).validate_python(value, context=info.context)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.with_info_plain_validator_function(
            self.validate, serialization=core_schema.simple_ser_schema("any"))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> Any:
        return handler(TypeAdapter(self.union()).core_schema)


Engine = Annotated[EngineBase, EngineUnion()]
