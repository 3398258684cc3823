"""Data and expert parallelism (data: the engines write the flags, ``inkctl/engines/``; the rules
are ``parallel_rules.py``): the typed form of vLLM's --data-parallel-* / --enable-expert-parallel
/ --all2all-backend / EPLB and SGLang's --dp-size / --enable-dp-attention / --ep-size /
--moe-a2a-backend / --deepep-mode, and the GPU arithmetic that ties them to the hardware.

How the engines lay ranks out (their docs' multi-node data-parallel and expert-parallel pages):
- vLLM: every data-parallel rank is a tensor x pipeline group inside one host, so
  tensor_parallel x pipeline_parallel x data_parallel = nodes x gpus_per_host, and each host runs
  data_parallel / nodes ranks (--data-parallel-size-local). Expert parallelism spreads the experts
  over all tensor x data ranks (its size is not a flag).
- SGLang without DP attention: data_parallel copies of a tensor x pipeline group (the same
  product). With --enable-dp-attention the data-parallel ranks live inside the tensor group:
  tensor_parallel x pipeline_parallel = nodes x gpus_per_host and data_parallel divides
  tensor_parallel. --ep-size divides tensor_parallel.
"""

from typing import Literal, Optional

from pydantic import Field

from inkctl.recipe.fields import Strict



class ExpertParallel(Strict):
    """Expert parallelism for MoE models: experts spread over ranks instead of sliced by tensor parallelism."""

    enabled: bool = Field(True, description="vLLM --enable-expert-parallel; SGLang --ep-size (size below, default tensor_parallel).")
    size: Optional[int] = Field(None, ge=1, le=4096, description="SGLang --ep-size: ranks the experts are spread over; must divide tensor_parallel. Default: tensor_parallel. vLLM derives it (tensor_parallel x data_parallel) and takes no size.")
    all2all_backend: Optional[str] = Field(None, description="Token dispatch between expert ranks: vLLM --all2all-backend (e.g. 'deepep_high_throughput', 'deepep_low_latency', 'pplx', 'allgather_reducescatter'); SGLang --moe-a2a-backend (e.g. 'deepep').")
    deepep_mode: Optional[Literal["auto", "normal", "low_latency"]] = Field(None, description="SGLang --deepep-mode (with all2all_backend: deepep).")
    eplb: bool = Field(False, description="Expert-parallel load balancing: vLLM --enable-eplb, SGLang --enable-eplb.")
    deepep_max_dispatch_tokens_per_rank: Optional[int] = Field(None, ge=1, description="SGLang's SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK (its docs: default 128), set in the container's environment.")

    @property
    def deepep(self) -> bool:
        return self.all2all_backend is not None and self.all2all_backend.startswith("deepep")


class DataParallel(Strict):
    """Data parallelism: several copies of the model (vLLM) or attention ranks (SGLang DP attention) behind one server."""

    size: int = Field(1, ge=1, le=4096, description="vLLM --data-parallel-size; SGLang --dp-size.")
    attention: bool = Field(False, description="SGLang --enable-dp-attention: data-parallel attention ranks inside the tensor-parallel group (DeepSeek, Qwen3 MoE). Not for vLLM.")
    rpc_port: int = Field(13345, ge=1, le=65535, description="vLLM --data-parallel-rpc-port on the head, for multi-node data parallelism.")
