"""A fake ``vllm serve MODEL [flags]``.

Single node: load, then open HTTP (connection refused until then, as the brief for inkctl wants).
Native multi-node (``--nnodes N --node-rank R --master-addr A --master-port P``): rank 0 listens
on P and waits for the N-1 others before loading; ranks > 0 (``--headless``) join it and serve no
HTTP. Native multi-node data parallel (``--data-parallel-size N --data-parallel-size-local L
--data-parallel-address A --data-parallel-rpc-port P``, ``--data-parallel-start-rank S --headless``
on the other hosts): the same rendezvous on P, one peer per host. Ray (``--distributed-executor-backend ray``): waits for the local Ray head (and, with
FAKE_GPUS_PER_NODE, for tp*pp GPUs), and dies like vLLM when a Ray node is lost after start.
"""

import math
import os
import sys
import threading
import time

from . import ray
from . import nccl
from . import phases
from .engine import (Args, Log, block_forever, dump_argv, fatal, handle_signals, join_rendezvous, knob,
                     listen, load_weights, serve_rendezvous, start_crash_timer)
from . import disagg
from .openai_server import Server

VERSION = "0.11.0"
ALIASES = {"tp": "tensor-parallel-size", "pp": "pipeline-parallel-size", "dp": "data-parallel-size",
           "model": "model", "q": "quantization"}


def main(argv):
    if argv and argv[0] in ("--version", "-v"):
        print(VERSION)
        return
    if not argv or argv[0] != "serve":
        print("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\n"
              f"vllm: error: argument subparser: invalid choice: {argv[0] if argv else ''!r}", file=sys.stderr)
        sys.exit(2)
    from .cli import vllm_serve

    vllm_serve(argv)  # the real parser's refusals and checks first, as vLLM makes them
    args = Args(argv[1:], aliases=ALIASES, multi={"served-model-name"})
    model = args.positionals[0] if args.positionals else args.get("model")
    if not model or model is True:
        print("usage: vllm serve [model_tag] [options]\nvllm serve: error: the following arguments are required: model_tag",
              file=sys.stderr)
        sys.exit(2)
    info = dump_argv("vllm")
    log = Log("vllm", prefix=f"(APIServer pid={os.getpid()}) ")
    handle_signals(log)
    start_crash_timer(log)

    host = args.get("host") or "0.0.0.0"
    port = args.int("port", 8000)
    names = args.get("served-model-name") or [model]
    names = [names] if isinstance(names, str) else names
    tp, pp = args.int("tensor-parallel-size", 1), args.int("pipeline-parallel-size", 1)
    nnodes, rank = args.int("nnodes", 1), args.int("node-rank", 0)
    headless = args.flag("headless") or rank > 0
    backend = args.get("distributed-executor-backend") or "mp"

    log(f"vLLM API server version {VERSION}", src="api_server.py:1839")
    shown = {k: v for k, v in args.opts.items() if k not in ("api-key",)}
    log(f"non-default args: {{'model_tag': {model!r}, " + ", ".join(f"{k!r}: {v!r}" for k, v in shown.items()) + "}",
        src="utils.py:233")
    if os.environ.get("FAKE_LOG_ENV") == "1":  # engines that dump their environment (tokens and all)
        for k, v in sorted(os.environ.items()):
            log(f"environment: {k}={v}", src="envs.py:1")
    if not headless:
        _check_port_free(host, port, log)

    if backend == "ray":
        nodes_at_start = wait_for_ray(tp * pp, log)
    elif dp_nodes(args) > 1:
        data_parallel_rendezvous(args, headless, log)
    elif nnodes > 1:
        master, mport = args.get("master-addr") or "127.0.0.1", args.int("master-port", 29501)
        if rank == 0:
            serve_rendezvous(mport, nnodes, log)
        else:
            join_rendezvous(master, mport, rank, nnodes, log)
    log(f"world_size={tp * pp} rank={rank} local_rank=0 distributed_init_method=env:// backend=nccl",
        src="parallel_state.py:1165")
    nccl.say(rank, max(nnodes, tp * pp), lambda msg, exc: fatal(log, msg, exc=exc))
    load_weights(log, model,
                 lambda k, n: f"Loading safetensors checkpoint shards: {100 * k // n:3d}% Completed | {k}/{n}",
                 lambda t: f"Loading weights took {t:.2f} seconds")
    compile_and_capture(log, model, tp, pp, rank)
    if headless:
        log(f"Headless node rank {rank} is running; it serves no HTTP API.", src="api_server.py:154")
        block_forever()

    server = Server("vllm", model, names, host, port, log, info,
                    api_key=args.get("api-key") or os.environ.get("VLLM_API_KEY"), version=VERSION,
                    reasoning=bool(args.get("reasoning-parser")),
                    tools=bool(args.flag("enable-auto-tool-choice") and args.get("tool-call-parser")))
    try:
        server.pd = disagg.from_args("vllm", args, host, log)  # --kv-transfer-config: the NIXL side channel
        if server.pd is not None:
            server.pd.start()
        server.start()
    except OSError as e:
        fatal(log, f"[Errno {e.errno}] error while attempting to bind on address ({host!r}, {port}): {e.strerror}",
              exc="OSError")
    server.ready.set()
    log(f"Starting vLLM API server 0 on http://{host}:{port}", src="launcher.py:34")
    log("Available routes are: /health, /v1/models, /v1/chat/completions, /v1/completions, /metrics, /version",
        src="launcher.py:42")
    log.raw(f"INFO:     Started server process [{os.getpid()}]")
    log.raw("INFO:     Waiting for application startup.")
    log.raw("INFO:     Application startup complete.")
    if backend == "ray":
        watch_ray(nodes_at_start, log)
    block_forever()


def dp_nodes(args):
    """Hosts a multi-node data-parallel deployment spans: --data-parallel-size over
    --data-parallel-size-local (the ranks of this host); 1 when every rank is local."""
    dp = args.int("data-parallel-size", 1)
    local = args.int("data-parallel-size-local", dp)
    if local < 1 or dp % local:
        fatal(None, f"data_parallel_size ({dp}) must be a multiple of data_parallel_size_local ({local})", code=2)
    return dp // local


def data_parallel_rendezvous(args, headless, log):
    """vLLM's native multi-node DP: the head (the API server) binds --data-parallel-rpc-port on
    --data-parallel-address and waits for every host's ranks; a --headless host starts its
    ranks at --data-parallel-start-rank and connects to the head, retrying until it answers."""
    dp, local = args.int("data-parallel-size", 1), args.int("data-parallel-size-local", 1)
    addr = args.get("data-parallel-address")
    port = args.int("data-parallel-rpc-port", 29550)
    start = args.int("data-parallel-start-rank", 0)
    if not addr or addr is True:
        fatal(log, "--data-parallel-address is required when --data-parallel-size-local < --data-parallel-size",
              exc="ValueError")
    if headless != (start > 0):
        fatal(log, f"data-parallel start rank {start} with headless={headless}: the head starts rank 0, "
              "every other host runs --headless from its own start rank", exc="ValueError")
    if start % local:
        fatal(log, f"--data-parallel-start-rank {start} is not a multiple of --data-parallel-size-local {local}",
              exc="ValueError")
    log(f"Data parallel: size {dp}, local ranks {start}..{start + local - 1}, coordinator {addr}:{port}",
        src="core.py:612")
    if headless:
        join_rendezvous(addr, port, start // local, dp // local, log)
    else:
        serve_rendezvous(port, dp // local, log)


def compile_and_capture(log, model, tp, pp, rank):
    """vLLM's boot after the weights, with its own log lines: torch.compile (FAKE_COMPILE_S, or a
    load from VLLM_CACHE_ROOT's torch_compile_cache when an earlier boot of the same model and
    layout left its artefacts there), the KV cache, CUDA graphs (FAKE_GRAPHS_S)."""
    t0 = time.monotonic()
    log(f"Model loading took 0.0 GiB memory and {phases.loaded_s():.6f} seconds", src="gpu_model_runner.py:2602")
    compile_s = phases.torch_compile(log, model, tp, pp, rank, VERSION)
    log(f"torch.compile takes {compile_s:.2f} s in total", src="monitor.py:34")
    log("Available KV cache memory: 100.50 GiB", src="gpu_worker.py:298")
    log("GPU KV cache size: 1,097,712 tokens", src="kv_cache_utils.py:1087")
    graphs = knob("FAKE_GRAPHS_S", 0)
    time.sleep(graphs)
    log("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 67/67", src="gpu_model_runner.py:3480")
    log(f"Graph capturing finished in {graphs:.0f} secs, took 0.00 GiB", src="gpu_model_runner.py:3480")
    log(f"init engine (profile, create kv cache, warmup model) took {time.monotonic() - t0:.2f} seconds",
        src="core.py:210")


def _check_port_free(host, port, log):
    """vLLM binds its API socket before loading the model, so a taken port fails at once."""
    listen(host, port, log).close()


def wait_for_ray(gpus_needed, log):
    """Wait for the Ray head (started with ``ray start --head`` in this container or at RAY_ADDRESS)."""
    deadline = time.monotonic() + knob("FAKE_RAY_TIMEOUT", 600)
    said = 0.0
    while True:
        address = os.environ.get("RAY_ADDRESS") or ray.current_address()
        nodes = ray.query(address)
        if nodes is not None:
            have = sum(math.inf if n.get("gpus") is None else n["gpus"] for n in nodes)
            if have >= gpus_needed:
                log(f"Connected to Ray cluster at {address}: {len(nodes)} node(s)", src="ray_utils.py:330")
                return len(nodes)
            why = f"{have} GPU(s) on {len(nodes)} node(s), need {gpus_needed}"
        else:
            why = f"no Ray cluster at {address or '(none started)'}"
        if time.monotonic() - said > 10:
            log(f"Waiting for the Ray cluster: {why}", level="WARNING", src="ray_utils.py:364")
            said = time.monotonic()
        if time.monotonic() > deadline:
            fatal(log, f"Timed out waiting for the Ray cluster: {why}", exc="ValueError")
        time.sleep(0.5)


def watch_ray(nodes_at_start, log):
    def watch():
        misses = 0
        while True:
            time.sleep(2)
            nodes = ray.query(os.environ.get("RAY_ADDRESS") or ray.current_address())
            misses = misses + 1 if nodes is None else 0
            if misses >= 3 or (nodes is not None and len(nodes) < nodes_at_start):
                fatal(log, "The actor died unexpectedly before finishing this task: a Ray node was lost",
                      exc="ray.exceptions.ActorDiedError")

    threading.Thread(target=watch, daemon=True).start()
