"""Runs ON a host, inside the recipe's engine image: python3 onhost.py scan|fetch|serve JOB.

Standard library only (the engine image has Python; nothing is installed on the host, and no
huggingface_hub version matters). inkctl uploads this file and a job (JSON: the manifest, the
cache path, what to fetch and from where) to the host's state dir and runs it with the
container runtime. Secrets (the copy token, the HF token) arrive in the environment from a
0600 env file, never on a command line. Every answer is JSON lines on stdout.

The Hub cache layout is huggingface_hub's: models--org--name/blobs/<etag> (sha256 for LFS
files, the git blob id for others), snapshots/<commit>/<path> -> ../../blobs/<etag>,
refs/<branch> holding the commit, and blobs/<etag>.incomplete while a download runs (the
partial file a later run resumes with an HTTP Range request).

scan   what the cache has: per file ok | missing | truncated | altered | unlinked, the bytes
       of a partial download, and the free space; --hash re-hashes every present file
fetch  get the job's files from the Hub or from a peer, resuming partial files, hashing as the
       bytes stream, checking size and hash before a file takes its place
serve  a peer's sender: bound to one address, serves only the job's blobs to requests that
       carry the token, exits when idle
"""

import hashlib
import hmac
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 1 << 20
PROGRESS_EVERY_S = 0.25
TOKEN_ENV = "INKCTL_WEIGHTS_TOKEN"
HUB_TOKEN_ENVS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
OUT_LOCK = threading.Lock()


def say(**event):
    with OUT_LOCK:
        sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
        sys.stdout.flush()


class Layout:
    def __init__(self, job):
        self.root = os.path.join(job["cache"], job["folder"])
        self.revision = job["revision"]
        self.ref = job.get("ref") or ""
        self.files = {f["path"]: f for f in job["files"]}

    def blob(self, f):
        return os.path.join(self.root, "blobs", etag(f))

    def link(self, f):
        return os.path.join(self.root, "snapshots", self.revision, *f["path"].split("/"))

    def place(self, f):
        """Point the snapshot's path at the blob (relative, as huggingface_hub does)."""
        link = self.link(f)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        target = os.path.relpath(self.blob(f), os.path.dirname(link))
        if os.path.islink(link) or os.path.exists(link):
            if os.path.islink(link) and os.readlink(link) == target:
                return
            os.remove(link)
        os.symlink(target, link)

    def write_ref(self):
        if self.ref and self.ref != self.revision:
            path = os.path.join(self.root, "refs", self.ref)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = path + ".inkctl-tmp"
            with open(tmp, "w") as fh:
                fh.write(self.revision)
            os.replace(tmp, path)


def etag(f):
    return f.get("sha256") or f["blob_id"]


def hasher(f):
    if f.get("sha256"):
        return hashlib.sha256()
    h = hashlib.sha1()
    h.update(b"blob %d\0" % f["size"])  # git's blob id
    return h


def free_bytes(path):
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    st = os.statvfs(path or "/")
    return st.f_bavail * st.f_frsize


def hash_file(path, f, upto=None):
    h = hasher(f)
    with open(path, "rb") as fh:
        left = upto
        while True:
            block = fh.read(CHUNK if left is None else min(CHUNK, left))
            if not block:
                break
            h.update(block)
            if left is not None:
                left -= len(block)
    return h


# ------------------------------------------------------------------------------- scan

def scan_one(lay, f, rehash):
    out: dict = {"state": "ok"}
    part = lay.blob(f) + ".incomplete"
    if os.path.exists(part):
        out["partial"] = os.path.getsize(part)
    link = lay.link(f)
    path = link if os.path.exists(link) else lay.blob(f)
    if not os.path.exists(path):
        out["state"] = "missing"
        return out
    size = os.path.getsize(path)
    if size < f["size"]:
        out["state"], out["size"] = "truncated", size
    elif size > f["size"]:
        out["state"], out["size"] = "altered", size
    elif rehash and hash_file(path, f).hexdigest() != etag(f):
        out["state"] = "altered"
    elif path != link or not os.path.islink(link) or os.path.realpath(link) != os.path.realpath(lay.blob(f)):
        out["state"] = "unlinked"
    return out


def scan(job, rehash):
    lay = Layout(job)
    files = sorted(lay.files.values(), key=lambda f: -f["size"])
    with ThreadPoolExecutor(max_workers=4 if rehash else 1) as pool:
        states = dict(zip((f["path"] for f in files), pool.map(lambda f: scan_one(lay, f, rehash), files)))
    say(ev="scan", free=free_bytes(lay.root), files=states)


# ------------------------------------------------------------------------------- fetch

class Progress:
    def __init__(self):
        self.done = 0
        self.lock = threading.Lock()
        self.last = 0.0

    def add(self, n):
        with self.lock:
            self.done += n
            now = time.monotonic()
            if now - self.last >= PROGRESS_EVERY_S:
                self.last = now
                say(ev="progress", bytes=self.done)


class Refused(Exception):
    pass


def open_source(job, f, start):
    src = job["source"]
    headers = {"User-Agent": "inkctl-weights"}
    if src["kind"] == "hub":
        url = "%s/%s/resolve/%s/%s" % (src["url"].rstrip("/"), job["repo"], job["revision"],
                                       urllib.parse.quote(f["path"]))
        token = next((os.environ[k] for k in HUB_TOKEN_ENVS if os.environ.get(k)), None)
        if token:
            headers["Authorization"] = "Bearer " + token
    else:
        url = "%s/blob/%s" % (src["url"].rstrip("/"), etag(f))
        headers["Authorization"] = "Bearer " + os.environ[TOKEN_ENV]
    if start:
        headers["Range"] = "bytes=%d-" % start
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60)
    except urllib.error.HTTPError as e:
        if e.code == 416 and start:
            return None, start  # nothing after start: the partial file is whole, its hash decides
        why = {401: "refused: no or wrong token", 403: "refused: gated or forbidden (token?)",
               404: "not found"}.get(e.code, "HTTP %d" % e.code)
        raise Refused("%s: %s (%s)" % (f["path"], why, src["kind"]))
    return resp, (start if resp.status == 206 else 0)


def fetch_one(job, lay, f, progress):
    blob = lay.blob(f)
    part = blob + ".incomplete"
    os.makedirs(os.path.dirname(blob), exist_ok=True)
    if os.path.exists(blob) and os.path.getsize(blob) == f["size"] and hash_file(blob, f).hexdigest() == etag(f):
        lay.place(f)  # the blob was right; only the snapshot link was wrong
        return 0
    start = os.path.getsize(part) if os.path.exists(part) else 0
    if start > f["size"]:
        os.remove(part)
        start = 0
    # a partial file that is already whole (the copy stopped before its rename) needs no request
    resp, start = (None, start) if start == f["size"] else open_source(job, f, start)
    h = hash_file(part, f, upto=start) if start else hasher(f)
    got = start
    with open(part, "r+b" if start else "wb") as out:
        out.seek(start)
        out.truncate()
        if resp is not None:
            with resp:
                while True:
                    block = resp.read(CHUNK)
                    if not block:
                        break
                    out.write(block)
                    h.update(block)
                    got += len(block)
                    progress.add(len(block))
                    if got > f["size"]:
                        break
        out.flush()
        os.fsync(out.fileno())
    if got != f["size"]:
        if got > f["size"]:
            os.remove(part)
        raise Refused("%s: got %d bytes, the pin says %d%s" % (f["path"], got, f["size"],
                      "; the partial file is kept and a rerun resumes it" if got < f["size"] else ""))
    if h.hexdigest() != etag(f):
        os.remove(part)
        raise Refused("%s: %s is %s, the pin says %s: the file was altered on the way or at the source"
                      % (f["path"], "sha256" if f.get("sha256") else "git blob id", h.hexdigest(), etag(f)))
    os.replace(part, blob)
    lay.place(f)
    say(ev="file", path=f["path"], bytes=f["size"] - start)
    return f["size"] - start


def fetch(job):
    lay = Layout(job)
    want = [lay.files[p] for p in job["want"]]
    progress = Progress()
    errors = []

    def one(f):
        try:
            fetch_one(job, lay, f, progress)
        except Refused as e:
            errors.append(str(e))
        except OSError as e:
            why = "disk full" if e.errno == 28 else (e.strerror or str(e))
            errors.append("%s: %s" % (f["path"], why))

    with ThreadPoolExecutor(max_workers=max(1, int(job.get("streams", 2)))) as pool:
        list(pool.map(one, sorted(want, key=lambda f: -f["size"])))
    for f in lay.files.values():  # files that were already right: make sure the snapshot names them
        if f["path"] not in job["want"] and os.path.exists(lay.blob(f)):
            lay.place(f)
    lay.write_ref()
    say(ev="progress", bytes=progress.done)
    if errors:
        for e in errors:
            say(ev="error", why=e)
        sys.exit(1)
    say(ev="done", bytes=progress.done)


# ------------------------------------------------------------------------------- serve

def serve(job):
    lay = Layout(job)
    blobs = {etag(f): (lay.blob(f), f["size"]) for f in lay.files.values()}
    token = os.environ[TOKEN_ENV].encode()
    idle_s = float(job.get("idle_s", 300))
    rate = float(job.get("rate") or 0)
    state = {"last": time.monotonic(), "active": 0}
    guard = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            with guard:
                state["active"] += 1
            try:
                self._get()
            finally:
                with guard:
                    state["active"] -= 1
                    state["last"] = time.monotonic()

        def _get(self):
            auth = self.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(auth, b"Bearer " + token):
                return self._fail(401)
            if not self.path.startswith("/blob/") or self.path[6:] not in blobs:
                return self._fail(404)
            path, size = blobs[self.path[6:]]
            start = 0
            rng = self.headers.get("Range", "")
            if rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1] or 0)
                if start >= size:
                    return self._fail(416)
            self.send_response(206 if start else 200)
            self.send_header("Content-Length", str(size - start))
            if start:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size))
            self.end_headers()
            with open(path, "rb") as fh:
                if not rate:
                    self.connection.sendfile(fh, start, size - start)
                    return
                t0, sent = time.monotonic(), 0
                while sent < size - start:  # paced: --bwlimit
                    n = self.connection.sendfile(fh, start + sent, min(1 << 18, size - start - sent))
                    if not n:
                        return
                    sent += n
                    ahead = sent / rate - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)

        def _fail(self, code):
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer((job["bind"], int(job.get("port", 0))), Handler)
    server.daemon_threads = True
    say(ev="listening", address=job["bind"], port=server.server_address[1])

    def idle():
        while True:
            time.sleep(1)
            with guard:
                if state["active"] == 0 and time.monotonic() - state["last"] > idle_s:
                    server.shutdown()
                    return

    threading.Thread(target=idle, daemon=True).start()
    server.serve_forever()


def main(argv):
    if len(argv) < 2 or argv[0] not in ("scan", "fetch", "serve"):
        sys.stderr.write("usage: onhost.py scan|fetch|serve JOB [--hash]\n")
        return 2
    with open(argv[1]) as fh:
        job = json.load(fh)
    if argv[0] == "scan":
        scan(job, "--hash" in argv[2:])
    elif argv[0] == "fetch":
        fetch(job)
    else:
        serve(job)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
