"""Runs ON a host with the host's python3 (standard library only): one link of the image chain.

    python3 relay_host.py JOB

The first host of the chain reads ``<runtime> save IMAGE``; every other host reads the stream
of the host before it (an HTTP GET with the copy token) and, at the same time, feeds it to
``<runtime> load`` and forwards it to the host after it. Nothing is written to a temporary file;
the forward queue is bounded, so a slow host slows its upstream rather than filling memory.
The token arrives in the job, a 0600 file, never on a command line. Answers are JSON
lines on stdout: listening, progress, done or error.
"""

import hmac
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 1 << 20
QUEUE_CHUNKS = 64  # at most this many MiB wait for the next host
PROGRESS_EVERY_S = 0.25
OUT_LOCK = threading.Lock()


def say(**event):
    with OUT_LOCK:
        sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
        sys.stdout.flush()


class Forward:
    """The bytes on their way to the next host (one reader)."""

    def __init__(self, wanted):
        self.q = queue.Queue(maxsize=QUEUE_CHUNKS)  # type: queue.Queue[bytes | None]
        self.wanted = wanted
        self.broken = False
        self.claimed = threading.Lock()
        self.finished = threading.Event()

    def put(self, block):
        while self.wanted and not self.broken:
            try:
                self.q.put(block, timeout=1.0)
                return
            except queue.Full:
                continue


def serve(job, token, fwd):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection does

        def log_message(self, *args):
            pass

        def do_GET(self):
            auth = self.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(auth, b"Bearer " + token):
                return self._fail(401)
            if self.path != "/image" or not fwd.claimed.acquire(blocking=False):
                return self._fail(409)
            self.send_response(200)
            self.end_headers()
            try:
                while True:
                    block = fwd.q.get()
                    if block is None:
                        break
                    self.wfile.write(block)
                self.wfile.flush()
            except OSError:
                fwd.broken = True  # the next host went away: this host still loads its copy
            finally:
                fwd.finished.set()

        def _fail(self, code):
            self.send_response(code)
            self.end_headers()

    server = ThreadingHTTPServer((job["bind"], 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def pipe(f):
    """A Popen pipe asked for (PIPE): there."""
    assert f is not None
    return f


def wait_for(path, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.exists(path):
            try:
                with open(path) as fh:
                    return json.load(fh)
            except ValueError:
                time.sleep(0.01)  # being written: read it again
        time.sleep(0.05)
    return None


def main(argv):
    with open(argv[0]) as fh:
        job = json.load(fh)
    token = job["token"].encode()
    rt = job["runtime"]
    fwd = Forward(bool(job.get("forward")))
    port = serve(job, token, fwd)
    say(ev="listening", port=port)
    load = None
    if job["input"] == "save":
        saver = subprocess.Popen([rt, "save", job["image"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stream = pipe(saver.stdout)
    else:
        saver = None
        src = wait_for(job["sources_file"], 300)
        if src is None:
            say(ev="error", why="no source arrived within 300 s")
            return 1
        try:
            stream = urllib.request.urlopen(urllib.request.Request(
                src["url"] + "/image", headers={"Authorization": "Bearer " + token.decode()}), timeout=120)
        except OSError as e:
            say(ev="error", why="cannot reach %s: %s" % (src["name"], getattr(e, "reason", e)))
            return 1
        load = subprocess.Popen([rt, "load"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    done, last = 0, 0.0
    try:
        while True:
            block = stream.read(CHUNK)
            if not block:
                break
            if load is not None:
                pipe(load.stdin).write(block)
            fwd.put(block)
            done += len(block)
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY_S:
                last = now
                say(ev="progress", bytes=done)
    except OSError as e:
        say(ev="progress", bytes=done)
        say(ev="error", why="the stream broke after %d bytes: %s" % (done, e))
        return 1
    finally:
        if fwd.wanted and not fwd.broken:
            fwd.q.put(None)
    say(ev="progress", bytes=done)
    if saver is not None:
        err = pipe(saver.stderr).read().decode(errors="replace").strip()
        if saver.wait() != 0:
            say(ev="error", why="%s save failed: %s" % (rt, err[-300:]))
            return 1
    if load is not None:
        pipe(load.stdin).close()
        out = pipe(load.stdout).read().decode(errors="replace").strip()
        if load.wait() != 0:
            say(ev="error", why="%s load failed: %s" % (rt, out[-300:]))
            return 1
    say(ev="done", bytes=done)
    if fwd.wanted and not fwd.broken:
        fwd.finished.wait(600)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
