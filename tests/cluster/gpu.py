"""GPU stand-ins for GPU-less hosts, at the runtimes' own extension points:

- ``nvidia-smi`` in each host's bin/ answering from a fixture profile;
- ``nvidia-container-runtime-hook`` on dockerd's PATH before it starts, so dockerd registers its
  GPU driver and ``docker run --gpus all`` works (the hook also drops nvidia-smi into the
  container, as the real toolkit does);
- a CDI spec /etc/cdi/nvidia.yaml so ``podman run --device nvidia.com/gpu=all`` works.
"""

import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
PROFILES_DIR = os.path.join(HERE, "..", "fixtures", "nvidia-smi", "profiles")
CDI_SPEC = "/etc/cdi/nvidia.yaml"
CDI_MARK = "# written by inkctl tests/cluster"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "/usr/bin/env python3"

HOOK = '''#!{python}
"""inkctl test stand-in for nvidia-container-runtime-hook: dockerd registers --gpus only when
this is on its PATH at start. As an OCI prestart hook it copies nvidia-smi into the container."""
import json, os, shutil, sys
try:
    state = json.load(sys.stdin)
    bundle = state.get("bundle") or state.get("bundlePath") or "."
    with open(os.path.join(bundle, "config.json")) as f:
        root = json.load(f)["root"]["path"]
    root = root if os.path.isabs(root) else os.path.join(bundle, root)
    dst = os.path.join(root, "usr", "bin", "nvidia-smi")
    if os.path.isdir(os.path.dirname(dst)) and not os.path.lexists(dst):
        shutil.copy({smi!r}, dst)
except Exception:
    pass
'''


def profiles():
    return sorted(f[:-4] for f in os.listdir(PROFILES_DIR) if f.endswith(".csv"))


def profile_csv(name):
    path = os.path.join(PROFILES_DIR, f"{name}.csv")
    if not os.path.exists(path):
        raise ValueError(f"unknown nvidia-smi profile {name!r}; known: {', '.join(profiles())}")
    with open(path) as f:
        return f.read()


def install(bin_dir, profile):
    """nvidia-smi and the runtime hook into bin_dir."""
    os.makedirs(bin_dir, exist_ok=True)
    with open(os.path.join(HERE, "nvidia_smi.py")) as f:
        src = f.read()
    src = src.replace("#!/usr/bin/python3", f"#!{PYTHON}", 1)
    src = src.replace('PROFILE = ""', f"PROFILE = {profile_csv(profile)!r}", 1)
    smi = os.path.join(bin_dir, "nvidia-smi")
    _write(smi, src, 0o755)
    _write(os.path.join(bin_dir, "nvidia-container-runtime-hook"), HOOK.format(python=PYTHON, smi=smi), 0o755)


def install_cdi_spec():
    """Write /etc/cdi/nvidia.yaml unless a real one is there. True if this call wrote it."""
    if os.path.exists(CDI_SPEC):
        with open(CDI_SPEC) as f:
            if CDI_MARK not in f.read():
                return False
    devices = "".join(
        f"  - name: \"{d}\"\n    containerEdits:\n      env:\n        - NVIDIA_VISIBLE_DEVICES={d}\n"
        for d in ["all", *map(str, range(8))])
    spec = (f"{CDI_MARK} (GPU stand-in for podman --device nvidia.com/gpu=all); `python -m tests.cluster down` removes it\n"
            'cdiVersion: "0.5.0"\n'
            "kind: nvidia.com/gpu\n"
            f"devices:\n{devices}"
            "containerEdits:\n"
            "  env:\n"
            "    - NVIDIA_DRIVER_CAPABILITIES=compute,utility\n"
            "  mounts:\n"  # podman hosts have a private /run holding their own nvidia-smi
            "    - hostPath: /run/inkctl-gpu/nvidia-smi\n"
            "      containerPath: /usr/bin/nvidia-smi\n"
            "      options: [ro, nosuid, nodev, bind]\n")
    os.makedirs(os.path.dirname(CDI_SPEC), exist_ok=True)
    _write(CDI_SPEC, spec, 0o644)
    return True


def remove_cdi_spec():
    try:
        with open(CDI_SPEC) as f:
            ours = CDI_MARK in f.read()
    except OSError:
        return
    if ours:
        os.remove(CDI_SPEC)
        try:
            os.rmdir(os.path.dirname(CDI_SPEC))
        except OSError:
            pass


def _write(path, text, mode):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


AMD_FIXTURES = os.path.join(HERE, "..", "fixtures", "amd-smi")
AMD_ANSWERS = {"static.json": "mi300x-static-asic-vram.json", "metric.json": "mi300x-metric-mem-usage.json",
               "rocm-smi.json": "mi300x-rocm-smi.json"}


def install_amd(bin_dir, tool="amd-smi", used=None):
    """Make a host an AMD MI300X x8 host for the launch probe: ``amd-smi`` (or ``rocm-smi`` alone,
    ROCm without amd-smi) in bin_dir replaying tests/fixtures/amd-smi/ (amd_smi.py). ``used``:
    {GPU index: MB in use}, to make GPUs busy. The host's nvidia-smi stays: the probe asks the
    vendor's tool that the recipe's accelerator names. Undone by ``remove_amd``."""
    answers = os.path.join(bin_dir, "amd-smi.d")
    os.makedirs(answers, exist_ok=True)
    for name, fixture in AMD_ANSWERS.items():
        with open(os.path.join(AMD_FIXTURES, fixture)) as f:
            _write(os.path.join(answers, name), f.read(), 0o644)
    set_amd_used(bin_dir, used)
    with open(os.path.join(HERE, "amd_smi.py")) as f:
        src = f.read().replace("#!/usr/bin/python3", f"#!{PYTHON}", 1)
    _write(os.path.join(bin_dir, tool), src, 0o755)


def set_amd_used(bin_dir, used):
    path = os.path.join(bin_dir, "amd-smi.d", "used.json")
    if used:
        _write(path, json.dumps({str(k): v for k, v in used.items()}), 0o644)
    elif os.path.exists(path):
        os.remove(path)


def remove_amd(bin_dir):
    for tool in ("amd-smi", "rocm-smi"):
        if os.path.exists(os.path.join(bin_dir, tool)):
            os.remove(os.path.join(bin_dir, tool))
    shutil.rmtree(os.path.join(bin_dir, "amd-smi.d"), ignore_errors=True)
