"""The fake's compile phase and its compile cache, as vLLM keeps it.

vLLM writes torch.compile's artefacts under ``$VLLM_CACHE_ROOT/torch_compile_cache/<hash>/
rank_<r>_0/backbone`` (the hash covers the model, its config and the parallel layout) and on
the next boot loads them ("Directly load the compiled graph(s) ... from the cache") instead of
compiling. The fake does the same with one file per rank: absent, it "compiles" for
FAKE_COMPILE_S seconds and writes it; present, the compile costs FAKE_CACHED_COMPILE_S.
"""

import hashlib
import os
import time

from .engine import LOADED, knob

ARTEFACT = "inkctl-fake-compiled.bin"


def loaded_s():
    return LOADED[-1] if LOADED else 0.0


def cache_root():
    return os.environ.get("VLLM_CACHE_ROOT") or os.path.join(os.path.expanduser("~"), ".cache", "vllm")


def torch_compile(log, model, tp, pp, rank, version):
    if os.environ.get("FAKE_ENFORCE_EAGER") == "1":
        return 0.0
    key = hashlib.sha256(f"{model}|tp={tp}|pp={pp}|{version}".encode()).hexdigest()[:10]
    where = os.path.join(cache_root(), "torch_compile_cache", key, f"rank_{rank}_0", "backbone")
    log(f"Using cache directory: {where} for vLLM's torch.compile", src="backends.py:1089")
    t0 = time.monotonic()
    artefact = os.path.join(where, ARTEFACT)
    if os.path.isfile(artefact):
        time.sleep(knob("FAKE_CACHED_COMPILE_S", 0.05))
        log("Directly load the compiled graph(s) for compile range (1, 8192) from the cache, "
            f"took {time.monotonic() - t0:.3f} s", src="backends.py:292")
        return time.monotonic() - t0
    time.sleep(knob("FAKE_COMPILE_S", 0))
    try:
        os.makedirs(where, exist_ok=True)
        with open(artefact, "wb") as f:
            f.write(hashlib.sha256(key.encode()).digest() * 64)
    except OSError as e:
        log(f"Could not save the compiled graph to {where}: {e}", level="WARNING", src="backends.py:300")
    log(f"Compiling a graph for compile range (1, 8192) takes {time.monotonic() - t0:.2f} s", src="backends.py:215")
    return time.monotonic() - t0
