"""Runs ON a host (its python3, or the engine image's): python3 onhost.py scan|fetch|serve|relay JOB.

Standard library only (the engine image has Python; nothing is installed on the host, and no
huggingface_hub version matters). The same relay moves a plain directory of files (a compile
cache) when the job says ``"layout": "plain"``. inkctl uploads this file and a job (JSON: the manifest, the
cache path, what to fetch and from where) to the host's state dir and runs it (see below).
Secrets (the copy token, the HF token) arrive in the environment from a 0600 env file (a
container) or in the 0600 job file itself (a host process), never on a command line. Every
answer is JSON lines on stdout.

The Hub cache layout is huggingface_hub's: models--org--name/blobs/<etag> (sha256 for LFS
files, the git blob id for others), snapshots/<commit>/<path> -> ../../blobs/<etag>,
refs/<branch> holding the commit, and blobs/<etag>.incomplete while a download runs (the
partial file a later run resumes with an HTTP Range request).

scan   what the cache has: per file ok | missing | truncated | altered | unlinked, the bytes
       of a partial download, and the free space; --hash re-hashes every present file
relay  one link of the copy chain: serve every blob of the job (bound to one address, only to
       requests that carry the token) and, at the same time, fetch the blobs this host lacks
       from its sources in order (the host before it in the chain, then the ones before that;
       the Hub last). A blob being fetched is served to the next host AS ITS BYTES ARRIVE, so
       the chain moves the model once per link, all links at once. Each blob is fetched once
       (two paths with one content share it), hashed as it arrives, checked against the pin
       before it takes its place. A source that stops answering is asked whether it lives;
       a dead one is named and the host before it is asked instead, from the bytes already here.
fetch  relay without serving; serve: relay with nothing to fetch

Sent as one file: ``say``, ``wait_for`` and ``PROGRESS_EVERY_S`` are the image relay's too
(``execute/hosts/hostside.py``), inlined in place of the line that imports them when inkctl
sends this file (``execute/hosts/program.py``).

Run in a container (``<runtime> run --rm``, the engine image's python3) or, where the host has
a python3 of its own, as a plain process of the SSH session (no container to start or remove:
the secrets come in the 0600 job file, read and removed at start; the session's end,
SIGHUP, ends it; ``--pid-dir`` is where it says it runs, so the relay of a later run ends one
left behind by a host that was cut off and healed).
"""

import contextlib
import hashlib
import hmac
import http.client
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from inkctl.execute.hosts.hostside import PROGRESS_EVERY_S, say, wait_for  # inlined when sent: hosts/program.py

CHUNK = 1 << 20
TOKEN_ENV = "INKCTL_WEIGHTS_TOKEN"
HUB_TOKEN_ENVS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
PEER_TIMEOUT_S = 15.0  # no byte from a peer for this long: is it alive?
PING_TIMEOUT_S = 5.0
HUB_TIMEOUT_S = 60.0
HUB_TRIES = 4  # a dropped Hub download is resumed this many times in all
STALL_TRIES = 40  # a live peer that sends nothing: ask again this many times (x PEER_TIMEOUT_S)
SOURCES_WAIT_S = 300.0


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


class PlainLayout:
    """A plain directory of files (a compile cache, ``job["layout"] == "plain"``): each file at
    its own path under ``dir``. What this host fetches arrives under ``incoming`` (same paths),
    whole and checked, and inkctl moves it into ``dir`` once every file is there: the directory
    the engines read never holds a partial file."""

    def __init__(self, job):
        self.root = job["dir"]
        self.incoming = job["incoming"]
        self.files = {f["path"]: f for f in job["files"]}
        self.want = set(job.get("want", []))

    def blob(self, f):
        return os.path.join(self.incoming if f["path"] in self.want else self.root, *f["path"].split("/"))

    def link(self, f):
        return self.blob(f)

    def place(self, f):
        """A wanted file whose content arrived under another path (two files, one hash): a copy."""
        target = self.blob(f)
        if os.path.exists(target):
            return
        for g in self.files.values():
            if g["path"] in self.want and etag(g) == etag(f) and os.path.exists(self.blob(g)):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(self.blob(g), "rb") as src, open(target + ".incomplete", "wb") as out:
                    while True:
                        block = src.read(CHUNK)
                        if not block:
                            break
                        out.write(block)
                os.replace(target + ".incomplete", target)
                return

    def write_ref(self):
        pass


def layout(job):
    return PlainLayout(job) if job.get("layout") == "plain" else Layout(job)


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
    lay = layout(job)
    files = sorted(lay.files.values(), key=lambda f: -f["size"])
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4 if rehash else 1) as pool:
        states = dict(zip((f["path"] for f in files), pool.map(lambda f: scan_one(lay, f, rehash), files)))
    say(ev="scan", free=free_bytes(lay.root), files=states)


# ------------------------------------------------------------------------------- the blobs here

class Blob:
    """One blob of this host: complete on disk ("have"), or being fetched ("want": its bytes
    ``written`` so far, served to the next host as they grow), then "done" or "failed"."""

    def __init__(self, f, path, state):
        self.f, self.size, self.path, self.state = f, f["size"], path, state
        self.written = 0
        self.why = ""
        self.hash = None  # of the bytes written so far


class Store:
    def __init__(self, lay, want_paths):
        self.lay = lay
        self.busy = False  # fetching: never idle
        self.cond = threading.Condition()
        self.blobs = {}  # type: dict[str, Blob]
        want = set(want_paths)
        for f in lay.files.values():
            e = etag(f)
            if f["path"] in want and (e not in self.blobs or self.blobs[e].state != "want"):
                self.blobs[e] = Blob(f, lay.blob(f), "want")
            elif e not in self.blobs or (self.blobs[e].state == "absent" and os.path.exists(lay.blob(f))):
                # (a plain layout holds one content under several paths: the one that exists)
                self.blobs[e] = Blob(f, lay.blob(f), "have" if os.path.exists(lay.blob(f)) else "absent")

    def wanted(self):
        return sorted((b for b in self.blobs.values() if b.state == "want"), key=lambda b: (-b.size, etag(b.f)))

    def grew(self, b, written):
        with self.cond:
            b.written = written
            self.cond.notify_all()

    def end(self, b, state, why=""):
        with self.cond:
            b.state, b.why = state, why
            self.cond.notify_all()

    def open_for(self, b, start):
        """(file object, state) once bytes after ``start`` are there or the blob ended."""
        with self.cond:
            while b.state == "want" and b.written <= start:
                self.cond.wait(1.0)
            if b.state == "failed":
                return None, b.why
            path = b.path if b.state in ("have", "done") else b.path + ".incomplete"
            return open(path, "rb"), ""

    def available(self, b, pos, deadline):
        """Bytes readable at ``pos`` (waiting for more while the fetch runs); 0 at the end."""
        with self.cond:
            while b.state == "want" and b.written <= pos and time.monotonic() < deadline:
                self.cond.wait(1.0)
            if b.state == "failed":
                return -1
            end = b.size if b.state in ("have", "done") else b.written
            return max(0, end - pos)


# ------------------------------------------------------------------------------- serve

def serve(store, job, token):
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
            if self.path == "/ping":  # alive? (no token: it says nothing but "yes")
                return self._fail(204)
            auth = self.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(auth, b"Bearer " + token):
                return self._fail(401)
            b = store.blobs.get(self.path[6:]) if self.path.startswith("/blob/") else None
            if b is None or b.state == "absent":
                return self._fail(404)
            start = 0
            rng = self.headers.get("Range", "")
            if rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1] or 0)
                if start >= b.size:
                    return self._fail(416)
            fh, why = store.open_for(b, start)
            if fh is None:
                return self._fail(410, why)
            with fh:
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(b.size - start))
                if start:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, b.size - 1, b.size))
                self.end_headers()
                self._send(b, fh, start)

        def _send(self, b, fh, pos):
            t0, sent = time.monotonic(), 0
            while pos < b.size:
                n = store.available(b, pos, time.monotonic() + 3600)
                if n <= 0:
                    self.close_connection = True  # the fetch here failed: the next host asks again
                    return
                n = self.connection.sendfile(fh, pos, min(n, 1 << 18 if rate else 1 << 22))
                if not n:
                    return
                pos += n
                sent += n
                if rate:  # paced: --bwlimit
                    ahead = sent / rate - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)

        def _fail(self, code, why=""):
            self.send_response(code)
            if why:
                self.send_header("X-Inkctl-Why", why.encode("ascii", "replace").decode()[:300])
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer((job["bind"], int(job.get("port", 0))), Handler)
    server.daemon_threads = True
    idle_s = float(job.get("idle_s", 300))

    def idle():
        while True:
            time.sleep(1)
            with guard:
                if state["active"] == 0 and not store.busy and time.monotonic() - state["last"] > idle_s:
                    os._exit(0)

    threading.Thread(target=idle, daemon=True).start()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


# ------------------------------------------------------------------------------- fetch

class Progress:
    def __init__(self):
        self.done = 0
        self.read_s = 0.0  # waiting for the source's bytes
        self.write_s = 0.0  # writing them here
        self.lock = threading.Lock()
        self.last = 0.0

    def add(self, n, read_s, write_s):
        with self.lock:
            self.done += n
            self.read_s += read_s
            self.write_s += write_s
            now = time.monotonic()
            if now - self.last >= PROGRESS_EVERY_S:
                self.last = now
                self.report()

    def report(self, ev="progress"):
        say(ev=ev, bytes=self.done, read_s=round(self.read_s, 3), write_s=round(self.write_s, 3))


class Refused(Exception):
    """This file cannot come from this source (no retry there)."""


class Dropped(Exception):
    """The source stopped sending; what arrived is kept."""


class HubRefused(Refused):
    """The Hub refused the token (or its absence): no other file is asked for."""


def opener():
    """urllib's opener (imported on first use: a relay says where it listens sooner) that
    follows redirects, but a redirect to another host (the Hub's CDN) does not get the
    Authorization header: the token is for the Hub only (huggingface_hub does the same)."""
    if not OPENER:
        import urllib.request

        class SameHostRedirects(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, req, fp, code, msg, headers, newurl):
                new = super().redirect_request(req, fp, code, msg, headers, newurl)
                if new is not None and _origin(newurl) != _origin(req.full_url):
                    for k in [k for k in new.headers if k.lower() == "authorization"]:
                        del new.headers[k]
                return new

        OPENER.append(urllib.request.build_opener(SameHostRedirects))
    return OPENER[0]


def _origin(url):
    u = urllib.parse.urlsplit(url)
    return (u.scheme, (u.hostname or "").lower(), u.port or {"http": 80, "https": 443}.get(u.scheme))


OPENER = []  # type: list


class Sources:
    """Where this host's blobs come from, in order; peers found dead are skipped by every blob."""

    def __init__(self, doc):
        self.list = doc["sources"]  # [{"name", "kind": "peer"|"hub", "url"}]
        self.per_blob = doc.get("per_blob", {})  # etag -> indexes into list (default: all, in order)
        self.dead = set()
        self.hub_refused = ""
        self.lock = threading.Lock()
        self.last = {}  # etag -> why the last source failed

    def order(self, b):
        idx = self.per_blob.get(etag(b.f), range(len(self.list)))
        return [self.list[i] for i in idx]


def open_source(job, src, f, start):
    import urllib.error
    import urllib.request

    headers = {"User-Agent": "inkctl-weights"}
    if src["kind"] == "hub":
        url = "%s/%s/resolve/%s/%s" % (src["url"].rstrip("/"), job["repo"], job["revision"],
                                       urllib.parse.quote(f["path"]))
        token = next((os.environ[k] for k in HUB_TOKEN_ENVS if os.environ.get(k)), None)
        if token:
            headers["Authorization"] = "Bearer " + token
        timeout = HUB_TIMEOUT_S
    else:
        url = "%s/blob/%s" % (src["url"].rstrip("/"), etag(f))
        headers["Authorization"] = "Bearer " + os.environ[TOKEN_ENV]
        timeout = PEER_TIMEOUT_S
    if start:
        headers["Range"] = "bytes=%d-" % start
    try:
        resp = opener().open(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and start:
            return None, start  # nothing after start: the partial file is whole, its hash decides
        if src["kind"] == "hub" and e.code in (401, 403):
            token_set = any(os.environ.get(k) for k in HUB_TOKEN_ENVS)
            raise HubRefused("the Hub refused %s (HTTP %d): %s" % (
                job["repo"], e.code, "the token was refused" if token_set else "no token was sent"))
        if e.code == 410:
            raise Refused("%s could not get it: %s" % (src["name"], e.headers.get("X-Inkctl-Why") or "failed"))
        if e.code >= 500 and src["kind"] == "hub":
            raise Dropped("HTTP %d" % e.code)
        why = {401: "refused: wrong copy token", 404: "not found"}.get(e.code, "HTTP %d" % e.code)
        raise Refused("%s (%s)" % (why, src["name"]))
    except (OSError, urllib.error.URLError, http.client.HTTPException) as e:
        raise Dropped(_why(e))
    return resp, (start if resp.status == 206 else 0)


def _why(e):
    r = getattr(e, "reason", None)
    return str(r if r is not None else e) or type(e).__name__


def alive(src):
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(src["url"].rstrip("/") + "/ping", timeout=PING_TIMEOUT_S):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, urllib.error.URLError):
        return False


def pull(job, store, b, src, progress):
    """Fetch the rest of ``b`` from ``src`` into its .incomplete file; returns when the file
    has every byte (or raises Dropped / Refused)."""
    part = b.path + ".incomplete"
    start = b.written
    resp, start = (None, start) if start == b.size else open_source(job, src, b.f, start)
    if start != b.written:  # the source ignored the Range: from the start
        store.grew(b, start)
        b.hash = hasher(b.f)
    with open(part, "r+b") as out:
        out.seek(start)
        out.truncate()
        got = start
        if resp is None:
            return
        read = getattr(resp, "read1", resp.read)
        with resp:
            while got < b.size:
                t0 = time.monotonic()
                try:
                    block = read(min(CHUNK, b.size - got))  # what has come, up to CHUNK: forwarded at once
                except (OSError, ValueError, http.client.HTTPException) as e:
                    raise Dropped(_why(e))
                t1 = time.monotonic()
                if not block:
                    raise Dropped("the connection ended after %d of %d bytes" % (got, b.size))
                out.write(block)
                out.flush()
                b.hash.update(block)  # hashed as it arrives
                got += len(block)
                store.grew(b, got)
                progress.add(len(block), t1 - t0, time.monotonic() - t1)
        os.fsync(out.fileno())


def _pull_from(job, store, sources, b, src, progress, last_error):
    """True once ``b`` has every byte from ``src``; False to try the next source (the reason
    in ``sources.last``). A dropped Hub download resumes a few times; a peer that stops
    sending is asked whether it lives: dead, it is named and skipped from then on."""
    tries = 0
    while True:
        try:
            pull(job, store, b, src, progress)
            return True
        except HubRefused as e:
            with sources.lock:
                sources.hub_refused = sources.hub_refused or str(e)
            raise
        except Refused as e:
            sources.last[etag(b.f)] = str(e)
            return False
        except Dropped as e:
            tries += 1
            sources.last[etag(b.f)] = "%s: %s" % (src["name"], e)
            if src["kind"] == "hub":
                if tries >= HUB_TRIES:
                    return False
                say(ev="retry", path=b.f["path"], source="hub", why=str(e), at=b.written)
                time.sleep(min(4.0, 0.5 * 2 ** tries))
                continue
            if not alive(src):
                with sources.lock:
                    new = src["name"] not in sources.dead
                    sources.dead.add(src["name"])
                if new:
                    say(ev="dead", host=src["name"], why=str(e))
                return False
            if tries >= STALL_TRIES:
                return False


def fetch_blob(job, store, sources, b, progress):
    part = b.path + ".incomplete"
    os.makedirs(os.path.dirname(b.path), exist_ok=True)
    if os.path.exists(b.path) and os.path.getsize(b.path) == b.size and hash_file(b.path, b.f).hexdigest() == etag(b.f):
        return "here", 0  # the blob was right; only the snapshot link was wrong
    start = os.path.getsize(part) if os.path.exists(part) else 0
    if start > b.size:
        start = 0
    with open(part, "ab"):
        pass
    b.hash = hash_file(part, b.f, upto=start) if start else hasher(b.f)  # the bytes already here
    store.grew(b, start)
    first = start
    last_error, got_from = "no source", None
    for src in sources.order(b):
        if src["kind"] == "peer" and src["name"] in sources.dead:
            continue
        if src["kind"] == "hub" and sources.hub_refused:
            raise HubRefused(sources.hub_refused)
        if _pull_from(job, store, sources, b, src, progress, last_error):
            got_from = src["name"]
            break
        last_error = sources.last.get(etag(b.f), last_error)
    if got_from is None:
        raise Refused(last_error)
    h = b.hash
    if h.hexdigest() != etag(b.f):
        os.remove(part)
        raise Refused("%s is %s, the pin says %s: the file was altered on the way or at the source"
                      % ("sha256" if b.f.get("sha256") else "git blob id", h.hexdigest(), etag(b.f)))
    with store.cond:  # a reader opens by the state: the rename and the state change are one step
        os.replace(part, b.path)
        b.state = "done"
        store.cond.notify_all()
    return got_from, b.size - first


def fetch_all(job, store, sources, progress):
    errors = []
    lay = store.lay

    def one(b):
        try:
            source, n = fetch_blob(job, store, sources, b, progress)
        except HubRefused as e:
            store.end(b, "failed", str(e))
            errors.append(("hub", str(e)))
            return
        except Refused as e:
            store.end(b, "failed", str(e))
            errors.append((b.f["path"], str(e)))
            return
        except OSError as e:
            why = "disk full" if e.errno == 28 else (e.strerror or str(e))
            store.end(b, "failed", why)
            errors.append((b.f["path"], why))
            return
        for f in lay.files.values():
            if etag(f) == etag(b.f):
                lay.place(f)
                say(ev="file", path=f["path"], bytes=n if f is b.f else 0, source=source)

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, int(job.get("streams", 2)))) as pool:
        list(pool.map(one, store.wanted()))
    for f in lay.files.values():  # files that were already right: make sure the snapshot names them
        if os.path.exists(lay.blob(f)) and store.blobs[etag(f)].state in ("have", "done"):
            lay.place(f)
    lay.write_ref()
    progress.report()
    hub = [why for what, why in errors if what == "hub"]
    if hub:
        say(ev="error", why=hub[0], hub_refused=True, files=len(hub))
    same = {}  # type: dict[str, list[str]]  # one line per reason, not one per file
    for what, why in errors:
        if what != "hub":
            same.setdefault(why, []).append(what)
    for why, paths in same.items():
        say(ev="error", why="%s: %s" % (paths[0] if len(paths) == 1 else "%d files" % len(paths), why), files=paths)
    return not errors


def relay(job, serving=True, fetching=True):
    lay = layout(job)
    store = Store(lay, job.get("want", []) if fetching else [])
    if serving:
        port = serve(store, job, os.environ[TOKEN_ENV].encode())
        say(ev="listening", address=job["bind"], port=port)
    if not fetching:
        threading.Event().wait()
        return 0
    threading.Thread(target=opener, daemon=True).start()  # urllib loads while the sources come
    doc = job.get("sources")
    if doc is None and job.get("source"):  # one source for every blob
        doc = {"sources": [{"name": job["source"]["kind"], **job["source"]}]}
    if doc is None:  # the other hosts' addresses arrive once every sender listens
        doc = wait_for(job["sources_file"], SOURCES_WAIT_S, remove=bool(job.get("remove_sources")))
        if doc is None:
            say(ev="error", why="no sources arrived within %d s" % SOURCES_WAIT_S)
            return 1
    sources = Sources(doc)
    progress = Progress()
    store.busy = True
    try:
        ok = fetch_all(job, store, sources, progress)
        progress.report("done" if ok else "failed")
    finally:
        store.busy = False  # from now on a relay nobody reads from ends once idle
    if serving:  # the next hosts may still be reading: serve until removed (or idle)
        threading.Event().wait()
    return 0 if ok else 1


def end_on_hangup(*own_files):
    """SIGHUP (the SSH session closed) and SIGTERM end the relay at once, also as a container's
    PID 1 (which the kernel spares from signals it has no handler for); ``own_files`` go with it."""
    def bye(signum, frame):
        for path in own_files:
            with contextlib.suppress(OSError):
                os.remove(path)
        os._exit(0)

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, bye)


def end_leftovers(pid_dir, me):
    """End the relays of earlier runs on this host (a run that lost this host left its relay
    behind, maybe still writing the files this one will write); say where this one runs."""
    for name in os.listdir(pid_dir):
        if not (name.startswith("relay-") and name.endswith(".pid")) or name == os.path.basename(me):
            continue
        path = os.path.join(pid_dir, name)
        with contextlib.suppress(OSError, ValueError):  # gone already, or not a pid: nothing to end
            with open(path) as fh:
                pid = int(fh.read().strip() or 0)
            with open("/proc/%d/cmdline" % pid, "rb") as fh:
                ours = b"onhost.py" in fh.read()
            if ours and pid != os.getpid():
                os.kill(pid, signal.SIGKILL)
                say(ev="ended_leftover", pid=pid)
        for ext in (".pid", ".json", ".sources", ".env"):  # what that run left beside it
            with contextlib.suppress(OSError):
                os.remove(path[:-len(".pid")] + ext)
    with open(me + ".tmp", "w") as fh:
        fh.write(str(os.getpid()))
    os.replace(me + ".tmp", me)


def option(argv, name):
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def main(argv):
    if len(argv) < 2 or argv[0] not in ("scan", "fetch", "serve", "relay"):
        sys.stderr.write("usage: onhost.py scan|fetch|serve|relay JOB [--hash] [--pid-dir D]\n")
        return 2
    with open(argv[1]) as fh:
        job = json.load(fh)
    if "env" in job:  # secrets in the job file itself (0600): into the environment, the file gone
        os.environ.update(job.pop("env"))
        os.remove(argv[1])
    pid_file = None
    if option(argv, "--pid-dir"):
        pid_file = os.path.join(option(argv, "--pid-dir"), os.path.basename(argv[1])[:-len(".json")] + ".pid")
    if pid_file:  # a process of the host: the files of its run go with it (a host cut off
        # mid-copy keeps them until its relay ends, then this run's files are all gone)
        end_on_hangup(pid_file, *([job["sources_file"]] if job.get("sources_file") else []))
        end_leftovers(os.path.dirname(pid_file), pid_file)
        job["remove_sources"] = True
    else:
        end_on_hangup()
    if argv[0] == "scan":
        scan(job, "--hash" in argv[2:])
        return 0
    if argv[0] == "fetch":
        return relay(job, serving=False)
    if argv[0] == "serve":
        return relay(job, fetching=False)
    return relay(job)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
