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
    # make_arg_parser moved: entrypoints.openai.cli_args up to 0.28, a launchers module in 0.29,
    # a common module by 0.33; the module is found by the function's definition in the wheel
    import importlib, pathlib
    root = pathlib.Path(vllm.__file__).parent
    homes = sorted(f for f in (root / "entrypoints").rglob("*.py") if "def make_arg_parser(" in f.read_text())
    if not homes:
        raise SystemExit("@@NOPARSER no module of this release defines make_arg_parser")
    home = homes[0].relative_to(root.parent).with_suffix("")
    print("@@PARSER " + ".".join(home.parts))
    make_arg_parser = importlib.import_module(".".join(home.parts)).make_arg_parser
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

# TensorRT-LLM's trtllm-serve is a click command (tensorrt_llm/commands/serve.py). Its wheel comes
# only from NVIDIA's index; the release's serve.py is executed here as it is, with click installed
# and the modules it imports that need CUDA (tensorrt_llm itself, torch) or are not installed
# (strenum) stubbed at the import boundary: click builds the real command from the real decorators.
# A value the decorators take from a stubbed module (BuildConfig's defaults, the reasoning and tool
# parser registries, the log levels) is not known here and is written as such ("unread").
CLICK_DUMP = r'''
import importlib.abc, importlib.machinery, importlib.metadata, json, sys, types
STUBBED = ("tensorrt_llm", "torch", "strenum")


class Unread:
    """What a stubbed module hands out: any attribute, item or call gives another, named by the
    expression that made it; iterating gives nothing (so click.Choice over it has no choices)."""
    def __init__(self, expr):
        self._expr = expr
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Unread(f"{self._expr}.{name}")
    def __getitem__(self, key):
        return Unread(f"{self._expr}[{key!r}]")
    def __call__(self, *a, **k):
        return Unread(f"{self._expr}()")
    def __iter__(self):
        return iter(())
    def __mro_entries__(self, bases):
        return (object,)
    def __repr__(self):
        return self._expr


class Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Unread(f"{self.__name__}.{name}")


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None
    def create_module(self, spec):
        return Stub(spec.name)
    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.insert(0, Finder())
import click
source = sys.argv[1]
ns = {"__name__": "trtllm_serve_source", "__file__": source}
exec(compile(open(source).read(), source, "exec"), ns)
cmd = ns["serve"]
TAGS = ("stable", "beta", "prototype", "deprecated")
out, positional = {}, []
for p in cmd.params:
    if isinstance(p, click.Argument):
        positional.append(p.name)
        continue
    helptext = p.help or ""
    stability = None
    if helptext.startswith(":tag:`"):
        stability, _, helptext = helptext[len(":tag:`"):].partition("` ")
    choices = list(getattr(p.type, "choices", None) or ()) or None
    aliases = getattr(p.type, "aliases", None)
    unread = [f"default: {p.default!r}"] if type(p.default).__name__ == "Unread" else []
    if isinstance(p.type, click.Choice) and not choices:
        unread.append("choices: built at run time from a stubbed module")
    default = None if unread and unread[0].startswith("default") else p.default
    for s in p.opts:
        out[s] = {"deprecated": stability == "deprecated", "takes_value": not p.is_flag,
                  "nargs": "*" if p.multiple else None,
                  "choices": sorted(str(c) for c in (choices or [])) + sorted(aliases or {}) if choices else None,
                  "default": default if isinstance(default, (str, int, float, bool, type(None))) else str(default),
                  "stability": stability, "unread": unread or None, "dest": p.name,
                  "help": " ".join(helptext.split())[:160]}
print("@@POSITIONAL " + json.dumps(positional))
print("@@CLICK " + importlib.metadata.version("click"))
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
            home = next((ln.split()[1] for ln in p.stdout.splitlines() if ln.startswith("@@PARSER ")), None)
            where = f" ({home}.make_arg_parser)" if home and home != "vllm.entrypoints.openai.cli_args" else ""
            return {"engine": engine, "version": version, "source": f"{engine}=={version} wheel from PyPI, its own "
                    f"argument parser{where} built on CPU (tools/engine_flags.py)", "modules_installed": missing_seen,
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


def dump_click(version: str, source: Path, commit: str, venv: Path | None) -> dict:
    """TensorRT-LLM: the ``serve`` command built by click from the release's own serve.py."""
    import hashlib

    if venv is None:
        venv = Path(tempfile.mkdtemp(prefix=f"inkctl-trtllm-{version}-"))
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    _pip(py, "click", "pyyaml")
    script = venv / "dump_click.py"
    script.write_text(CLICK_DUMP)
    p = subprocess.run([str(py), str(script), str(source)], capture_output=True, text=True)
    lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("@@")}
    if "@@FLAGS" not in lines:
        raise SystemExit(f"trtllm {version}: click did not build the serve command:\n{p.stderr[-3000:]}")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    return {"engine": "trtllm", "version": version, "commit": commit, "source_sha256": digest,
            "source": f"NVIDIA/TensorRT-LLM tensorrt_llm/commands/serve.py at commit {commit}: its `serve` click "
                      f"command built by click {lines['@@CLICK']} with tensorrt_llm and torch stubbed "
                      "(tools/engine_flags.py)",
            "positional": json.loads(lines["@@POSITIONAL"]), "flags": json.loads(lines["@@FLAGS"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", choices=["vllm", "sglang", "trtllm"])
    ap.add_argument("version", help="the release ('0.33.0'), or for trtllm the label of the source's commit")
    ap.add_argument("--wheel-dir", type=Path)
    ap.add_argument("--venv", type=Path, help="reuse this venv (made if missing) instead of a new one")
    ap.add_argument("--source", type=Path, help="trtllm: a copy of tensorrt_llm/commands/serve.py at the release")
    ap.add_argument("--commit", help="trtllm: the commit (or tag) SOURCE was read at")
    a = ap.parse_args()
    if a.engine == "trtllm":
        if not (a.source and a.commit):
            ap.error("trtllm needs --source (serve.py of the release) and --commit (where it was read)")
        table = dump_click(a.version, a.source, a.commit, a.venv)
    else:
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
    from inkctl.recipe.checks.engine_versions import INDEX, index_of

    index = index_of(p for p in OUT.glob("*.json") if p.name != INDEX)
    (OUT / INDEX).write_text(json.dumps(index, separators=(",", ":"), sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

