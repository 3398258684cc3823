"""Dump an engine release's command-line flags from its own argument parser, into the table
inkctl ships (inkctl/recipe/engine_releases/<engine>-<version>.json).

    python tools/engine_flags.py sglang 0.5.20 [--wheel-dir DIR] [--venv DIR]

How: a throwaway venv; the release's wheel installed with --no-deps (a full install pulls a
CUDA torch of several GB); then the parser is built the way the server builds it
(vLLM: ``make_arg_parser(FlexibleArgumentParser())``; SGLang: ``ServerArgs.add_cli_args``), and
whenever an import fails for a missing module, that one module's package is installed (at the version
the release's own requirements pin, when they name it) and the build tried again. The packages in
PINNED_FIRST are installed at the release's pin before the first try: a venv reused across releases
keeps another release's transformers, whose registry refuses an older release's model configs.
torch comes from the CPU build on this machine's disk (torch==2.13.0).
What the parser has, per option string: whether it takes a value (and argparse's nargs), its
choices, whether the release marks it deprecated, its first help line. Deprecated is any of:
argparse's own ``deprecated=True`` (Python 3.13+); vLLM's FlexibleArgumentParser, which takes
``deprecated=True`` on older Pythons too and keeps those actions in its class-level
``_deprecated`` set; a ``Deprecated*`` action class; help text that starts with "deprecated" or
says "[deprecated]", "(deprecated" or "is deprecated" (SGLang's "Deprecated alias for ...").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "inkctl" / "recipe" / "engine_releases"
PACKAGE_OF = {"torch": "torch==2.13.0", "PIL": "pillow", "yaml": "pyyaml", "zmq": "pyzmq", "cv2": "opencv-python-headless",
              "google": "protobuf", "sklearn": "scikit-learn", "IPython": "ipython", "attr": "attrs",
              "msgspec": "msgspec", "cbor2": "cbor2", "cpuinfo": "py-cpuinfo", "jwt": "pyjwt", "dotenv": "python-dotenv",
              "transformers": "transformers", "sentencepiece": "sentencepiece", "blake3": "blake3",
              "openai_harmony": "openai-harmony", "fastapi": "fastapi", "setproctitle": "setproctitle",
              "prometheus_client": "prometheus-client", "partial_json_parser": "partial-json-parser",
              "tiktoken": "tiktoken", "gguf": "gguf", "mistral_common": "mistral-common", "pybase64": "pybase64",
              "compressed_tensors": "compressed-tensors", "depyf": "depyf", "lark": "lark", "xgrammar": "xgrammar",
              "llguidance": "llguidance", "lmformatenforcer": "lm-format-enforcer", "outlines_core": "outlines-core", "diskcache": "diskcache",
              "regex": "regex", "cachetools": "cachetools", "watchfiles": "watchfiles", "numba": "numba",
              "triton": "triton", "huggingface_hub": "huggingface-hub", "pydantic": "pydantic",
              "tokenizers": "tokenizers", "einops": "einops", "psutil": "psutil", "requests": "requests",
              "aiohttp": "aiohttp", "openai": "openai", "uvicorn": "uvicorn", "uvloop": "uvloop",
              "orjson": "orjson", "numpy": "numpy", "packaging": "packaging", "tqdm": "tqdm",
              "starlette": "starlette", "interegular": "interegular", "sgl_kernel": None, "flashinfer": None}

# installed at the release's own pin before the parser is built (see the module's docstring)
PINNED_FIRST = ("transformers",)

REQUIRES = r'''
import importlib.metadata as m, json, sys
print(json.dumps(m.requires(sys.argv[1]) or []))
'''

DUMP = r'''
import argparse, json, sys
engine = sys.argv[1]
if engine == "vllm":
    # the parser's defaults build a DeviceConfig, which asks the platform; a CUDA wheel on a machine
    # without GPUs finds none, and releases before 0.28 take the CPU platform only from a CPU
    # build (not from VLLM_TARGET_DEVICE): the CPU platform is set as vLLM's own resolution would
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform
    vllm.platforms._current_platform = CpuPlatform()
    from vllm.entrypoints.openai.cli_args import make_arg_parser
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    parser = make_arg_parser(FlexibleArgumentParser())
else:
    from sglang.srt.server_args import ServerArgs
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
dep_set = set(getattr(parser, "_deprecated", set()) or ())
out = {}
for a in parser._actions:
    helptext = a.help if isinstance(a.help, str) else ""
    low = helptext.lower()
    deprecated = bool(getattr(a, "deprecated", False)) or a in dep_set or "deprecat" in type(a).__name__.lower() \
        or low.startswith("deprecated") or "[deprecated]" in low or "(deprecated" in low or "is deprecated" in low
    for s in a.option_strings:
        if s.startswith("--") and s != "--help":
            out[s] = {"deprecated": deprecated, "takes_value": a.nargs != 0,
                      "nargs": None if a.nargs is None else str(a.nargs),
                      "choices": sorted(str(c) for c in a.choices) if a.choices else None,
                      "help": " ".join(helptext.split())[:160]}
print("@@FLAGS " + json.dumps(out, sort_keys=True))
'''


def _pip(py: Path, *args: str) -> None:
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", *args], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def release_pins(py: Path, engine: str) -> dict[str, str]:
    """The release's own requirements, by normalised package name: 'transformers' ->
    'transformers==5.12.1' (markers and extras-only requirements left out)."""
    p = subprocess.run([str(py), "-c", REQUIRES, engine], capture_output=True, text=True, check=True)
    out: dict[str, str] = {}
    for req in json.loads(p.stdout):
        spec, _, marker = req.partition(";")
        if "extra ==" in marker:
            continue
        name = re.match(r"[A-Za-z0-9._-]+", spec.strip())
        if name:
            out[name.group(0).lower().replace("_", "-")] = spec.strip().replace(" ", "")
    return out


def dump(engine: str, version: str, wheel_dir: Path | None, venv: Path | None, tries: int = 120) -> dict:
    """With ``venv``, an earlier run's venv is reused (its installed modules kept); the release's
    wheel replaces whatever release it had."""
    if venv is None:
        venv = Path(tempfile.mkdtemp(prefix=f"inkctl-{engine}-{version}-"))
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    wheel = None
    if wheel_dir:
        wheel = next(iter(sorted(wheel_dir.glob(f"{engine}-{version}-*.whl"))), None)
    _pip(py, "--no-deps", "--force-reinstall", str(wheel) if wheel else f"{engine}=={version}")
    pins = release_pins(py, engine)
    for name in PINNED_FIRST:
        if name in pins:
            print(f"  installing {pins[name]} (the release's pin)", file=sys.stderr)
            _pip(py, pins[name])
    script = venv / "dump.py"
    script.write_text(DUMP)
    missing_seen: list[str] = []
    for _ in range(tries):
        # vLLM infers its device from the platform; on a machine without GPUs its CPU platform
        # answers only when asked for (the parser's defaults build a DeviceConfig)
        env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"} if engine == "vllm" else None
        p = subprocess.run([str(py), str(script), engine], capture_output=True, text=True, env=env)
        line = next((ln for ln in p.stdout.splitlines() if ln.startswith("@@FLAGS ")), None)
        if line:
            flags = json.loads(line[len("@@FLAGS "):])
            return {"engine": engine, "version": version, "source": f"{engine}=={version} wheel from PyPI, its own "
                    "argument parser built on CPU (tools/engine_flags.py)", "modules_installed": missing_seen,
                    "pinned": {n: pins[n] for n in PINNED_FIRST if n in pins},
                    "flags": flags}
        m = re.search(r"No module named '([^'.]+)", p.stderr)
        if not m:
            raise SystemExit(f"{engine} {version}: the parser did not build:\n{p.stderr[-3000:]}")
        mod = m.group(1)
        pkg = PACKAGE_OF.get(mod, mod.replace("_", "-"))
        if pkg is not None and "==" not in pkg:
            pkg = pins.get(pkg.lower(), pkg)
        if pkg is None or mod in missing_seen:
            raise SystemExit(f"{engine} {version}: {mod} is needed and cannot be installed on CPU:\n{p.stderr[-1500:]}")
        missing_seen.append(mod)
        print(f"  installing {pkg} (for {mod})", file=sys.stderr)
        _pip(py, pkg)
    raise SystemExit(f"{engine} {version}: gave up after {tries} installs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", choices=["vllm", "sglang"])
    ap.add_argument("version")
    ap.add_argument("--wheel-dir", type=Path)
    ap.add_argument("--venv", type=Path, help="reuse this venv (made if missing) instead of a new one")
    a = ap.parse_args()
    table = dump(a.engine, a.version, a.wheel_dir, a.venv)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{a.engine}-{a.version}.json"
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    write_index()
    n = len(table["flags"])
    d = sum(1 for f in table["flags"].values() if f["deprecated"])
    print(f"{path.relative_to(ROOT)}: {n} flags, {d} deprecated")


def write_index() -> None:
    """The flag names of every table in one small file, what validate reads at start-up."""
    sys.path.insert(0, str(ROOT))
    from inkctl.recipe.engine_versions import INDEX, index_of

    index = index_of(p for p in OUT.glob("*.json") if p.name != INDEX)
    (OUT / INDEX).write_text(json.dumps(index, separators=(",", ":"), sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

