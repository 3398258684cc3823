"""The real sglang-router, as an image the test hosts can run without a registry.

sglang-router on PyPI is a Rust core inside a Python extension module (no standalone binary),
so the image needs Python: the fake engine's Debian rootfs (python3.11 + stdlib) plus
``pip install --target`` of the wheel and its dependencies for that Python, written as one
layer under the name the real deployment uses (``lmsysorg/sglang:latest`` ships
``sglang_router``; the recipe starts ``python3 -m sglang_router.launch_router``). The
installed packages and the archive are cached in /var/cache/inkctl-test like the engine's.
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

VERSION = "0.3.2"
REF = "lmsysorg/sglang:latest"
SITE = image.SITE  # usr/lib/python3/dist-packages: on Debian's python3 path


def _key():
    return hashlib.sha256(f"{image.base_key()} sglang-router=={VERSION} {REF} 1".encode()).hexdigest()[:16]


def _site_dir(log=print):
    """The wheel and its dependencies for the rootfs's Python 3.11, installed once (cached)."""
    path = os.path.join(image.CACHE_DIR, f"sglang-router-{VERSION}-site")
    if os.path.isdir(path):
        return path
    tmp = tempfile.mkdtemp(prefix="router-site-", dir=image.CACHE_DIR)
    log(f"pip install --target sglang-router=={VERSION} for python 3.11 (once; cached in {image.CACHE_DIR})")
    cp = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", tmp,
                         "--python-version", "3.11", "--implementation", "cp", "--only-binary=:all:",
                         "--platform", "manylinux2014_x86_64", f"sglang-router=={VERSION}"],
                        capture_output=True, text=True, timeout=900)
    if cp.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise HarnessError(f"pip install sglang-router failed: {cp.stderr.strip()[-1500:]}")
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


def archive(log=print):
    """(path of the cached docker-archive, image id)."""
    key = _key()
    path = os.path.join(image.CACHE_DIR, f"router-{key}.tar")
    meta = path[:-4] + ".json"
    if os.path.exists(path) and os.path.exists(meta):
        with open(meta) as f:
            return path, json.load(f)["id"]
    base = image.base_rootfs(log)
    site = _site_dir(log)
    with image._lock():
        if os.path.exists(path) and os.path.exists(meta):
            with open(meta) as f:
                return path, json.load(f)["id"]
        log(f"writing the {REF} archive (sglang-router {VERSION}, key {key})")
        layer = path + ".layer.tmp"
        try:
            image._write_layer(base, layer, _files(site))
            image_id = image._write_archive(
                layer, path + ".tmp", key, ref=REF, made_by=f"debootstrap {image.SUITE} + pip install sglang-router=={VERSION}",
                config_extra={"Entrypoint": ["python3", "-m", "sglang_router.launch_router"], "Cmd": []})
        finally:
            if os.path.exists(layer):
                os.remove(layer)
        os.replace(path + ".tmp", path)
        with open(meta, "w") as f:
            json.dump({"id": image_id, "key": key, "image": REF}, f)
    return path, image_id


def load(cluster, names, log=print):
    """Load the router image into the docker hosts ``names`` (skipped where its id is there)."""
    path, image_id = archive(log)
    for n in names:
        h = next(h for h in cluster.hosts if h.name == n)
        if h.runtime != "docker":
            raise HarnessError(f"{n}: the router image is loaded on docker hosts only")
        status, body = docker_api(h.socket, "GET", f"/images/{REF}/json")
        if status == 200 and json.loads(body).get("Id") == f"sha256:{image_id}":
            continue
        run(["docker", "-H", f"unix://{h.socket}", "load", "-q", "-i", path], timeout=600)
    return REF
