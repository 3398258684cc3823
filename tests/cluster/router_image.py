"""The real request routers, as images the test hosts can run without a registry.

sglang-router and vllm-router on PyPI are Rust cores inside Python extension modules (no
standalone binary), so an image needs Python: the fake engine's Debian rootfs (python3.11 +
stdlib) plus ``pip install --target`` of the wheel and its dependencies for that Python,
written as one layer under the name the real deployment uses (``lmsysorg/sglang:latest``
ships ``sglang_router``, started as ``python3 -m sglang_router.launch_router``;
``vllm/vllm-router:latest`` starts ``vllm-router``, the wheel's console script, written here
for the rootfs's python3). The installed packages and the archives are cached in
/var/cache/inkctl-test like the engine's.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from . import image
from .proc import HarnessError, docker_api, run

SITE = image.SITE  # usr/lib/python3/dist-packages: on Debian's python3 path
# kind -> (PyPI package, version, image name, wheel platform, entrypoint)
ROUTERS = {
    "sglang": ("sglang-router", "0.3.2", "lmsysorg/sglang:latest", "manylinux2014_x86_64",
               ["python3", "-m", "sglang_router.launch_router"]),
    "vllm": ("vllm-router", "0.1.17", "vllm/vllm-router:latest", "manylinux_2_28_x86_64", ["vllm-router"]),
}
VERSION = ROUTERS["sglang"][1]
REF = ROUTERS["sglang"][2]
# the console script pip writes names the interpreter that ran pip: the image's own instead
VLLM_ROUTER_SCRIPT = b"#!/usr/bin/python3\nimport sys\nfrom vllm_router.launch_router import main\nsys.exit(main())\n"


def _key(kind="sglang"):
    pkg, version, ref, _, _ = ROUTERS[kind]
    return hashlib.sha256(f"{image.base_key()} {pkg}=={version} {ref} 1".encode()).hexdigest()[:16]


def _site_dir(kind="sglang", log=print):
    """The wheel and its dependencies for the rootfs's Python 3.11, installed once (cached)."""
    pkg, version, _, platform, _ = ROUTERS[kind]
    path = os.path.join(image.CACHE_DIR, f"{pkg}-{version}-site")
    if os.path.isdir(path):
        return path
    tmp = tempfile.mkdtemp(prefix="router-site-", dir=image.CACHE_DIR)
    log(f"pip install --target {pkg}=={version} for python 3.11 (once; cached in {image.CACHE_DIR})")
    cp = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", tmp,
                         "--python-version", "3.11", "--implementation", "cp", "--only-binary=:all:",
                         "--platform", platform, f"{pkg}=={version}"],
                        capture_output=True, text=True, timeout=900)
    if cp.returncode != 0 or not os.path.isdir(os.path.join(tmp, pkg.replace("-", "_"))):
        shutil.rmtree(tmp, ignore_errors=True)
        raise HarnessError(f"pip install {pkg} failed: {cp.stderr.strip()[-1500:]}")
    os.replace(tmp, path)
    return path


def _files(site):
    out = []
    for root, dirs, names in os.walk(site):
        dirs.sort()
        rel = os.path.relpath(root, site)
        if rel.split(os.sep)[0] == "bin":
            continue
        for n in sorted(names):
            if n.endswith(".pyc"):
                continue
            with open(os.path.join(root, n), "rb") as f:
                data = f.read()
            p = n if rel == "." else f"{rel}/{n}"
            out.append((f"{SITE}/{p}", data, 0o755 if n.endswith(".so") else 0o644))
    return out


def archive(log=print, kind="sglang"):
    """(path of the cached docker-archive, image id)."""
    pkg, version, ref, _, entrypoint = ROUTERS[kind]
    key = _key(kind)
    path = os.path.join(image.CACHE_DIR, f"router-{key}.tar")
    meta = path[:-4] + ".json"
    if os.path.exists(path) and os.path.exists(meta):
        with open(meta) as f:
            return path, json.load(f)["id"]
    base = image.base_rootfs(log)
    site = _site_dir(kind, log)
    with image._lock():
        if os.path.exists(path) and os.path.exists(meta):
            with open(meta) as f:
                return path, json.load(f)["id"]
        log(f"writing the {ref} archive ({pkg} {version}, key {key})")
        layer = path + ".layer.tmp"
        files = _files(site)
        if kind == "vllm":
            files.append(("usr/local/bin/vllm-router", VLLM_ROUTER_SCRIPT, 0o755))
        try:
            image._write_layer(base, layer, files)
            image_id = image._write_archive(
                layer, path + ".tmp", key, ref=ref, made_by=f"debootstrap {image.SUITE} + pip install {pkg}=={version}",
                config_extra={"Entrypoint": entrypoint, "Cmd": []})
        finally:
            if os.path.exists(layer):
                os.remove(layer)
        os.replace(path + ".tmp", path)
        with open(meta, "w") as f:
            json.dump({"id": image_id, "key": key, "image": ref}, f)
    return path, image_id


def load(cluster, names, log=print, kind="sglang"):
    """Load the ``kind`` router's image into the docker hosts ``names`` (skipped where its id
    is there); its name."""
    ref = ROUTERS[kind][2]
    path, image_id = archive(log, kind)
    for n in names:
        h = next(h for h in cluster.hosts if h.name == n)
        if h.runtime != "docker":
            raise HarnessError(f"{n}: the router image is loaded on docker hosts only")
        status, body = docker_api(h.socket, "GET", f"/images/{ref}/json")
        if status == 200 and json.loads(body).get("Id") == f"sha256:{image_id}":
            continue
        run(["docker", "-H", f"unix://{h.socket}", "load", "-q", "-i", path], timeout=600)
    return ref
