# inkctl argv proof for vLLM: vLLM's own CLI reads the rank's argv inside the image, and every
# check it makes before building the engine runs (the parser, the serve command's pre-checks,
# the headless and data-parallel rules); it stops where vLLM would build the engine config
# (that needs the model's config, and the GPU). Also `ray start` for a Ray worker rank.
from inkctl.engines.proof.common import (Reached, apply_hotfixes, judge, read_request, run, say,
                                                         version_of)
import os
import sys


def stop_at_engine_build():
    from vllm.engine import arg_utils

    def stop(self, *args, **kwargs):
        raise Reached("engine-config")

    arg_utils.EngineArgs.create_engine_config = stop


def cpu_platform_if_none(notes):
    """Without a GPU in the proof container vLLM finds no platform, and its parser's defaults
    ask the platform: its CPU platform stands in, as vLLM's own resolution would pick it."""
    try:
        import vllm.platforms as platforms
        plat = platforms.current_platform
        if type(plat).__name__ == "UnspecifiedPlatform" or not getattr(plat, "device_type", ""):
            from vllm.platforms.cpu import CpuPlatform
            platforms._current_platform = CpuPlatform()
            notes.append("no GPU in the proof container: vLLM's CPU platform stood in for the parser's defaults")
    except Exception as e:  # noqa: BLE001 - the parser may still build
        notes.append("platform not resolved: %s: %s" % (type(e).__name__, e))


def prove_ray(argv, notes):
    try:
        from ray.scripts.scripts import cli
    except ImportError as e:
        say("unchecked", stage="import", message="the image has no ray Python package (%s)" % e, notes=notes)
    sub = argv[1] if len(argv) > 1 else ""
    command = cli.commands.get(sub)
    if command is None:
        say("refused", stage="parser", message="ray: no such command %r" % sub, notes=notes)
    judge(lambda: command.make_context("ray " + sub, list(argv[2:])), "parser", notes, ["/ray/"])
    say("ok", stage="parser", engine="ray", version=version_of("ray"), notes=notes)


def main():
    request = read_request()
    argv = request["argv"]
    notes = []  # type: list[str]
    if os.path.basename(argv[0]) == "ray":
        prove_ray(argv, notes)
    try:
        import vllm  # noqa: F401 - the image's engine
    except ImportError as e:
        say("unchecked", stage="import", message="the image has no vllm Python package (%s): nothing could read the argv" % e,
            notes=notes)
    version = version_of("vllm")
    apply_hotfixes(request, notes)
    stop_at_engine_build()
    cpu_platform_if_none(notes)
    if "-m" in argv:  # python3 -m vllm.entrypoints.openai.api_server --model ...
        module = argv[argv.index("-m") + 1]
        sys.argv = [module] + list(argv[argv.index("-m") + 2:])

        def read():
            import runpy
            runpy.run_module(module, run_name="__main__")
    else:
        sys.argv = ["vllm"] + list(argv[1:])

        def read():
            from vllm.entrypoints.cli.main import main as vllm_main
            vllm_main()
    reached = judge(read, "serve", notes, ["/vllm/"])
    say("ok", stage=reached, engine="vllm", version=version, notes=notes)


run(main)
