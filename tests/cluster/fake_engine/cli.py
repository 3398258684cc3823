"""The engines' own argument parsers, as the fake engine plays them. The flags are every flag some
real release has (the union of inkctl's flag tables, dumped from the real parsers and written into
the image as ``flags-<engine>.json``), read the way argparse reads them, so an unknown flag, a
missing value or a value outside a flag's choices is refused with argparse's own words and exit 2,
at boot and when inkctl's argv proof asks. Then the checks the real engines make before they build
anything (vLLM: no --api-server-count on a headless rank). Stand-ins for the engines' modules
(``vllm.entrypoints.cli.main``, ``sglang.srt.server_args``, ``ray.scripts.scripts``) call these."""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def table(engine):
    path = os.path.join(HERE, f"flags-{engine}.json")
    if not os.path.exists(path):  # run from the source tree (unit tests): the tables themselves
        return union_of_tables(engine)
    with open(path) as f:
        return json.load(f)


def union_of_tables(engine, tables_dir=None):
    """Every flag any release of ``engine`` has; the newest release's spelling of each wins."""
    tables_dir = tables_dir or os.path.join(HERE, "..", "..", "..", "inkctl", "recipe", "engine_releases")
    out = {}
    names = sorted(n for n in os.listdir(tables_dir) if n.startswith(engine + "-") and n.endswith(".json"))

    def release(name):
        v = name[len(engine) + 1:-5].replace("post", "").split(".")
        return tuple(int(x) if x.isdigit() else 0 for x in v)

    for name in sorted(names, key=release):
        with open(os.path.join(tables_dir, name)) as f:
            for flag, spec in json.load(f)["flags"].items():
                out[flag] = {"takes_value": spec["takes_value"], "nargs": spec.get("nargs"), "choices": spec.get("choices")}
    return out


def parser(engine, prog, positional=None):
    p = argparse.ArgumentParser(prog=prog, allow_abbrev=False, add_help=False)
    if positional:
        p.add_argument(positional, nargs="?")
    for flag, spec in sorted(table(engine).items()):
        kw = {"dest": flag}
        if not spec["takes_value"]:
            kw["action"] = "store_true"
        else:
            if spec.get("nargs") in ("+", "*", "?"):
                kw["nargs"] = spec["nargs"]
            if spec.get("choices"):
                kw["choices"] = spec["choices"]
        p.add_argument(flag, **kw)
    return p


def _underscores(argv):
    """vLLM's FlexibleArgumentParser reads --tensor_parallel_size as --tensor-parallel-size."""
    out = []
    for tok in argv:
        if tok.startswith("--"):
            name, eq, value = tok.partition("=")
            tok = name.replace("_", "-") + eq + value
        out.append(tok)
    return out


def vllm_serve(argv):
    """``vllm serve ...`` (argv after ``vllm``): parse, then the serve command's own checks.
    Returns the parsed flags by option string."""
    if not argv or argv[0] != "serve":
        print("usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\n"
              f"vllm: error: argument subparser: invalid choice: {argv[0] if argv else ''!r}", file=sys.stderr)
        sys.exit(2)
    ns = vars(parser("vllm", "vllm serve", positional="model_tag").parse_args(_underscores(argv[1:])))
    count = ns.get("--api-server-count")
    if ns.get("--headless") and count is not None and int(count) > 0:  # vLLM 0.29 on (serve.py's own words)
        raise ValueError(f"--api-server-count={count} cannot be used with --headless (no API servers are started in "
                         "headless mode).")
    try:
        from vllm.engine.arg_utils import EngineArgs  # in the image, the stand-in: where inkctl's proof stops
    except ImportError:  # from the source tree
        return ns
    EngineArgs(ns).create_engine_config()
    return ns


def sglang_server_args(argv):
    from .sglang import _with_config  # --config FILE: its keys read as flags, as SGLang's own merger does

    ns = vars(parser("sglang", "launch_server.py").parse_args(_with_config(list(argv))))
    if not ns.get("--model-path"):
        print("usage: launch_server.py [-h] --model-path MODEL_PATH [...]\n"
              "launch_server.py: error: the following arguments are required: --model-path", file=sys.stderr)
        sys.exit(2)
    return ns


def sglang_checks(ns):
    """What SGLang checks of its server arguments before it serves (the fake's share of them)."""
    tp, nnodes = int(ns.get("--tp-size") or 1), int(ns.get("--nnodes") or 1)
    if tp % nnodes:
        raise ValueError(f"tp_size ({tp}) must be divisible by nnodes ({nnodes})")


RAY_START = {"--head": False, "--block": False, "--port": True, "--address": True, "--node-ip-address": True,
             "--num-gpus": True, "--num-cpus": True, "--dashboard-host": True, "--dashboard-port": True,
             "--disable-usage-stats": False, "--include-dashboard": True, "--resources": True,
             "--object-store-memory": True, "--temp-dir": True, "--node-manager-port": True}


def ray_start(argv):
    """``ray start`` as click reads it: an unknown option is "No such option", exit 2."""
    i = 0
    while i < len(argv):
        name = argv[i].split("=", 1)[0]
        if name not in RAY_START:
            print(f"Usage: ray start [OPTIONS]\nTry 'ray start --help' for help.\n\nError: No such option: {name}",
                  file=sys.stderr)
            sys.exit(2)
        i += 2 if RAY_START[name] and "=" not in argv[i] else 1
