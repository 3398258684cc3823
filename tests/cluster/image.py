"""The fake engine image ``inkctl-fake-engine:latest``, built without a registry.

1. A Debian rootfs from ``debootstrap --variant=minbase`` with Python (about 30-50 s), stripped of
   apt lists, docs and locales, cached as /var/cache/inkctl-test/rootfs-<key>.tar.
2. One layer = that rootfs + the fake engine (``vllm``, ``ray``, ``sglang.launch_server``,
   ``trtllm-serve``), written
   straight into a ``docker save``-format archive, cached as image-<key>.tar, where the key hashes
   the fake engine's sources. No timestamps from now go in, so the image ID is the same on every
   engine and every run, and loading can be skipped where that ID is already present.
3. ``docker load`` / ``podman load`` of that archive into each engine, in parallel.
"""

import fcntl
import glob
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from contextlib import contextmanager

from .proc import HarnessError, docker_api, run

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE_DIR = os.environ.get("INKCTL_TEST_CACHE", "/var/cache/inkctl-test")
NAME = "inkctl-fake-engine"
IMAGE = f"{NAME}:latest"
SUITE = "bookworm"
PACKAGES = ("python3-minimal", "libpython3.11-stdlib")
STRIP = ("var/lib/apt/lists", "var/cache/apt", "var/cache/debconf", "usr/share/doc", "usr/share/man",
         "usr/share/locale", "usr/share/info", "usr/share/lintian", "var/log")
LAYOUT = "3"  # bump when the image layout below changes
MTIME = 1700000000
SITE = "usr/lib/python3/dist-packages"
ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1"]

WRAPPER = '#!/usr/bin/python3\nimport sys\nfrom fake_engine.__main__ import main\nmain([{prog!r}] + sys.argv[1:])\n'


@contextmanager
def _lock():
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(os.path.join(CACHE_DIR, ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def base_key():
    return _sha(repr((SUITE, PACKAGES, STRIP)).encode())[:16]


def engine_files():
    """(path in image, content, mode) of everything the fake engine adds to the rootfs."""
    files = []
    src = os.path.join(HERE, "fake_engine")
    for name in sorted(os.listdir(src)):
        if name.endswith(".py"):
            with open(os.path.join(src, name), "rb") as f:
                files.append((f"{SITE}/fake_engine/{name}", f.read(), 0o644))
    site = os.path.join(src, "site")  # stand-ins for the engines' own modules (the argv proof's entry points)
    for root, _, names in sorted(os.walk(site)):
        for name in sorted(n for n in names if n.endswith(".py")):
            with open(os.path.join(root, name), "rb") as f:
                files.append((f"{SITE}/{os.path.relpath(os.path.join(root, name), site)}", f.read(), 0o644))
    from .fake_engine.cli import union_of_tables

    for engine in ("vllm", "sglang"):  # the real releases' flags, which the fake's parser reads
        flags = json.dumps(union_of_tables(engine), sort_keys=True).encode()
        files.append((f"{SITE}/fake_engine/flags-{engine}.json", flags, 0o644))
    files += [
        ("usr/local/bin/vllm", WRAPPER.format(prog="vllm").encode(), 0o755),
        ("usr/local/bin/ray", WRAPPER.format(prog="ray").encode(), 0o755),
        ("usr/local/bin/trtllm-serve", WRAPPER.format(prog="trtllm-serve").encode(), 0o755),
    ]
    return files


def image_key():
    h = hashlib.sha256(f"{base_key()} {LAYOUT} {ENV}".encode())
    for path, data, mode in engine_files():
        h.update(f"{path} {mode}\n".encode() + data)
    return h.hexdigest()[:16]


def debian_mirror():
    """The machine's configured Debian mirror (debootstrap's default otherwise)."""
    texts = []
    for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*"))]:
        try:
            with open(path) as f:
                texts.append(f.read())
        except OSError:
            pass
    for text in texts:
        m = re.search(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+" + SUITE + r"\s", text, re.M)
        if m:
            return m.group(1)
        for stanza in text.split("\n\n"):
            uri, suites = re.search(r"^URIs:\s*(\S+)", stanza, re.M), re.search(r"^Suites:(.*)$", stanza, re.M)
            if uri and suites and SUITE in suites.group(1).split():
                return uri.group(1)
    return "http://deb.debian.org/debian"


def base_rootfs(log=print):
    path = os.path.join(CACHE_DIR, f"rootfs-{base_key()}.tar")
    if os.path.exists(path):
        return path
    with _lock():
        if os.path.exists(path):
            return path
        _clean_stale_builds()
        work = tempfile.mkdtemp(prefix="debootstrap-", dir=CACHE_DIR)
        root = os.path.join(work, "root")
        mirror = debian_mirror()
        log(f"building the fake engine's rootfs: debootstrap {SUITE} from {mirror} (once; cached in {CACHE_DIR})")
        try:
            run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, root, mirror],
                timeout=1200)
            for rel in STRIP:
                d = os.path.join(root, rel)
                for entry in os.listdir(d) if os.path.isdir(d) else ():
                    p = os.path.join(d, entry)
                    shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
            run(["tar", "-C", root, "--numeric-owner", "-cf", path + ".tmp", "."], timeout=600)
            os.replace(path + ".tmp", path)
        finally:
            _umount_under(work)
            shutil.rmtree(work, ignore_errors=True)
    return path


def _clean_stale_builds():
    for work in glob.glob(os.path.join(CACHE_DIR, "debootstrap-*")):
        _umount_under(work)
        shutil.rmtree(work, ignore_errors=True)
    for tmp in glob.glob(os.path.join(CACHE_DIR, "*.tmp")):
        os.remove(tmp)


def _umount_under(path):
    with open("/proc/self/mountinfo") as f:
        points = [ln.split()[4] for ln in f]
    for p in sorted((p for p in points if p.startswith(path + "/")), key=len, reverse=True):
        run(["umount", "-l", p], check=False)


def archive(log=print):
    """(path of the cached docker-archive, image id without "sha256:")."""
    key = image_key()
    path = os.path.join(CACHE_DIR, f"image-{key}.tar")
    meta = path[:-4] + ".json"
    if os.path.exists(path) and os.path.exists(meta):
        with open(meta) as f:
            return path, json.load(f)["id"]
    base = base_rootfs(log)
    with _lock():
        if os.path.exists(path) and os.path.exists(meta):
            with open(meta) as f:
                return path, json.load(f)["id"]
        log(f"writing the {IMAGE} archive (key {key})")
        layer = path + ".layer.tmp"
        try:
            _write_layer(base, layer)
            image_id = _write_archive(layer, path + ".tmp", key)
        finally:
            if os.path.exists(layer):
                os.remove(layer)
        os.replace(path + ".tmp", path)
        with open(meta, "w") as f:
            json.dump({"id": image_id, "key": key, "image": IMAGE}, f)
        # keep a few older archives: another cluster may be loading one right now
        for old in sorted(glob.glob(os.path.join(CACHE_DIR, "image-*.tar")), key=os.path.getmtime)[:-3]:
            for p in (old, old[:-4] + ".json"):
                if os.path.exists(p):
                    os.remove(p)
    return path, image_id


def _write_layer(base, out_path, added=None):
    added = engine_files() if added is None else added
    replaced = {p for p, _, _ in added}
    seen = set()
    with tarfile.open(base, "r:") as src, tarfile.open(out_path, "w:", format=tarfile.PAX_FORMAT) as out:
        for m in src:
            name = m.name[2:] if m.name.startswith("./") else m.name
            if name in (".", "") or name in replaced or m.ischr() or m.isblk():
                continue
            m.name = name
            if m.islnk() and m.linkname.startswith("./"):
                m.linkname = m.linkname[2:]
            seen.add(name.rstrip("/"))
            out.addfile(m, src.extractfile(m) if m.isreg() else None)
        for path, data, mode in added:
            parts = path.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in seen:
                    seen.add(d)
                    out.addfile(_info(d, tarfile.DIRTYPE, 0o755))
            out.addfile(_info(path, tarfile.REGTYPE, mode, len(data)), io.BytesIO(data))
        if "usr/local/bin/python" not in seen and "usr/bin/python" not in seen:
            link = _info("usr/local/bin/python", tarfile.SYMTYPE, 0o777)
            link.linkname = "/usr/bin/python3"
            out.addfile(link)


def _info(name, kind, mode, size=0):
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.size, ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = kind, mode, size, MTIME, 0, 0, "root", "root"
    return ti


def _write_archive(layer, out_path, key, ref=IMAGE, config_extra=None, made_by="debootstrap " + SUITE + " + fake engine"):
    h = hashlib.sha256()
    with open(layer, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    diff_id = h.hexdigest()
    created = "2023-11-14T22:13:20Z"
    config = {
        "architecture": "amd64", "os": "linux", "created": created,
        "config": {"Env": ENV, "Cmd": ["/bin/sh"], "WorkingDir": "/",
                   "Labels": {"org.inkctl.fake-engine": key}, **(config_extra or {})},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": created, "created_by": f"tests/cluster/image.py: {made_by}"}],
    }
    cfg = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    image_id = _sha(cfg)
    manifest = json.dumps([{"Config": f"{image_id}.json", "RepoTags": [ref], "Layers": [f"{diff_id}/layer.tar"]}]).encode()
    repo, _, tag = ref.rpartition(":")
    repositories = json.dumps({repo: {tag: diff_id}}).encode()
    with tarfile.open(out_path, "w:", format=tarfile.PAX_FORMAT) as out:
        out.addfile(_info(f"{image_id}.json", tarfile.REGTYPE, 0o644, len(cfg)), io.BytesIO(cfg))
        out.addfile(_info(diff_id, tarfile.DIRTYPE, 0o755))
        with open(layer, "rb") as f:
            out.addfile(_info(f"{diff_id}/layer.tar", tarfile.REGTYPE, 0o644, os.path.getsize(layer)), f)
        out.addfile(_info("manifest.json", tarfile.REGTYPE, 0o644, len(manifest)), io.BytesIO(manifest))
        out.addfile(_info("repositories", tarfile.REGTYPE, 0o644, len(repositories)), io.BytesIO(repositories))
    return image_id


# ---------------------------------------------------------------- loading

def docker_has(sock, image_id, ref=IMAGE):
    status, body = docker_api(sock, "GET", f"/images/{ref}/json")
    return status == 200 and json.loads(body).get("Id") == f"sha256:{image_id}"


def load_docker(sock, path, image_id):
    if docker_has(sock, image_id):
        return False
    run(["docker", "-H", f"unix://{sock}", "load", "-q", "-i", path], timeout=600)
    if not docker_has(sock, image_id):
        raise HarnessError(f"{IMAGE} did not load with id {image_id} into {sock}")
    return True


def load_podman(exec_fn, path, image_id):
    """exec_fn(argv) runs argv as the podman host (its namespaces and environment)."""
    cp = exec_fn(["podman", "image", "inspect", "--format", "{{.Id}}", IMAGE])
    if cp.returncode == 0 and cp.stdout.strip() == image_id:
        return False
    cp = exec_fn(["podman", "load", "-q", "-i", path])
    if cp.returncode != 0:
        raise HarnessError(f"podman load failed: {cp.stderr.strip()[-1500:]}")
    return True
