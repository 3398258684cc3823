"""The recipe: one YAML document that says everything about a deployment but where it runs.

Every field carries a description: the JSON Schema (``inkctl schema``) and the recipe
reference (docs/recipe-reference.md) are generated from these classes.
"""


import re
from datetime import date
from typing import Annotated, Literal, Optional, Union

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from inkctl.recipe.container import ContainerSpec, NetworkSpec, SecretSource
from inkctl.recipe.engine import Engine
from inkctl.recipe.fields import EnvName, HostPath, Name, Strict, default_of, empty_list
from inkctl.recipe.fleet import Fleet
from inkctl.recipe.hosts import Host
from inkctl.recipe.patch import Patches
from inkctl.recipe.speculative import Speculative

class ModelWeights(Strict):
    """Which files of the model the engine reads, and where each host keeps them (``inkctl weights``)."""

    manage: bool = Field(True, description="Pin the model's revision and files in the lock file (`inkctl lock`), put them on every host (`inkctl weights`) and check them before `up`. Applies when the Hub cache is on a host path (a mount, or 'cache').")
    cache: Optional[HostPath] = Field(None, description="Host path of the Hugging Face Hub cache (the directory that holds models--org--name); may use ${VARS}. Default: the host side of the mount that holds the container's Hub cache (HF_HUB_CACHE, else HF_HOME/hub, else /root/.cache/huggingface/hub).")
    include: list[str] = Field(default_factory=empty_list, description="Glob patterns of further repository files to fetch, e.g. 'original/params.json'. By default: top-level config, tokenizer and generation files, and the safetensors shards the index names.")
    exclude: list[str] = Field(default_factory=empty_list, description="Glob patterns of files to leave out, e.g. '*.md'.")


class ModelSpec(Strict):
    """The model served."""

    repo: str = Field(min_length=1, description="Hugging Face repository id, e.g. 'thinkingmachines/Inkling-Small-NVFP4', or the absolute path of a local model directory (not on the Hub), which the engine loads as is and `inkctl lock` pins by hashing its files on the machine running inkctl.")
    served_name: Optional[str] = Field(None, description="Name clients use in requests (--served-model-name). Default: the repo id.")
    served_aliases: list[str] = Field(default_factory=empty_list, description="Further names the model answers to, after served_name (vLLM's --served-model-name takes several). vLLM only.")
    revision: Optional[str] = Field(None, description="Repository revision (commit) to load.")
    quantization: Optional[str] = Field(None, description="Weight format as released, e.g. 'nvfp4'.")
    weights_gb: Optional[float] = Field(None, gt=0, description="Size of the weights on disk in GB (for memory checks).")
    total_params_b: Optional[float] = Field(None, gt=0, description="Total parameters, billions.")
    active_params_b: Optional[float] = Field(None, gt=0, description="Active parameters per token, billions (MoE).")
    context_length: Optional[int] = Field(None, ge=1, description="Longest context the model supports.")
    trust_remote_code: bool = Field(False, description="Pass --trust-remote-code to the engine.")
    weights: ModelWeights = Field(default_factory=default_of(ModelWeights), description="The model's files on the hosts: which are needed, where they live.")

    @property
    def name(self) -> str:
        return self.served_name or self.repo

    @property
    def local(self) -> bool:
        """The model is a directory (an absolute path), not a Hub repository."""
        return self.repo.startswith("/")


class Hardware(Strict):
    """What each host must have. Preflight checks it against nvidia-smi (NVIDIA) or amd-smi/rocm-smi (AMD)."""

    accelerator: str = Field(min_length=1, description="Accelerator model, case-insensitive: a known name (the table in the recipe reference, e.g. 'h100', 'a100', 'mi300x', 'dgx-spark-gb10') brings its vendor, architecture and memory; any other name is declared by vendor and compute_capability or gfx_target.")
    vendor: Optional[Literal["nvidia", "amd"]] = Field(None, description="GPU vendor. Default: the known accelerator's, else 'nvidia'.")
    compute_capability: Optional[str] = Field(None, pattern=r"^[0-9]+\.[0-9]+$", description="CUDA compute capability (NVIDIA), e.g. '12.1' (GB10), '9.0' (H200), '12.0' (RTX PRO 6000). Default: the known accelerator's.")
    gfx_target: Optional[str] = Field(None, pattern=r"^gfx[0-9a-f]{3,4}$", description="AMD GPU architecture (LLVM gfx target), e.g. 'gfx942' (MI300X, MI325X), 'gfx950' (MI355X). Default: the known accelerator's.")
    nodes: int = Field(1, ge=1, le=1024, description="Number of hosts.")
    gpus_per_host: int = Field(ge=1, le=64, description="GPUs each host contributes.")
    unified_memory: bool = Field(False, description="CPU and GPU share one memory pool (GB10): nvidia-smi reports memory as [N/A]; MemAvailable is what matters. Default: the known accelerator's, else false.")
    memory_gib: Optional[float] = Field(None, gt=0, description="Memory per GPU, or the unified pool per host, in GiB.")
    interconnect: Optional[str] = Field(None, description="How GPUs and hosts are connected, in words (e.g. 'RoCE 200G', 'PCIe 5.0 x8+x4, no NVLink').")

    @field_validator("accelerator")
    @classmethod
    def _canonical(cls, v: str) -> str:
        from inkctl.recipe.accelerators import normalize

        return normalize(v)

    @model_validator(mode="after")
    def _from_table(self) -> "Hardware":
        from inkctl.recipe.accelerators import lookup

        known = lookup(self.accelerator)
        if self.vendor is None:
            self.vendor = known.vendor if known else ("amd" if self.gfx_target else "nvidia")
        if known is not None and known.vendor == self.vendor:
            if self.vendor == "nvidia" and self.compute_capability is None:
                self.compute_capability = known.arch
            if self.vendor == "amd" and self.gfx_target is None:
                self.gfx_target = known.arch
            if "unified_memory" not in self.model_fields_set:
                self.unified_memory = known.unified
        return self

    @property
    def arch(self) -> Optional[str]:
        """The architecture preflight compares: compute capability (NVIDIA) or gfx target (AMD)."""
        return self.gfx_target if self.vendor == "amd" else self.compute_capability

    @property
    def arch_field(self) -> str:
        return "gfx_target" if self.vendor == "amd" else "compute_capability"


class Health(Strict):
    """How inkctl knows the server is up."""

    timeout_s: float = Field(1200, gt=0, description="How long a boot may take before up gives up (the report Inkling on 8x H200: ~10 min startup).")
    interval_s: float = Field(2.0, gt=0, le=60, description="Seconds between health polls.")
    path: Optional[str] = Field(None, pattern=r"^/", description="Override the engine's health path.")


class Watchdog(Strict):
    """Kill a boot that is about to take the host down ("Inkling on Two DGX Sparks", Wall 2)."""

    enabled: Optional[bool] = Field(None, description="Default: on for unified-memory hardware, off otherwise.")
    mem_available_min_gib: float = Field(8.0, gt=0, description="Threshold for MemAvailable (GiB).")
    consecutive: int = Field(2, ge=1, description="Readings below the threshold in a row that kill the containers.")
    interval_s: float = Field(2.0, gt=0, description="Seconds between readings.")
    after_boot: bool = Field(False, description="Keep watching after the server is healthy, while up runs.")
    drop_page_cache: bool = Field(True, description="On unified-memory hardware, free the page cache on every host before the engines start (sync; vm.drop_caches=1), so model loading gets that memory. Needs root on the host: without it, a warning. Set false to keep the cache.")


class SmokePrompt(Strict):
    """A smoke prompt with the answer it must get. Give at most one of contains, regex, one_of."""

    prompt: str = Field(min_length=1, description="The user message sent as a chat completion.")
    contains: Optional[str] = Field(None, min_length=1, description="The answer must contain this text (case-sensitive), e.g. '391' for 'What is 17 x 23?'.")
    regex: Optional[str] = Field(None, min_length=1, description="The answer must match this Python regular expression (re.search), e.g. '\\b391\\b'.")
    one_of: Optional[list[str]] = Field(None, min_length=1, description="The answer, stripped of whitespace and a final '.', must equal one of these (case-insensitive), e.g. ['yes', 'no'].")
    max_tokens: Optional[int] = Field(None, ge=1, le=32768, description="max_tokens for this prompt. Default: smoke.max_tokens.")

    @model_validator(mode="after")
    def _one_expectation(self) -> "SmokePrompt":
        given = [k for k in ("contains", "regex", "one_of") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"give one expectation per prompt, not {' and '.join(given)}")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as e:
                raise ValueError(f"regex {self.regex!r} does not compile: {e}")
        return self


def _prompt_kind(v) -> str:
    return "text" if isinstance(v, str) else "expect"


# a plain string, or an object with an expectation; tagged so that an error names one of them
PromptItem = Annotated[Union[Annotated[str, Tag("text")], Annotated[SmokePrompt, Tag("expect")]], Discriminator(_prompt_kind)]


class Smoke(Strict):
    """Prove the server answers right once it is healthy: prompts with expected answers, and a check per declared capability."""

    enabled: bool = Field(True, description="Run the smoke prompts after health.")
    # model_construct: the default needs no validator at import (benchmarks/startup.py: validate's start-up)
    prompts: list[PromptItem] = Field(
        default=[SmokePrompt.model_construct(prompt="What is 17 x 23? Answer with the number.", contains="391")],
        description="Chat prompts: a plain string must get a non-empty answer; an object says what the answer must be.")
    max_tokens: int = Field(32, ge=1, le=8192, description="max_tokens per smoke request.")
    timeout_s: float = Field(300, gt=0, description="Time allowed per prompt.")
    capabilities: bool = Field(True, description="Also check what capabilities declares: with reasoning, the reasoning must come back in its own field (reasoning_content or reasoning); with tools, a tool call whose arguments parse as JSON and carry the schema's required fields.")
    reasoning_prompt: str = Field("Is 221 a prime number? Think step by step, then answer yes or no.", min_length=1, description="The prompt of the reasoning check.")
    reasoning_max_tokens: int = Field(512, ge=1, le=32768, description="max_tokens of the reasoning check (reasoning uses tokens before the answer).")
    tool_prompt: str = Field("What is the weather in Paris right now? Use the tool.", min_length=1, description="The prompt of the tool-call check; it is sent with one tool, get_weather(city, unit), city required.")


class Capabilities(Strict):
    """What the deployment serves, as verified where the recipe came from (provenance)."""

    chat: bool = Field(True, description="Chat completions.")
    reasoning: bool = Field(False, description="Reasoning output (a reasoning parser).")
    tools: bool = Field(False, description="Tool calls (a tool-call parser).")
    vision: bool = Field(False, description="Image input.")


class Provenance(Strict):
    """Where this recipe comes from and how far it is trusted."""

    source: str = Field(description="Who or what reported it (a blog post, a guide, a model card).")
    status: Literal["draft", "candidate", "verified", "retired"] = Field("draft", description="draft: untested; candidate: evidence, not a contract; verified: reproduced; retired.")
    captured: Optional[date] = Field(None, strict=False, description="When that report was read (YYYY-MM-DD).")
    urls: list[str] = Field(default_factory=empty_list, description="Links to that report.")
    notes: list[str] = Field(default_factory=empty_list, description="Facts from that report worth keeping next to the recipe.")


class Measurement(Strict):
    """A measured result, as reported."""

    metric: str = Field(description="What was measured, e.g. 'decode_tok_s', 'kv_cache_tokens', 'startup_s'.")
    value: float = Field(description="The number.")
    unit: Optional[str] = Field(None, description="Unit, e.g. 'tok/s', 'GiB', 's'.")
    concurrency: Optional[int] = Field(None, ge=1, description="Concurrent requests during the measurement.")
    context_tokens: Optional[int] = Field(None, ge=0, description="Prompt context length.")
    note: Optional[str] = Field(None, description="Conditions.")


class CompileCache(Strict):
    """The engines' compile and kernel caches (torch.compile, Inductor, Triton, FlashInfer and
    DeepGEMM JIT) kept on each host between boots, one directory per engine build, GPU
    architecture, model and parallel layout (`inkctl cache`)."""

    enabled: bool = Field(False, description="Mount a per-host cache directory into every rank and point the engines' cache variables (VLLM_CACHE_ROOT, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, FLASHINFER_WORKSPACE_BASE, DG_JIT_CACHE_DIR, SGLANG_DG_CACHE_DIR) into it: the second boot of the same recipe starts warm.")
    path: HostPath = Field("/var/lib/inkctl/compile-cache", description="Host directory that holds the caches (one subdirectory per key); may use ${VARS}.")


class Recipe(Strict):
    """A deployment of one model on one kind of hardware with one engine."""

    name: Name = Field(description="Deployment name: container names, labels and host state derive from it.")
    description: Optional[str] = Field(None, description="One paragraph for people.")
    model: ModelSpec = Field(description="The model.")
    hardware: Hardware = Field(description="The hardware every host must have.")
    engine: Engine = Field(description="The inference engine: kind 'vllm' or 'sglang'.")
    speculative: Optional[Speculative] = Field(None, description="Speculative decoding; a draft model is pinned, distributed and checked like the served one.")
    container: ContainerSpec = Field(default_factory=default_of(ContainerSpec), description="How the engine's container runs.")
    network: NetworkSpec = Field(default_factory=default_of(NetworkSpec), description="NCCL/Gloo transport between hosts.")
    patches: Patches = Field(default_factory=default_of(Patches), description="How the engine is patched.")
    secrets: dict[EnvName, SecretSource] = Field(default_factory=dict, description="Secrets by name and where their values come from; they reach hosts only in a 0600 env file.")
    api_key: Optional[EnvName] = Field(None, description="The secret (a name under secrets) that guards the endpoint: the engine requires it as a Bearer token (vLLM reads VLLM_API_KEY, SGLang a config file written in its container), the readiness completion, smoke, bench, watch and top send it, and after up a request without it must get 401. Never on a command line. `inkctl init --api-key` makes one.")
    health: Health = Field(default_factory=default_of(Health), description="Readiness.")
    watchdog: Watchdog = Field(default_factory=default_of(Watchdog), description="Boot memory watchdog.")
    compile_cache: CompileCache = Field(default_factory=default_of(CompileCache), description="Compile and kernel caches kept on the hosts between boots.")
    smoke: Smoke = Field(default_factory=default_of(Smoke), description="Smoke prompts after health.")
    capabilities: Capabilities = Field(default_factory=default_of(Capabilities), description="What it serves.")
    provenance: Optional[Provenance] = Field(None, description="Source and trust status.")
    results: list[Measurement] = Field(default_factory=empty_list, description="Results measured where the recipe came from (provenance); `inkctl results RUN --recipe` compares a run with them.")
    fleet: Optional[Fleet] = Field(None, description="Several replicas of this engine group behind one request router (`up` starts the router too).")
    hosts: Optional[list[Host]] = Field(None, description="Hosts embedded for convenience; --hosts FILE wins.")

    # --- derived -------------------------------------------------------------------------
    @property
    def world_gpus(self) -> int:
        from inkctl.recipe.engine_registry import spec_of

        return spec_of(self.engine.kind).world_gpus(self)

    @property
    def model_shards(self) -> int:
        """Ranks one copy of the weights is split over (tensor x pipeline)."""
        return self.engine.args.tensor_parallel * self.engine.args.pipeline_parallel

    @property
    def multinode(self) -> bool:
        return self.hardware.nodes > 1

    @property
    def watchdog_on(self) -> bool:
        if self.watchdog.enabled is None:
            return self.hardware.unified_memory
        return self.watchdog.enabled

    @property
    def health_path(self) -> str:
        return self.health.path or self.engine.health_path

