"""vLLM over Ray needs its order: the Ray head, wait for it, join the workers, wait for all
nodes, then ``vllm serve`` on the head (a second process in the head's container)."""

from __future__ import annotations

from inkctl.plan import engines

from inkctl import runtimes
from inkctl.plan.stages.launch import Launch
from inkctl.plan.step import Run, Stage, WaitFor
from inkctl.recipe.engine import VLLM

# Runs the engine as a second process in the Ray head container, its output on the container's log.
SERVE_IN_HEAD = 'exec "$@" >/proc/1/fd/1 2>/proc/1/fd/2'


def stages(b: Launch) -> list[Stage]:
    r, head, nodes, rt = b.recipe, b.head, b.nodes, b.runtime
    assert isinstance(r.engine, VLLM)
    status = runtimes.get(rt).exec(b.containers[0].name, "ray", "status")
    serve = engines.vllm_serve(r, head, nodes, ray=True)
    return [
        Stage("ray-head", "start the Ray head on rank 0", (b.run_step(head, engines.ray_start(r, head), "start Ray head"),)),
        Stage("ray-head-ready", "wait until the Ray head answers", (
            WaitFor(host=head.name, rank=0, purpose="wait for the Ray head", argv=status, timeout_s=180),)),
        Stage("ray-workers", "join every worker to the Ray head", tuple(
            b.run_step(c, engines.ray_start(r, c), f"join Ray at {c.head_address}:{r.engine.ray_port}")
            for c in b.workers)),
        Stage("ray-cluster-ready", f"wait until Ray sees all {nodes} nodes", (
            WaitFor(host=head.name, rank=0, purpose=f"wait for {nodes} Ray nodes", argv=status, timeout_s=300,
                    expect=" node_", expect_count=nodes),)),
        Stage("serve", "start vllm serve on the Ray head", (Run(
            host=head.name, rank=0, purpose="start vllm serve (Ray executor)",
            argv=runtimes.get(rt).exec(b.containers[0].name, "sh", "-c", SERVE_IN_HEAD, "inkctl-serve", *serve,
                               detach=True)),)),
    ]
