"""``vllm``'s entry point, played by the fake engine: the parser and checks, then the serve."""
import sys


def main():
    from fake_engine.vllm import main as serve

    serve(sys.argv[1:])
