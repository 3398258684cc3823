# inkctl argv proof for SGLang: SGLang's own parser and ServerArgs' checks read the rank's argv
# inside the image. ServerArgs checks what it can without a GPU; where a check asks the GPU or
# the model's config, the proof stops and says how far it got.
from inkctl.execute.deploy.proof_programs.common import (Reached, apply_hotfixes, judge, read_request, run, say,
                                                         version_of)


def server_args(argv):
    """What follows the launcher: `python3 -m sglang.launch_server ...` or `sglang serve ...`."""
    if "-m" in argv:
        return list(argv[argv.index("-m") + 2:])
    if len(argv) > 1 and argv[1] == "serve":
        return list(argv[2:])
    return list(argv[1:])


def main():
    request = read_request()
    argv = request["argv"]
    notes = []  # type: list[str]
    try:
        import sglang  # noqa: F401 - the image's engine
        from sglang.srt.server_args import prepare_server_args
    except ImportError as e:
        say("unchecked", stage="import", message="the image has no sglang Python package (%s): nothing could read the argv" % e,
            notes=notes)
    apply_hotfixes(request, notes)
    rest = server_args(argv)

    def read():
        args = prepare_server_args(rest)
        check = getattr(args, "check_server_args", None)
        if check is not None:
            check()
        raise Reached("server-args")

    reached = judge(read, "server-args", notes, ["/sglang/"])
    say("ok", stage=reached, engine="sglang", version=version_of("sglang"), notes=notes)


run(main)
