# inkctl argv proof: the part every engine's proof program shares. Inlined into each program
# when it is sent (inkctl/engines/_common.py: proof_program); runs inside the engine's image, with the
# image's python3 and nothing of inkctl. Python 3.8 syntax: images carry old interpreters.
import base64
import contextlib
import io
import json
import os
import subprocess
import sys
import traceback

MARK = "@@INKCTL-PROOF "
# where the engine's own checks end and the machine begins: past these the proof cannot go
# without a GPU, the weights or the network, so an error raised there is "not checked", never
# a refusal
UNCHECKABLE_MODULES = ("torch/cuda", "torch\\cuda", "pynvml", "nvidia", "huggingface_hub", "transformers/",
                       "urllib3", "requests/", "httpx", "socket.py", "ssl.py", "amdsmi", "platforms/")
# the model's files, looked up before the engine builds itself: the proof container has neither the
# weights nor the network, so reaching this lookup is as far as the engine's checks go (all passed)
MODEL_LOOKUP = ("LocalEntryNotFoundError", "OfflineModeIsEnabled", "outgoing traffic has been disabled",
                "HFValidationError", "RepositoryNotFoundError", "GatedRepoError")
UNCHECKABLE_WORDS = ("cuda", "gpu", "nvml", "device", "no such file", "not found in", "connection",
                     "couldn't connect", "huggingface", "hf_hub", "config.json", "offline", "tokenizer",
                     "does not appear to have", "repository", "resolve", "network is unreachable",
                     "name or service not known", "temporary failure")


class Reached(Exception):
    """Raised where the engine would start building itself: every check before it ran."""


def say(verdict, **kw):
    kw["verdict"] = verdict
    # on a line of its own: an engine's logger may have left a line unfinished
    sys.stdout.write("\n" + MARK + json.dumps(kw, sort_keys=True) + "\n")
    sys.stdout.flush()
    os._exit(0)  # engines leave threads behind (loggers, usage reporters): leave at once


def version_of(dist):
    try:
        import importlib.metadata as md
        return md.version(dist)
    except Exception:  # noqa: BLE001 - no metadata is an answer too
        return None


def put_files(request, notes):
    """The files the plan puts in the rank's mounts (an engine's options file), where the rank
    will find them."""
    for f in request.get("files", []):
        try:
            os.makedirs(os.path.dirname(f["path"]), exist_ok=True)
            with open(f["path"], "wb") as out:
                out.write(base64.b64decode(f["content"]))
        except OSError as e:
            notes.append("could not write %s: %s" % (f["path"], e))


def apply_hotfixes(request, notes):
    """The plan's mounted files where the rank finds them, then its at-start hotfixes run in
    this throwaway container as the rank's wrapper will run them: a hotfix that patches the
    engine's parser changes what the engine accepts."""
    put_files(request, notes)
    for h in request.get("hotfixes", []):
        gate = h.get("gate_env")
        if gate and os.environ.get(gate, "0") in ("", "0"):
            notes.append("hotfix %s skipped: %s is not set" % (h["name"], gate))
            continue
        path = "/tmp/inkctl-proof-" + h["name"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(h["content"]))
        p = subprocess.run(list(h["interpreter"]) + [path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            tail = p.stdout.decode("utf-8", "replace").strip().splitlines()[-3:]
            say("unchecked", stage="hotfix", message="hotfix %s failed in the proof container (exit %d): %s"
                % (h["name"], p.returncode, " | ".join(tail)), notes=notes)
        notes.append("hotfix %s applied" % h["name"])


def uncheckable(exc, tb_text):
    low = ("%s: %s" % (type(exc).__name__, exc)).lower()
    if isinstance(exc, (OSError, ImportError, MemoryError)):
        return True
    if any(m in tb_text for m in UNCHECKABLE_MODULES):
        return True
    return any(w in low for w in UNCHECKABLE_WORDS)


def judge(call, stage, notes, engine_dirs):
    """Run ``call``: a parser exit is a refusal, an engine check that raises is a refusal, an
    error where the machine begins (GPU, weights, network) is the end of what could be checked."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            call()
    except Reached as r:
        return str(r) or stage
    except SystemExit as e:
        text = err.getvalue().strip()
        if e.code in (0, None):
            say("unchecked", stage=stage, message="the engine's CLI exited before checking: " + (text[-400:] or "no output"),
                notes=notes)
        lines = [ln for ln in text.splitlines() if ln.strip()]
        message = next((ln for ln in reversed(lines) if "error:" in ln), lines[-1] if lines else "exit %s" % e.code)
        say("refused", stage=stage, message=message.strip(), notes=notes)
    except BaseException as e:  # noqa: BLE001 - every error is judged, none escapes
        tb = traceback.format_exc()
        own = [fr for fr in traceback.extract_tb(e.__traceback__) if any(d in fr.filename for d in engine_dirs)]
        where = "%s:%s in %s" % (os.path.basename(own[-1].filename), own[-1].lineno, own[-1].name) if own else ""
        message = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        if any(m in "%s %s" % (type(e).__name__, e) for m in MODEL_LOOKUP):
            notes.append("stopped at the model's files (%s): not in the proof container" % where)
            return "model-files"
        if not own or uncheckable(e, tb):
            say("unchecked", stage=stage, message=message, where=where, notes=notes)
        say("refused", stage=stage, message=message, where=where, notes=notes)
    return stage


def run(main):
    """The program's body: whatever escapes it (an engine that fails to import, say) is the end
    of what could be checked, said as such, never a crash without a verdict."""
    try:
        main()
    except BaseException as e:  # noqa: BLE001 - the verdict is the only output
        say("unchecked", stage="import", message="%s: %s" % (type(e).__name__, str(e).strip()[:300]))


def read_request():
    """The request inkctl put before this program (``INKCTL_REQUEST``), or the first argument."""
    text = globals().get("INKCTL_REQUEST")
    return json.loads(text if text is not None else sys.argv[1])
