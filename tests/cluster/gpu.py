"""GPU stand-ins for GPU-less hosts, at the runtimes' own extension points:

- ``nvidia-smi`` in each host's bin/ answering from a fixture profile;
- ``nvidia-container-runtime-hook`` on dockerd's PATH before it starts, so dockerd registers its
  GPU driver and ``docker run --gpus all`` works (the hook also drops nvidia-smi into the
  container, as the real toolkit does);
- a CDI spec /etc/cdi/nvidia.yaml so ``podman run --device nvidia.com/gpu=all`` works.
"""

import os

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
