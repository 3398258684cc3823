"""A fake ``python3 -m sglang.launch_server --model-path M [--host H] [--port P] ...``.

Like SGLang, node rank 0 opens HTTP early: /v1/models answers 200 while /health is 503 until
the model is loaded. Multi-node: ``--nnodes N --node-rank R --dist-init-addr A:P``; rank 0
listens on P and waits for the others; ranks > 0 serve no HTTP. Defaults: 127.0.0.1:30000.
"""

import os
import sys
import time

from .engine import (Args, Log, block_forever, dump_argv, fatal, handle_signals, join_rendezvous, knob, load_weights,
                     serve_rendezvous, start_crash_timer)
from . import disagg
from .openai_server import Server

VERSION = "0.5.4"
ALIASES = {"model": "model-path", "tp": "tp-size", "tensor-parallel-size": "tp-size", "pp": "pp-size",
           "pipeline-parallel-size": "pp-size", "dp": "dp-size", "nnodes": "nnodes"}


def _with_config(argv):
    """Like SGLang's ``--config FILE.yaml`` (server_args_config_parser): the file's ``key: value``
    lines become ``--key value`` flags before the command line's own (which win); the process's
    argv shows only the path. One --config at most, a .yaml/.yml file, a mapping at the root."""
    at = [i for i, a in enumerate(argv) if a == "--config"]
    if not at:
        return argv
    if len(at) > 1:
        raise SystemExit("ValueError: Multiple config files specified! Only one allowed.")
    i = at[0]
    if i == len(argv) - 1:
        raise SystemExit("ValueError: No config file specified after --config flag!")
    path = argv[i + 1]
    if not path.lower().endswith((".yaml", ".yml")):
        raise SystemExit(f"ValueError: Config file must be YAML format, got: {os.path.splitext(path)[1]}")
    if not os.path.exists(path):
        raise SystemExit(f"ValueError: Config file not found: {path}")
    extra = []
    with open(path) as f:
        for line in f:
            key, sep, value = line.strip().partition(":")
            if not sep or not key or key.startswith("#"):
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            extra += [f"--{key.strip()}", value]
    return extra + argv[:i] + argv[i + 2:]


def main(argv):
    if argv and argv[0] == "--version":
        print(VERSION)
        return
    from .cli import sglang_checks, sglang_server_args

    sglang_checks(sglang_server_args(list(argv)))  # the real parser's refusals and checks first
    serve_argv(argv)


def serve(server_args):
    """Where the image's ``sglang.srt.entrypoints.http_server.launch_server`` stand-in lands."""
    serve_argv(server_args.argv)


def serve_argv(argv):
    args = Args(_with_config(argv), aliases=ALIASES)
    model = args.get("model-path")
    if not model or model is True:
        print("usage: launch_server.py [-h] --model-path MODEL_PATH [...]\n"
              "launch_server.py: error: the following arguments are required: --model-path", file=sys.stderr)
        sys.exit(2)
    info = dump_argv("sglang")
    log = Log("sglang")
    handle_signals(log)
    start_crash_timer(log)

    host, port = args.get("host") or "127.0.0.1", args.int("port", 30000)
    name = args.get("served-model-name") or model
    tp, nnodes, rank = args.int("tp-size", 1), args.int("nnodes", 1), args.int("node-rank", 0)
    log(f"server_args=ServerArgs(model_path={model!r}, served_model_name={name!r}, host={host!r}, port={port}, "
        f"tp_size={tp}, nnodes={nnodes}, node_rank={rank}, dist_init_addr={args.get('dist-init-addr')!r})")

    server = None
    if rank == 0:
        server = Server("sglang", model, [name], host, port, log, info,
                        api_key=args.get("api-key"), version=VERSION,
                        reasoning=bool(args.get("reasoning-parser")), tools=bool(args.get("tool-call-parser")))
        try:
            server.pd = disagg.from_args("sglang", args, host, log)  # --disaggregation-mode: its bootstrap server
            if server.pd is not None and server.pd.role == "prefill":
                server.pd.start()
            server.start()
        except OSError as e:
            fatal(log, f"[Errno {e.errno}] error while attempting to bind on address ({host!r}, {port}): {e.strerror}",
                  exc="OSError")
        log.raw(f"INFO:     Started server process [{os.getpid()}]")
        log.raw("INFO:     Waiting for application startup.")
        log.raw("INFO:     Application startup complete.")
        log.raw(f"INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")

    if nnodes > 1:
        dist = args.get("dist-init-addr")
        if not dist or dist is True or ":" not in dist:
            fatal(log, "--dist-init-addr HOST:PORT is required when --nnodes > 1", exc="ValueError")
        addr, _, dport = dist.rpartition(":")
        if rank == 0:
            serve_rendezvous(int(dport), nnodes, log)
        else:
            join_rendezvous(addr, int(dport), rank, nnodes, log)
    log(f"Init torch distributed begin. tp_rank={rank}")
    log("Init torch distributed ends. mem usage=0.00 GB")
    log("Load weight begin. avail mem=139.37 GB")
    # SGLang v0.5: "Load weight end." carries no elapsed time (its timestamps do)
    load_weights(log, model,
                 lambda k, n: f"Loading safetensors checkpoint shards: {100 * k // n:3d}% Completed | {k}/{n}",
                 lambda t: "Load weight end. type=FakeForCausalLM, dtype=torch.bfloat16, avail mem=139.37 GB, "
                           "mem usage=0.00 GB.")
    log("KV Cache is allocated. #tokens: 1097712, K size: 50.25 GB, V size: 50.25 GB")
    log("Capture cuda graph begin. This can take up to several minutes. avail mem=38.87 GB")
    t0 = time.monotonic()
    time.sleep(knob("FAKE_GRAPHS_S", 0))
    log(f"Capture cuda graph end. Time elapsed: {time.monotonic() - t0:.2f} s. mem usage=0.00 GB. avail mem=38.87 GB.")
    if server is None:
        log(f"Node rank {rank} is ready; only node rank 0 serves HTTP.")
        block_forever()
    server.ready.set()
    log("The server is fired up and ready to roll!")
    block_forever()
