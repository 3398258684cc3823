"""A fake ``trtllm-serve MODEL [--backend pytorch] [--tp_size N] [--ep_size M]
[--extra_llm_api_options FILE] [--host H] [--port P] ...`` (TensorRT-LLM's OpenAI server).

Its habits, as the real one has them (tensorrt_llm/commands/serve.py, serve/openai_server.py,
and the boot log of a real trtllm-serve):

- a click command: options are spelt with underscores, an option it does not have is refused
  before anything starts (``Error: No such option: --foo``, exit 2), as is a choice it does not
  know (``--backend``) and a missing MODEL; ``serve`` may be named or left out
  (``trtllm-serve serve MODEL`` = ``trtllm-serve MODEL``);
- ``--extra_llm_api_options`` (alias ``--config``) names a YAML file, read at start: a missing file
  is a FileNotFoundError traceback; its keys override the command line's
  (``speculative_config``, ``kv_cache_config``, ``cuda_graph_config``, ``enable_attention_dp``...);
- one host: the ranks are MPI processes it spawns itself; TP x PP must not exceed the GPUs it sees
  (``CUDA_VISIBLE_DEVICES``/FAKE_GPUS, default 8), and EP must divide TP;
- the HTTP port opens only once the model is loaded (uvicorn starts after the LLM is built):
  before that a connection is refused, never a 503;
- ``/health`` 200 with an empty body, ``/health_generate``, ``/version`` ({"version"}),
  ``/v1/models``, ``/metrics`` (JSON iteration stats), ``/prometheus/metrics`` (Prometheus text,
  ``trtllm_`` names), ``/v1/completions`` and ``/v1/chat/completions``.
"""

import os
import sys
import time

from .engine import block_forever, dump_argv, fatal, handle_signals, knob, load_weights, start_crash_timer
from .openai_server import Server

VERSION = "1.2.0"
PROG = "trtllm-serve"
# option -> takes a value (the serve command's options; tables in inkctl/recipe/engine_releases/)
OPTIONS = {
    "--tokenizer": True, "--custom_tokenizer": True, "--host": True, "--port": True, "--backend": True,
    "--custom_module_dirs": True, "--log_level": True, "--max_beam_width": True, "--max_batch_size": True,
    "--max_num_tokens": True, "--max_seq_len": True, "--tensor_parallel_size": True, "--tp_size": True,
    "--pipeline_parallel_size": True, "--pp_size": True, "--context_parallel_size": True, "--cp_size": True,
    "--moe_expert_parallel_size": True, "--ep_size": True, "--moe_cluster_parallel_size": True,
    "--cluster_size": True, "--gpus_per_node": True, "--free_gpu_memory_fraction": True,
    "--kv_cache_free_gpu_memory_fraction": True, "--num_postprocess_workers": True, "--trust_remote_code": False,
    "--revision": True, "--config": True, "--extra_llm_api_options": True, "--reasoning_parser": True,
    "--tool_parser": True, "--metadata_server_config_file": True, "--server_role": True,
    "--fail_fast_on_attention_window_too_large": False, "--otlp_traces_endpoint": True,
    "--disagg_cluster_uri": True, "--enable_chunked_prefill": False, "--media_io_kwargs": True,
    "--chat_template": True,
}
ALIAS = {"--tp_size": "--tensor_parallel_size", "--pp_size": "--pipeline_parallel_size",
         "--cp_size": "--context_parallel_size", "--ep_size": "--moe_expert_parallel_size",
         "--cluster_size": "--moe_cluster_parallel_size", "--config": "--extra_llm_api_options",
         "--kv_cache_free_gpu_memory_fraction": "--free_gpu_memory_fraction"}
BACKENDS = ("pytorch", "tensorrt", "trt", "_autodeploy")
USAGE = f"Usage: {PROG} [OPTIONS] MODEL\nTry '{PROG} --help' for help.\n"


def usage_error(message):
    """click's UsageError: usage, a blank line, the error, exit 2."""
    print(f"{USAGE}\nError: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def parse(argv):
    """(model, options by canonical name) the way click reads the serve command."""
    if argv and argv[0] == "serve":
        argv = argv[1:]
    opts, model, i = {}, None, 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            name, eq, value = tok.partition("=")
            if name not in OPTIONS:
                usage_error(f"No such option: {name}")
            key = ALIAS.get(name, name)
            if not OPTIONS[name]:
                if eq:
                    usage_error(f"Option '{name}' does not take a value.")
                opts[key] = True
            else:
                if not eq:
                    if i + 1 >= len(argv):
                        usage_error(f"Option '{name}' requires an argument.")
                    i += 1
                    value = argv[i]
                opts.setdefault(key, [] if key == "--custom_module_dirs" else None)
                opts[key] = opts[key] + [value] if key == "--custom_module_dirs" else value
        elif model is None:
            model = tok
        else:
            usage_error(f"Got unexpected extra argument ({tok})")
        i += 1
    if model is None:
        usage_error("Missing argument 'MODEL'.")
    return model, opts


def integer(opts, name, default):
    raw = opts.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        usage_error(f"Invalid value for '{name}': '{raw}' is not a valid integer.")


def read_options_file(path, log):
    """The YAML of --extra_llm_api_options, as a dict (yaml.safe_load in the real one)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        fatal(log, f"[Errno {e.errno}] {e.strerror}: {path!r}", exc="FileNotFoundError", code=1)
    try:
        doc = load_yaml(text)
    except ValueError as e:
        fatal(log, f"while parsing a block mapping in {path!r}: {e}", exc="yaml.parser.ParserError", code=1)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        fatal(log, f"{path}: the options file must hold a mapping", exc="TypeError", code=1)
    return doc


def scalar(text):
    t = text.strip()
    if t in ("", "~", "null", "Null", "NULL"):
        return None
    if t in ("true", "True", "TRUE"):
        return True
    if t in ("false", "False", "FALSE"):
        return False
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    if t.startswith("[") and t.endswith("]"):
        return [scalar(x) for x in t[1:-1].split(",") if x.strip()]
    for kind in (int, float):
        try:
            return kind(t)
        except ValueError:
            pass
    return t


def load_yaml(text):
    """The block-style YAML subset an options file uses: nested mappings, lists of scalars
    (``- x`` or ``[a, b]``), scalars; comments and blank lines skipped."""
    lines = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line.strip():
            if "\t" in line[: len(line) - len(line.lstrip())]:
                raise ValueError("found a tab character where an indentation space is expected")
            lines.append((len(line) - len(line.lstrip()), line.strip()))
    if not lines:
        return None
    value, rest = _block(lines, 0, lines[0][0])
    if rest != len(lines):
        raise ValueError(f"expected <block end>, but found {lines[rest][1]!r}")
    return value


def _block(lines, i, indent):
    if lines[i][1].startswith("- "):
        out = []
        while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
            out.append(scalar(lines[i][1][2:]))
            i += 1
        return out, i
    out = {}
    while i < len(lines) and lines[i][0] == indent:
        key, colon, value = lines[i][1].partition(":")
        if not colon:
            raise ValueError(f"could not find expected ':' near {lines[i][1]!r}")
        i += 1
        if value.strip():
            out[key.strip()] = scalar(value)
        elif i < len(lines) and lines[i][0] > indent:
            out[key.strip()], i = _block(lines, i, lines[i][0])
        else:
            out[key.strip()] = None
    if i < len(lines) and lines[i][0] > indent:
        raise ValueError(f"mapping values are not allowed here near {lines[i][1]!r}")
    return out, i


class TrtLog:
    """``[12/20/2025-04:20:04] [TRT-LLM] [I] msg`` (the Python logger), ``[TensorRT-LLM][INFO] msg``
    (the C++ runtime), and the bare lines (tqdm bars, uvicorn) as they are."""

    style = "trtllm"
    LEVELS = {"INFO": "I", "WARNING": "W", "ERROR": "E"}

    def __call__(self, msg, level="INFO", src=None):
        stamp = time.strftime("%m/%d/%Y-%H:%M:%S", time.localtime())
        print(f"[{stamp}] [TRT-LLM] [{self.LEVELS.get(level, 'I')}] {msg}", flush=True)

    def cpp(self, msg, level="INFO"):
        print(f"[TensorRT-LLM][{level}] {msg}", flush=True)

    def raw(self, text):
        print(text, flush=True)


def gpus_seen():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("NVIDIA_VISIBLE_DEVICES")
    if visible and visible not in ("all", "void", "none"):
        return len([d for d in visible.split(",") if d.strip()])
    return int(knob("FAKE_GPUS", 8))


def check_parallel(log, tp, pp, ep, extra):
    need = tp * pp
    if need > gpus_seen():
        fatal(log, f"world_size ({need}) is larger than the number of GPUs on this node ({gpus_seen()})",
              exc="ValueError", code=1)
    if ep and tp % ep:
        fatal(log, f"tp_size {tp} must be divisible by moe_ep_size {ep}", exc="ValueError", code=1)
    attn_dp = bool(extra.get("enable_attention_dp"))
    return attn_dp


def speculative(extra):
    spec = extra.get("speculative_config") or {}
    return int(spec.get("max_draft_len") or spec.get("num_nextn_predict_layers") or 0) if isinstance(spec, dict) else 0


def boot(log, model, tp, ep, extra, max_batch):
    log.raw(f"[TensorRT-LLM] TensorRT-LLM version: {VERSION}")
    log("Using LLM with PyTorch backend")
    log("Set nccl_plugin to None.")
    log("neither checkpoint_format nor checkpoint_loader were provided, checkpoint_format will be set to HF.")
    if tp > 1:
        log.raw("rank 0 using MpiPoolSession to spawn MPI processes")
    log.cpp("Refreshed the MPI local session")
    draft = speculative(extra)
    chunked = bool(extra.get("enable_chunked_prefill"))
    log(f"ATTENTION RUNTIME FEATURES:  AttentionRuntimeFeatures(chunked_prefill={chunked}, cache_reuse=True, "
        f"has_speculative_draft_tokens={draft > 0}, chunk_size=8192)")
    kv = extra.get("kv_cache_config") if isinstance(extra.get("kv_cache_config"), dict) else {}
    log(f'Validating KV Cache config against kv_cache_dtype="{kv.get("dtype", "auto")}"')
    log("Use 63.32 GB for model weights.")
    # the bars and the total are printed bare (tqdm, print), not through the logger
    bare = lambda msg, level="INFO", src=None: None if msg.startswith("Loading weights for ") else log.raw(msg)  # noqa: E731
    load_weights(bare, model, lambda k, n: f"Loading safetensors weights in parallel: {100 * k // n:3d}%|"
                 f"{'█' * (10 * k // n):<10}| {k}/{n} [00:00<00:00, 81.92it/s]",
                 lambda t: f"Model init total -- {t:.2f}s")
    log(f"max_seq_len=8224, max_num_requests={max_batch}, max_num_tokens=8192, max_batch_size={max_batch}")
    log.cpp("[MemUsageChange] Allocated 5.95 GiB for max tokens in paged KV cache (86720).")
    log("[Autotuner] Autotuning process starts ...")
    time.sleep(knob("FAKE_AUTOTUNE_S", 0))
    log("[Autotuner] Autotuning process ends")
    graphs = extra.get("cuda_graph_config", {})
    if graphs is not None:
        sizes = [s for s in (64, 32, 16, 8, 4, 2, 1) if s <= max_batch] or [1]
        log(f"Creating CUDA graph instances for {len(sizes)} batch sizes.")
        t0 = time.monotonic()
        for s in sizes:
            log(f"Run generation only CUDA graph warmup for batch size={s}, draft_len={draft}")
        time.sleep(max(0.0, knob("FAKE_GRAPHS_S", 0) - (time.monotonic() - t0)))
    log("Setting PyTorch memory fraction to 0.5983721838660735 (71.62367630004883 GiB)")


def main(argv):
    model, opts = parse(argv)
    backend = opts.get("--backend") or "pytorch"
    if backend not in BACKENDS:
        usage_error(f"Invalid value for '--backend': '{backend}' is not one of 'pytorch', 'tensorrt', '_autodeploy'.")
    tp, pp = integer(opts, "--tensor_parallel_size", 1), integer(opts, "--pipeline_parallel_size", 1)
    ep = integer(opts, "--moe_expert_parallel_size", 0)
    port, host = integer(opts, "--port", 8000), opts.get("--host") or "localhost"
    info = dump_argv("trtllm")
    log = TrtLog()
    handle_signals(log)
    start_crash_timer(log)
    extra = read_options_file(opts["--extra_llm_api_options"], log) if opts.get("--extra_llm_api_options") else {}
    check_parallel(log, tp, pp, ep, extra)
    max_batch = int(extra.get("max_batch_size") or integer(opts, "--max_batch_size", 2048))
    boot(log, model, tp, ep, extra, min(max_batch, 64))
    server = Server("trtllm", model, [model], host, port, log, info, version=VERSION,
                    reasoning=bool(opts.get("--reasoning_parser")), tools=bool(opts.get("--tool_parser")))
    try:
        server.start()
    except OSError as e:
        fatal(log, f"Failed to bind socket to {host}:{port}: [Errno {e.errno}] {e.strerror}", exc="RuntimeError")
    server.ready.set()
    log.raw(f"INFO:     Started server process [{os.getpid()}]")
    log.raw("INFO:     Waiting for application startup.")
    log.raw("INFO:     Application startup complete.")
    log.raw(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
    block_forever()
