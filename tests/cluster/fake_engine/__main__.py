"""``python -m fake_engine vllm serve M ...`` / ``ray start ...`` / ``sglang --model-path M ...`` /
``trtllm-serve M ...``."""

import sys


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = argv.pop(0) if argv else ""
    if prog == "vllm":
        from .vllm import main as run
    elif prog == "ray":
        from .ray import main as run
    elif prog == "trtllm-serve":
        from .trtllm import main as run
    elif prog in ("sglang", "sglang.launch_server"):
        from .sglang import main as run
    else:
        sys.exit("usage: python -m fake_engine {vllm|ray|sglang|trtllm-serve} ARGS...")
    run(argv)


if __name__ == "__main__":
    main()
