"""A fleet: N replicas of the recipe's engine group behind one request router.

Kept apart from the rest of the recipe model: a replica is a whole engine group as the recipe
describes it (``hardware.nodes`` hosts x ``gpus_per_host``); the fleet only says how many and
what stands in front of them.
"""

from typing import Literal, Optional

from pydantic import Field, model_validator

from inkctl.recipe.disagg import Disagg
from inkctl.recipe.fields import Strict, default_of, empty_list
from inkctl.recipe.rollout import Rollout

# the routing policies each router offers (sglang-router 0.3 / vllm-router 0.1 --policy choices)
POLICIES: dict[str, tuple[str, ...]] = {
    "sglang": ("cache_aware", "round_robin", "random", "power_of_two", "manual"),
    "vllm": ("cache_aware", "round_robin", "random", "power_of_two", "consistent_hash", "kv_aware", "sticky_least_loaded"),
}
# the image each router ships in, and how it starts; the PyPI wheels are Rust inside Python
ROUTER_IMAGES = {"sglang": "lmsysorg/sglang:latest", "vllm": "vllm/vllm-router:latest"}
# each router's P/D mode (fleet.disagg): its flag, whether --prefill takes the prefill's bootstrap port
# after its URL, and the pod annotation its Kubernetes discovery reads that port from
PD_MODE = {"sglang": ("--pd-disaggregation", True, "sglang.ai/bootstrap-port"),
           "vllm": ("--vllm-pd-disaggregation", False, "vllm.ai/bootstrap-port")}


class Router(Strict):
    """The request router in front of the replicas, started by `up` as a container."""

    kind: Literal["sglang", "vllm"] = Field("sglang", description="Which router: 'sglang' (sglang-router, the SGLang Model Gateway: python3 -m sglang_router.launch_router) or 'vllm' (vllm-router). Both route any OpenAI-compatible engine.")
    policy: Optional[str] = Field(None, description="Routing policy (--policy). Default: cache_aware, which sends requests that share a prefix to the same replica. sglang: cache_aware, round_robin, random, power_of_two, manual; vllm: cache_aware, round_robin, random, power_of_two, consistent_hash, kv_aware, sticky_least_loaded.")
    port: int = Field(30080, ge=1, le=65535, description="Port the router's OpenAI-compatible API listens on (host network).")
    prometheus_port: int = Field(29000, ge=1, le=65535, description="Port of the router's Prometheus exporter (/metrics).")
    host: Optional[str] = Field(None, description="Inventory host (by name) that runs the router. Default: the first host.")
    image: Optional[str] = Field(None, description="Router image (pin it by digest for production). Default: lmsysorg/sglang:latest, which ships sglang_router, for sglang; vllm/vllm-router:latest for vllm (any image with the vllm-router wheel installed will do).")
    health_check_interval_s: int = Field(5, ge=1, le=3600, description="Seconds between the router's own health checks of each replica (--health-check-interval-secs; the routers' default of 60 s keeps a restarted replica out that long).")
    breaker_failures: int = Field(2, ge=1, le=1000, description="Failed attempts in a row that take a replica out of rotation (--cb-failure-threshold; the routers' default of 10 fails the first requests after a replica dies, as the router retries that same replica). It comes back after health_check_interval_s.")
    args: list[str] = Field(default_factory=empty_list, description="Further router flags, passed as written, e.g. ['--cache-threshold', '0.3'].")

    @model_validator(mode="after")
    def _known_policy(self) -> "Router":
        if self.policy is not None and self.policy not in POLICIES[self.kind]:
            raise ValueError(f"policy {self.policy!r} is not one the {self.kind} router has: "
                             + ", ".join(POLICIES[self.kind]))
        return self

    @property
    def policy_name(self) -> str:
        return self.policy or "cache_aware"

    @property
    def queued_workers(self) -> bool:
        """Does this router change its worker list through ``/workers``, queued (sglang-router
        0.3: DELETE/POST, 202), rather than ``/remove_worker`` and ``/add_worker`` (vllm-router 0.1)?"""
        return self.kind == "sglang"

    @property
    def pd_workers_at_runtime(self) -> bool:
        """In its P/D mode, can this router take a prefill or decode worker out and put it back
        while it runs (a rolling update of a P/D fleet needs both)? sglang-router 0.3: ``DELETE
        /workers/<id>``, then ``POST /workers {"url", "worker_type", "bootstrap_port"}`` (queued,
        202). vllm-router 0.1: ``POST /remove_worker`` takes one out, but ``POST /add_worker`` and
        ``POST /workers`` answer 400 ("PD router requires specific add_prefill_server or
        add_decode_server methods", which it has no route for): once out, a worker stays out until
        the router restarts. Both seen on the test cluster's router images."""
        return self.kind == "sglang"

    @property
    def image_ref(self) -> str:
        return self.image or ROUTER_IMAGES[self.kind]


class Fleet(Strict):
    """Replicas of the engine group behind one router: hosts are taken in order, hardware.nodes per replica; a host with more GPUs than one replica needs is shared (disjoint GPU subsets, ports shifted)."""

    replicas: int = Field(1, ge=1, le=1024, description="Number of replicas: each a whole engine group (hardware.nodes hosts x gpus_per_host GPUs).")
    port_stride: int = Field(10, ge=1, le=1000, description="Replicas sharing a host get the engine's ports shifted by this much each (port, master/dist-init port).")
    router: Router = Field(default_factory=default_of(Router), description="The request router in front of the replicas.")
    rollout: Rollout = Field(default_factory=default_of(Rollout), description="How up of a changed recipe replaces the running replicas (rolling, one at a time, by default).")
    disagg: Optional[Disagg] = Field(None, description="Prefill/decode disaggregation: a prefill role and a decode role, each its own replicas of the engine group, the KV transfer between them, and fleet.router in its P/D mode (replaces fleet.replicas).")
