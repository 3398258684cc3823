# inkctl argv proof for TensorRT-LLM: trtllm-serve's own click command reads the rank's argv
# inside the image (its options, its types and choices, then the serve callback's own work: the
# --extra_llm_api_options YAML read and merged into the LLM arguments); the proof stops where
# trtllm-serve would launch its server. Importing tensorrt_llm needs the CUDA driver library,
# which a container without a GPU lacks: then the proof says it could not check.
from inkctl.engines.proof.common import (Reached, apply_hotfixes, judge, read_request, run, say,
                                                         version_of)


def stop_at_launch(module):
    def stop(*args, **kwargs):
        raise Reached("launch")

    for name in dir(module):
        if name.startswith("launch_") and callable(getattr(module, name)):
            setattr(module, name, stop)


def main():
    request = read_request()
    argv = request["argv"]
    notes = []  # type: list[str]
    try:
        from tensorrt_llm.commands import serve as serve_module
    except Exception as e:  # noqa: BLE001 - ImportError, or the CUDA driver library missing (OSError)
        say("unchecked", stage="import", message="tensorrt_llm did not import in the proof container (%s: %s)"
            % (type(e).__name__, str(e).strip()[:200]), notes=notes)
    apply_hotfixes(request, notes)
    stop_at_launch(serve_module)
    command = getattr(serve_module, "main", None) or serve_module.serve

    def read():
        command.main(args=list(argv[1:]), prog_name="trtllm-serve", standalone_mode=True)

    reached = judge(read, "serve", notes, ["/tensorrt_llm/"])
    say("ok", stage=reached, engine="trtllm", version=version_of("tensorrt_llm") or version_of("tensorrt-llm"), notes=notes)


run(main)
