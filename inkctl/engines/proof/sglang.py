# inkctl argv proof for SGLang: SGLang's own entry point reads the rank's argv inside the image
# (`python3 -m sglang.launch_server ...` or `sglang serve ...`, as the rank runs it): its parser,
# then everything the entry point checks and resolves before it starts serving; the proof stops
# where SGLang would launch its HTTP (or gRPC) server. Where a check asks the GPU or the model's
# config (the weights are not in the proof container), the proof says how far it got.
from inkctl.engines.proof.common import (Reached, apply_hotfixes, judge, read_request, run, say,
                                                         version_of)
import importlib
import runpy
import sys

LAUNCHERS = (("sglang.srt.entrypoints.http_server", "launch_server"),
             ("sglang.srt.entrypoints.grpc_server", "serve_grpc"),
             ("sglang.srt.disaggregation.encoder.http_server", "launch_server"),
             ("sglang.srt.ray.http_server", "launch_server"))


def stop_at_launch(notes):
    def stop(*args, **kwargs):
        raise Reached("launch")

    for module, name in LAUNCHERS:
        try:
            setattr(importlib.import_module(module), name, stop)
        except Exception as e:  # noqa: BLE001 - an optional server of this release
            if module.endswith("http_server") and "entrypoints" in module:
                notes.append("the HTTP server module did not import: %s: %s" % (type(e).__name__, e))


def main():
    request = read_request()
    argv = request["argv"]
    notes = []  # type: list[str]
    try:
        import sglang  # noqa: F401 - the image's engine
    except ImportError as e:
        say("unchecked", stage="import", message="the image has no sglang Python package (%s): nothing could read the argv" % e,
            notes=notes)
    apply_hotfixes(request, notes)
    stop_at_launch(notes)
    if "-m" in argv:  # python3 -m sglang.launch_server ...
        module = argv[argv.index("-m") + 1]
        sys.argv = [module] + list(argv[argv.index("-m") + 2:])

        def read():
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:  # sglang serve ...
        sys.argv = ["sglang"] + list(argv[1:])

        def read():
            from sglang.cli.main import main as sglang_main
            sglang_main()

    reached = judge(read, "server-args", notes, ["/sglang/"])
    say("ok", stage=reached, engine="sglang", version=version_of("sglang"), notes=notes)


run(main)
