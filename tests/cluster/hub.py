"""A small Hugging Face Hub stand-in for the weights tests: repository info with file metadata
and file downloads, with the headers huggingface_hub reads, serving generated models.

Endpoints (as huggingface_hub calls them):
  GET  /api/models/{repo}[/revision/{rev}][?blobs=true]   id, sha, siblings (rfilename, size,
       blobId, lfs {size, sha256, pointerSize}); 404 + X-Error-Code RevisionNotFound / RepoNotFound
  HEAD|GET /{repo}/resolve/{rev}/{path}   small files: 200 with ETag (git blob id), X-Repo-Commit,
       Content-Length; LFS files: 302 to /cdn/{sha256} with X-Linked-Etag, X-Linked-Size,
       X-Repo-Commit (HEAD does not follow it, as on the real Hub)
  GET  /cdn/{sha256}   the bytes, honouring Range (206 + Content-Range)
A gated repository answers 401 (no token) or 403 (another token) with X-Error-Code GatedRepo.

The hub counts the bytes it sends and the Range requests it gets (``stats``), and can be
slowed (``rate`` bytes/s per connection) so a test can interrupt a download midway.
Files live on disk (``root``), so a model larger than memory streams like the real thing.
"""

import hashlib
import json
import os
import random
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class RepoFile:
    path: str
    disk: str
    size: int
    sha256: str
    blob_id: str
    lfs: bool


@dataclass
class Repo:
    name: str
    commit: str
    files: dict = field(default_factory=dict)  # path -> RepoFile
    gated_token: str | None = None  # gated: only this token may read it


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_model(root, name, shards=3, shard_mib=2, seed=0, gated_token=None, commit_salt=""):
    """Generate a multi-shard safetensors-style model on disk: config, tokenizer, generation
    config, an index naming the shards, and files engines never read (original/, a .bin next
    to the safetensors, a .gguf) that a pin must leave out."""
    rng = random.Random(f"{name}:{seed}")
    base = os.path.join(root, name.replace("/", "--"))
    files = {}

    def add(path, data=None, size=None, lfs=False):
        disk = os.path.join(base, path)
        if data is None:  # a large file: written in blocks, hashed as it goes
            h = hashlib.sha256()
            g = hashlib.sha1(b"blob %d\0" % size)
            os.makedirs(os.path.dirname(disk), exist_ok=True)
            with open(disk, "wb") as f:
                left = size
                while left:
                    block = rng.randbytes(min(left, 1 << 20))
                    f.write(block)
                    h.update(block)
                    g.update(block)
                    left -= len(block)
            sha, blob = h.hexdigest(), g.hexdigest()
        else:
            _write(disk, data)
            size, sha = len(data), hashlib.sha256(data).hexdigest()
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        # an LFS file's git blob is its pointer; small files are plain git blobs
        files[path] = RepoFile(path, disk, size, sha, blob, lfs)

    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    weight_map = {f"layers.{i}.weight": n for i, n in enumerate(names)}
    add("config.json", json.dumps({"model_type": "fake", "num_hidden_layers": shards}).encode())
    add("generation_config.json", b'{"temperature": 0.6}\n')
    add("tokenizer.json", json.dumps({"model": {"vocab": {f"t{i}": i for i in range(200)}}}).encode())
    add("tokenizer_config.json", b'{"chat_template": "{{ messages }}"}\n')
    add("model.safetensors.index.json", json.dumps({"metadata": {}, "weight_map": weight_map}).encode())
    for n in names:
        add(n, size=shard_mib << 20, lfs=True)
    add("pytorch_model.bin", size=1 << 16, lfs=True)
    add("model.gguf", size=1 << 16, lfs=True)
    add("original/consolidated.00.pth", size=1 << 16, lfs=True)
    add("README.md", b"# fake model for inkctl's tests\n")
    commit = hashlib.sha1(json.dumps(sorted((p, f.sha256) for p, f in files.items())).encode()
                          + commit_salt.encode()).hexdigest()
    return Repo(name, commit, files, gated_token)


class Hub:
    """``cdn``: another address (as the real Hub's CDN host) that LFS files redirect to, served
    by a second server that records the headers it was sent (``cdn_seen``). ``drop``: path ->
    how many of its next downloads are cut after ``drop_after`` bytes (a dropped connection)."""

    def __init__(self, address="127.0.0.1", port=0, rate=None, cdn=None):
        self.address, self.port, self.rate = address, port, rate
        self.cdn, self.cdn_port, self.cdn_seen = cdn, 0, []
        self.repos = {}
        self.stats = {"bytes": 0, "ranges": 0, "gets": 0, "unauthorized": 0, "dropped": 0}
        self.drop, self.drop_after = {}, 1 << 16
        self._lock = threading.Lock()
        self._server = None
        self._cdn_server = None

    @property
    def url(self):
        return f"http://{self.address}:{self.port}"

    def add(self, repo):
        self.repos[repo.name] = repo
        return repo

    def count(self, key, n=1):
        with self._lock:
            self.stats[key] += n

    def start(self):
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self._server = ThreadingHTTPServer((self.address, self.port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True, name="hub").start()
        if self.cdn:
            self._cdn_server = ThreadingHTTPServer((self.cdn, 0), Handler)
            self._cdn_server.daemon_threads = True
            self.cdn_port = self._cdn_server.server_address[1]
            threading.Thread(target=self._cdn_server.serve_forever, daemon=True, name="cdn").start()
        return self

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._cdn_server is not None:
            self._cdn_server.shutdown()
            self._cdn_server.server_close()
            self._cdn_server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub = None

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._route(head=True)

    def do_GET(self):
        self._route(head=False)

    # --------------------------------------------------------------------- helpers
    def _send(self, code, body=b"", headers=None, head=False):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and not head:
            self.wfile.write(body)

    def _error(self, code, error_code, message, head=False):
        self._send(code, json.dumps({"error": message}).encode(),
                   {"X-Error-Code": error_code, "X-Error-Message": message, "Content-Type": "application/json"}, head)

    def _token(self):
        auth = self.headers.get("Authorization", "")
        return auth[7:] if auth.startswith("Bearer ") else None

    def _allowed(self, repo, head):
        if repo.gated_token is None:
            return True
        token = self._token()
        if token == repo.gated_token:
            return True
        self.hub.count("unauthorized")
        if token is None:
            self._error(401, "GatedRepo", "Access to model %s is restricted. You must be authenticated to access it." % repo.name, head)
        else:
            self._error(403, "GatedRepo", "Access to model %s is restricted and you are not in the authorized list." % repo.name, head)
        return False

    def _repo(self, name, head):
        repo = self.hub.repos.get(name)
        if repo is None:
            self._error(401 if self._token() is None else 404, "RepoNotFound", "Repository not found", head)
        return repo

    def _rev_ok(self, repo, rev, head):
        if rev in ("main", repo.commit):
            return True
        self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        return False

    # --------------------------------------------------------------------- routes
    def _route(self, head):
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path)
        if path.startswith("/api/models/"):
            rest = path[len("/api/models/"):]
            name, _, rev = rest.partition("/revision/")
            return self._info(name, rev or "main", head)
        if path.startswith("/cdn/"):
            if self.server.server_address[1] == self.hub.cdn_port:
                with self.hub._lock:
                    self.hub.cdn_seen.append(dict(self.headers.items()))
            return self._blob(path[5:], head)
        parts = path.lstrip("/").split("/")
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]), head)
        self._send(404, b"not found", head=head)

    def _info(self, name, rev, head):
        repo = self._repo(name, head)
        if repo is None or not self._allowed(repo, head) or not self._rev_ok(repo, rev, head):
            return
        siblings = []
        for f in repo.files.values():
            s = {"rfilename": f.path, "size": f.size, "blobId": f.blob_id}
            if f.lfs:
                s["lfs"] = {"size": f.size, "sha256": f.sha256, "pointerSize": 134}
            siblings.append(s)
        doc = {"_id": repo.commit[:24], "id": repo.name, "modelId": repo.name, "sha": repo.commit, "private": False,
               "gated": "manual" if repo.gated_token else False, "disabled": False, "downloads": 0, "likes": 0,
               "tags": [], "siblings": siblings, "lastModified": "2026-11-30T12:00:00.000Z"}
        self._send(200, json.dumps(doc).encode(), {"Content-Type": "application/json"}, head)

    def _resolve(self, name, rev, path, head):
        repo = self._repo(name, head)
        if repo is None or not self._allowed(repo, head) or not self._rev_ok(repo, rev, head):
            return
        f = repo.files.get(path)
        if f is None:
            return self._error(404, "EntryNotFound", f"{path} does not exist on {rev}", head)
        common = {"X-Repo-Commit": repo.commit}
        if f.lfs:
            where = f"{self.hub.cdn}:{self.hub.cdn_port}" if self.hub.cdn else f"{self.hub.address}:{self.hub.port}"
            loc = f"http://{where}/cdn/{f.sha256}"
            return self._send(302, b"", {**common, "Location": loc, "X-Linked-Etag": f'"{f.sha256}"',
                                         "X-Linked-Size": str(f.size), "ETag": f'"{f.blob_id}"'}, head)
        self._stream(f, head, {**common, "ETag": f'"{f.blob_id}"'})

    def _blob(self, sha, head):
        for repo in self.hub.repos.values():
            for f in repo.files.values():
                if f.lfs and f.sha256 == sha:
                    return self._stream(f, head, {"ETag": f'"{sha}"'})
        self._send(404, b"no such blob", head=head)

    def _stream(self, f, head, headers):
        start = 0
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1] or 0)
            if start >= f.size:
                return self._send(416, b"", {"Content-Range": f"bytes */{f.size}"}, head)
            self.hub.count("ranges")
        self.send_response(206 if start else 200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(f.size - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{f.size - 1}/{f.size}")
        self.end_headers()
        if head:
            return
        self.hub.count("gets")
        rate = self.hub.rate
        cut = None
        with self.hub._lock:
            if self.hub.drop.get(f.path, 0) > 0:
                self.hub.drop[f.path] -= 1
                self.hub.stats["dropped"] += 1
                cut = self.hub.drop_after
        with open(f.disk, "rb") as fh:
            fh.seek(start)
            t0 = time.monotonic()
            sent = 0
            while True:
                block = fh.read(1 << 16 if rate or cut is not None else 1 << 20)
                if not block:
                    break
                try:
                    self.wfile.write(block)
                except OSError:
                    return
                sent += len(block)
                self.hub.count("bytes", len(block))
                if cut is not None and sent >= cut:
                    self.close_connection = True
                    self.connection.shutdown(2)  # a dropped download: the rest never comes
                    return
                if rate:
                    ahead = sent / rate - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)


def main(argv=None):
    """python -m tests.cluster.hub --address A --port P --root DIR [--repo NAME --shards N --shard-mib M]"""
    import argparse

    p = argparse.ArgumentParser(prog="python -m tests.cluster.hub")
    p.add_argument("--address", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--root", required=True)
    p.add_argument("--repo", default="test/weights-model")
    p.add_argument("--shards", type=int, default=3)
    p.add_argument("--shard-mib", type=int, default=2)
    a = p.parse_args(argv)
    hub = Hub(a.address, a.port)
    hub.add(make_model(a.root, a.repo, a.shards, a.shard_mib))
    hub.start()
    print(hub.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
