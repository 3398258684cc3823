"""A fake inference engine (Python 3 stdlib only) that behaves like vLLM, SGLang, TensorRT-LLM
and Ray closely enough for inkctl to deploy it for real.

Installed in the ``inkctl-fake-engine`` image as ``vllm``, ``ray``, ``trtllm-serve`` and the module
``sglang.launch_server``; also runnable here as ``python -m tests.cluster.fake_engine vllm serve m``.

Behaviour knobs (environment):
  FAKE_READY_AFTER     seconds of "loading" before the engine is ready (default 0)
  FAKE_CRASH_AFTER     exit after this many seconds, after logging a traceback (default: never)
  FAKE_EXIT_CODE       exit status of that crash (default 1)
  FAKE_LOG_EVERY       seconds between "Loading safetensors checkpoint shards" lines (default 0: one line per shard, at once)
  FAKE_SHARDS          number of checkpoint shards to pretend to load (default 4)
  FAKE_TOKEN_DELAY     seconds per generated token (default 0.01)
  FAKE_PEER_TIMEOUT    seconds without a heartbeat before a rank declares its peer lost and exits (default 15;
                       600 plays NCCL's long default timeout: an engine that does not notice a lost host)
  FAKE_PEER_NOTICE_S   seconds a rank takes to notice that a peer's connection closed (default 0.5)
  FAKE_LOG_ENV         1: log every environment variable at start, values and all (engines that dump their env)
  FAKE_NCCL_NET        ib | socket: the network NCCL "chose" (printed with NCCL_DEBUG=INFO; unset: IB only
                       when /sys/class/infiniband has the adapter, else the silent socket fallback)
  FAKE_WEIGHTS_S       seconds the weights take to "load", whatever happened before (default: what is left of
                       FAKE_READY_AFTER)
  FAKE_COMPILE_S       seconds vLLM's torch.compile takes without a compile cache (default 0); the artefacts
                       go to $VLLM_CACHE_ROOT/torch_compile_cache/<hash>/rank_<r>_0/, and a later boot
                       that finds them prints vLLM's "Directly load the compiled graph(s)" line instead
  FAKE_CACHED_COMPILE_S  seconds that load from the cache takes (default 0.05)
  FAKE_GRAPHS_S        seconds of vLLM's CUDA graph capture (default 0)
  FAKE_STUCK_HOLD_S    once SIGUSR1 stopped the engine core, how long a request waits (queued, counted
                       in num_requests_waiting) before a 503 (default 3600); /health stays 200
  FAKE_GPUS            GPUs trtllm-serve sees when CUDA_VISIBLE_DEVICES names none (default 8)
  FAKE_AUTOTUNE_S      seconds of TensorRT-LLM's autotuner (default 0)
  FAKE_GPUS_PER_NODE   GPUs each Ray node offers; with it, vLLM over Ray waits for tp*pp GPUs (default: no check)

On start it writes its argv and environment as JSON to /tmp/inkctl-fake-engine.json
(served at GET /inkctl/fake/argv once HTTP is up).
"""
