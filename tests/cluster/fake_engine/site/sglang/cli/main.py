"""``sglang serve``, played by the fake engine: the same path as ``python3 -m sglang.launch_server``."""
import sys


def main():
    argv = sys.argv[1:]
    if not argv or argv[0] != "serve":
        print("usage: sglang [-h] {serve,generate,killall} ...", file=sys.stderr)
        sys.exit(2)
    from sglang.launch_server import run_server
    from sglang.srt.server_args import prepare_server_args

    run_server(prepare_server_args(argv[1:]))
