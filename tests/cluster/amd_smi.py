#!/usr/bin/python3
"""An ``amd-smi`` / ``rocm-smi`` stand-in for GPU-less test hosts, replaying the answers in
tests/fixtures/amd-smi/ (the tools' own JSON formats). ``gpu.install_amd`` copies this script
into a host's bin/ under the tool's name, with the fixture files beside it in ``amd-smi.d/``.

Answers (what preflight asks):
- ``amd-smi static --asic --vram --json``: ``static.json``;
- ``amd-smi metric --mem-usage --json``: ``metric.json``, with the MB in use of the GPUs named in
  ``used.json`` (``{"3": 150000}``; tests write it to make a GPU busy; no file: as recorded);
- ``amd-smi version``: one line;
- ``rocm-smi --showproductname --showmeminfo vram --json``: ``rocm-smi.json``, ``used.json``
  applied to each card's ``VRAM Total Used Memory (B)``.
Anything else: the tool's usage error, exit 2.
"""

import json
import os
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "amd-smi.d")


def _read(name):
    with open(os.path.join(HERE, name)) as f:
        return json.load(f)


def _used():
    try:
        return {int(k): int(v) for k, v in _read("used.json").items()}
    except OSError:
        return {}


def amd_smi(argv):
    words = [a for a in argv if a != "--json"]
    if words[:1] == ["version"]:
        print("AMDSMI Tool: 25.1.0+stand-in | AMDSMI Library version: 25.1.0 | ROCm version: 6.4.0")
        return 0
    if "--json" not in argv:
        print("the inkctl test stand-in answers --json only", file=sys.stderr)
        return 2
    if words[:1] == ["static"] and set(words[1:]) <= {"--asic", "--vram", "-a", "-v"}:
        print(json.dumps(_read("static.json"), indent=4))
        return 0
    if words[:1] == ["metric"] and set(words[1:]) <= {"--mem-usage", "-m"}:
        doc = _read("metric.json")
        items = doc["gpu_data"] if isinstance(doc, dict) else doc
        for gpu, mb in _used().items():
            mem = items[gpu]["mem_usage"]
            total = mem["total_vram"]["value"]
            mem["used_vram"]["value"] = mem["used_visible_vram"]["value"] = mb
            mem["free_vram"]["value"] = mem["free_visible_vram"]["value"] = total - mb
        print(json.dumps(doc, indent=4))
        return 0
    print(f"amd-smi: error: argument: invalid choice: {' '.join(argv)!r}", file=sys.stderr)
    return 2


def rocm_smi(argv):
    if set(argv) != {"--showproductname", "--showmeminfo", "vram", "--json"}:
        print("the inkctl test stand-in answers --showproductname --showmeminfo vram --json only", file=sys.stderr)
        return 2
    doc = _read("rocm-smi.json")
    for gpu, mb in _used().items():
        doc[f"card{gpu}"]["VRAM Total Used Memory (B)"] = str(mb * 2**20)
    print(json.dumps(doc))
    return 0


def main(prog, argv):
    return rocm_smi(argv) if os.path.basename(prog) == "rocm-smi" else amd_smi(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[0], sys.argv[1:]))
