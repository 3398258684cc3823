"""Runs ON a host with the host's python3 (standard library only): one link of the image chain.

    python3 relay_host.py JOB          relay (the job, then a plan file: where the bytes come from)
    python3 relay_host.py feed FIFO    copy stdin into the FIFO a relay of this host reads

The first host of the chain reads ``<runtime> save IMAGE`` (or, when the image comes from the
control machine, a FIFO that ``feed`` fills from the SSH channel); every other host reads the
stream of a host before it (an HTTP GET with the copy token) and, at the same time, feeds it to
``<runtime> load`` and serves it to the host after it.

Layers: the archive is a tar whose layer files are named by their digest (docker >= 25:
``blobs/sha256/<diff id>``; podman: ``<diff id>.tar``). The first host drops from the stream
the layers every receiver has (``drop``); each receiver replaces the layers it has (``skip``)
by empty files before its ``load``: docker's load does not open the file of a layer whose
chain exists, podman's asks its store for the layer before it reads the file (but needs the
file to be there). An archive that names layers otherwise (docker < 25: ``<v1 id>/layer.tar``)
passes whole.

Reattach: every relay keeps the last ``window`` bytes of the stream it served, and lets the
host after it read at most ``lag`` bytes behind. A receiver whose upstream stops sending asks
it whether it lives (``/ping``); a dead one is named (``dead``) and the next source of its list
(the hosts before, nearest first) is asked for the stream from the byte it has.

The token arrives in the job, a 0600 file, never on a command line. Answers are JSON lines on
stdout: listening, progress, dead, error, done. Sent as one file: ``say`` and ``wait_for``
(shared with the weights relay, ``execute/hosts/hostside.py``) are inlined in place of the
line that imports them (``execute/hosts/program.py``).
"""

import hashlib
import hmac
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from inkctl.execute.hosts.hostside import PROGRESS_EVERY_S, say, wait_for  # inlined when sent: hosts/program.py

CHUNK = 1 << 20
PEER_TIMEOUT_S = 10.0  # no byte from the upstream this long: does it live?
PING_TIMEOUT_S = 3.0
STALL_TRIES = 60  # a live upstream that sends nothing: ask again this many times
WINDOW = 128 << 20  # the stream kept for a host reattaching after a dead one (memory per relay)
LAG = 32 << 20  # the host after this one reads at most this far behind (so WINDOW covers a dead hop)
STUCK_S = 15.0  # a reader that took nothing this long no longer holds the stream back alone
ORPHAN_S = 60.0  # the host after this one went away and nobody reattached this long: stop serving
BLOCK = 512
PAX_LAYER = "INKCTL.layer"  # the diff id of the member after it (a record tar readers ignore)


# ------------------------------------------------------------------------------- layers

def chain_ids(diff_ids):
    """The chain id of every prefix (docker's layer store is keyed by these)."""
    out, chain = [], ""
    for d in diff_ids:
        chain = d if not chain else "sha256:" + hashlib.sha256((chain + " " + d).encode()).hexdigest()
        out.append(chain)
    return out


def _output(argv):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.stdout.decode(errors="replace") if p.returncode == 0 else None


def layers(rt, image):
    """What this host has: the keys of its layers (``rt["by"]``: chain ids, a layer store keyed
    by what is below a layer; or diff ids, a store that reuses a layer by its content) and the
    image's own diff ids. ``rt`` is the job's runtime: the argv it runs, what its store keys."""
    if image:  # the source: its image's layers only
        text = _output(rt["inspect"] + ["{{json .RootFS.Layers}}", image])
        return {"image": json.loads(text.splitlines()[0]) if text else None}
    whole = rt.get("whole") or ""
    if not whole and rt.get("whole_if"):
        argv, marker, why = rt["whole_if"]
        whole = why if marker in (_output(argv) or "") else ""
    # a runtime that takes whole archives only: what it has changes nothing
    return {"by": rt["by"], "have": [] if whole else sorted(_have(rt)), "whole": whole}


def _have(rt):
    """The keys of every layer of every image this host has."""
    ids = (_output(rt["ls"]) or "").split()
    have = set()  # type: set[str]
    for i in range(0, len(ids), 200):
        text = _output(rt["inspect"] + ["{{json .RootFS.Layers}}"] + ids[i:i + 200]) or ""
        for line in text.splitlines():
            try:
                diffs = json.loads(line) or []
            except ValueError:
                continue
            have.update(chain_ids(diffs) if rt["by"] == "chain" else diffs)
    return have


def layer_of(name, digests):
    """The diff id (hex) a tar member carries when it is one of the image's layers."""
    base = name[2:] if name.startswith("./") else name
    if base.startswith("blobs/sha256/"):
        hexd = base[len("blobs/sha256/"):]
    elif base.endswith(".tar") and "/" not in base:
        hexd = base[:-4]
    else:
        return None
    return hexd if hexd in digests else None


def _num(field):
    if field and field[0] & 0x80:  # base-256 (sizes of 8 GiB and more)
        return int.from_bytes(bytes([field[0] & 0x7F]) + field[1:], "big")
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _pax(data):
    out, i = {}, 0
    while i < len(data):
        sp = data.find(b" ", i)
        if sp < 0:
            break
        n = int(data[i:sp])
        kv = data[sp + 1:i + n - 1]
        k, _, v = kv.partition(b"=")
        out[k.decode(errors="replace")] = v.decode(errors="replace")
        i += n
    return out


def empty_header(name):
    """A plain ustar header of an empty regular file: what replaces a layer."""
    h = bytearray(BLOCK)
    h[0:len(name)] = name.encode()
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = b"00000000000\0"
    h[136:148] = b"00000000000\0"
    h[148:156] = b" " * 8
    h[156:157] = b"0"
    h[257:263] = b"ustar\0"
    h[263:265] = b"00"
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def pax_header(name, records):
    """A pax extended header (type x) carrying ``records`` for the member after it."""
    body = b""
    for k, v in records.items():
        rec = (" %s=%s\n" % (k, v)).encode()
        n = len(rec) + 1
        while len(str(n)) + len(rec) != n:
            n = len(str(n)) + len(rec)
        body += str(n).encode() + rec
    h = bytearray(empty_header(("PaxHeaders/" + name)[:99]))
    h[124:136] = b"%011o\0" % len(body)
    h[156:157] = b"x"
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h) + body + bytes(-len(body) % BLOCK)


class TarFilter:
    """A tar stream in, the same stream out with the layers of ``drop`` emptied; any layout it
    does not know passes as it came."""

    def __init__(self, digests, drop, out, spool_dir=None):
        self.digests, self.drop, self.out = set(digests), set(drop), out
        # docker < 25 names a layer by its v1 id: the first host hashes it (on disk) before it
        # sends it, and names its diff id in a pax record the receivers read
        self.spool_dir = spool_dir
        self.held = None  # [header, temp file, hash, name, size, hashed] of a layer being hashed
        self.buf = b""
        self.pending = []  # extended headers (pax, GNU long name) of the next member
        self.pax = {}
        self.longname = None
        self.left = 0  # bytes of the current member's data (padded) still to come
        self.passing = True
        self.collect = None  # an extended header's data being read
        self.tail = False
        self.dropped = []  # (diff id, bytes)

    def feed(self, data):
        if self.tail or not self.drop:
            self.out(data)
            return
        self.buf += data
        while self.buf:
            if self.left:
                n = min(self.left, len(self.buf))
                part, self.buf = self.buf[:n], self.buf[n:]
                self.left -= n
                if self.collect is not None:
                    self.collect.append(part)
                    if not self.left:
                        self._extended(b"".join(self.collect))
                elif self.held is not None:
                    held = self.held
                    held[1].write(part)
                    take = min(len(part), held[4] - held[5])
                    held[2].update(part[:take])
                    held[5] += take
                    if not self.left:
                        self._release()
                elif self.passing:
                    self.out(part)
                continue
            if len(self.buf) < BLOCK:
                return
            head, self.buf = self.buf[:BLOCK], self.buf[BLOCK:]
            self._header(head)
            if self.tail:
                self.out(self.buf)
                self.buf = b""
                return

    def _header(self, head):
        if head == bytes(BLOCK):
            self.out(b"".join(self.pending) + head)
            self.pending, self.tail = [], True
            return
        kind = head[156:157]
        size = _num(head[124:136])
        padded = -(-size // BLOCK) * BLOCK
        if kind in (b"x", b"L", b"K", b"g"):
            self.pending.append(head)
            self.collect, self.left = [], padded
            self.kind, self.size = kind, size
            if not padded:
                self._extended(b"")
            return
        name = head[0:100].split(b"\0", 1)[0].decode(errors="replace")
        if head[257:263] == b"ustar\0" and head[345:500].strip(b"\0"):
            name = head[345:500].split(b"\0", 1)[0].decode(errors="replace") + "/" + name
        name = self.pax.get("path") or self.longname or name
        if "size" in self.pax:
            size = int(self.pax["size"])
            padded = -(-size // BLOCK) * BLOCK
        regular = kind in (b"0", b"\0")
        layer = (self.pax.get(PAX_LAYER) or layer_of(name, self.digests)) if regular else None
        if layer is None and regular and name.endswith("/layer.tar") and self.spool_dir is not None:
            import tempfile

            self.held = [head, tempfile.TemporaryFile(dir=self.spool_dir), hashlib.sha256(), name, size, 0]
            self.pending, self.pax, self.longname, self.left = [], {}, None, padded
            if not padded:
                self._release()
            return
        if layer in self.drop and len(name) <= 100:
            self.out(empty_header(name))
            self.passing = False
            self.dropped.append((layer, size))
        else:
            self.out(b"".join(self.pending) + head)
            self.passing = True
        self.pending, self.pax, self.longname, self.left = [], {}, None, padded

    def _release(self):
        assert self.held is not None
        head, fh, h, name, size, _ = self.held
        self.held = None
        layer = h.hexdigest()
        if layer in self.drop and len(name) <= 100:
            self.out(empty_header(name))
            self.dropped.append((layer, size))
        elif layer in self.digests:
            self.out(pax_header(name, {PAX_LAYER: layer}) + head)
            fh.seek(0)
            while True:
                block = fh.read(CHUNK)
                if not block:
                    break
                self.out(block)
        fh.close()

    def _extended(self, data):
        self.pending.append(data)
        self.collect = None
        if self.kind == b"x":
            self.pax = _pax(data[:self.size])
        elif self.kind == b"L":
            self.longname = data[:self.size].split(b"\0", 1)[0].decode(errors="replace")


# ------------------------------------------------------------------------------- the stream here

class Spool:
    """The stream as this host passed it on: the last ``window`` bytes kept for whoever reads
    after this host (the next host, or one reattaching after it died); the writer waits while
    the slowest reader is more than ``lag`` behind."""

    def __init__(self, window, lag, serving):
        self.window, self.lag = window, min(lag, window)
        self.ring = bytearray(window) if serving else bytearray()
        self.total = 0
        self.cond = threading.Condition()
        self.readers = {}  # id -> offset
        self.floor = 0  # the offset the next reader is expected from (the last one's)
        self.serving = serving
        self.ended = False
        self.orphan = None  # since when nobody reads
        self.finished = False  # someone read it to its end

    def write(self, data):
        if not self.serving:
            self.total += len(data)
            return
        with self.cond:
            while self.serving:
                now = time.monotonic()
                # a reader that took nothing for STUCK_S (its host cut off) holds back only
                # while no other reads: the host after it reattaches from an earlier byte
                active = [at for at, seen in self.readers.values() if now - seen < STUCK_S]
                stuck = [at for at, _ in self.readers.values()]
                low = min(active) if active else min(stuck) if stuck else self.floor
                if self.total + len(data) - low <= self.lag:
                    break
                if not active:
                    self.orphan = self.orphan or time.monotonic()
                    if time.monotonic() - self.orphan > ORPHAN_S:
                        self.serving = False
                        say(ev="note", why="nobody read the stream for %d s: stopped serving it" % ORPHAN_S)
                        break
                self.cond.wait(1.0)
            if self.serving:
                at = self.total % self.window
                first = min(len(data), self.window - at)
                self.ring[at:at + first] = data[:first]
                self.ring[0:len(data) - first] = data[first:]
            self.total += len(data)
            self.cond.notify_all()

    def end(self):
        with self.cond:
            self.ended = True
            self.cond.notify_all()

    def read_from(self, key, offset, send):
        """Send the stream from ``offset`` on through ``send`` until its end (True). False: the
        bytes at ``offset`` are gone already (this reader fell more than ``window`` behind)."""
        with self.cond:
            if offset < self.total - self.window or not self.serving:
                return False
            self.readers[key] = (offset, time.monotonic())
            self.orphan = None
            self.cond.notify_all()
        try:
            while True:
                with self.cond:
                    while offset >= self.total and not self.ended and self.serving:
                        self.readers[key] = (offset, time.monotonic())  # waiting is not stuck
                        self.cond.wait(1.0)
                    if offset >= self.total and self.ended:
                        return True
                    if offset < self.total - self.window or not self.serving:
                        return False
                    at = offset % self.window
                    n = min(self.total - offset, self.window - at, CHUNK)
                    part = bytes(self.ring[at:at + n])
                send(part)
                offset += n
                with self.cond:
                    self.readers[key] = (offset, time.monotonic())
                    self.cond.notify_all()
        finally:
            with self.cond:
                self.readers.pop(key, None)
                if not self.readers:
                    self.floor = offset
                    self.orphan = time.monotonic()
                self.cond.notify_all()


def serve(job, token, spool):
    class Handler(BaseHTTPRequestHandler):
        # chunked: a reader tells the stream's end from a connection that broke
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            auth = self.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(auth, b"Bearer " + token):
                return self._fail(401)
            if self.path == "/ping":
                return self._fail(204)
            if not self.path.startswith("/image"):
                return self._fail(404)
            offset = int(self.headers.get("X-Offset", "0"))
            with spool.cond:
                if offset < spool.total - spool.window or not spool.serving:
                    return self._fail(416)
            self.connection.settimeout(ORPHAN_S)  # a write to a host cut off ends
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

            def send(part):
                self.wfile.write(b"%x\r\n" % len(part))
                self.wfile.write(part)
                self.wfile.write(b"\r\n")

            try:
                if spool.read_from(id(self), offset, send):
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    with spool.cond:  # read to its end: this host may go
                        spool.finished = True
                        spool.cond.notify_all()
            except OSError as e:  # that reader went away: another may reattach from where it was
                self.close_connection = bool(e)

        def _fail(self, code):
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer((job["bind"], 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def pipe(f):
    """A Popen pipe asked for (PIPE): there."""
    assert f is not None
    return f


class Upstream:
    """The bytes from the hosts before this one: the nearest first; a dead one is named and
    the next asked from the byte this host has."""

    def __init__(self, sources, token):
        self.sources, self.token = list(sources), token
        self.resp = None
        self.at = 0

    def _open(self, src):
        req = urllib.request.Request(src["url"] + "/image", headers={
            "Authorization": "Bearer " + self.token, "X-Offset": str(self.at)})
        return urllib.request.urlopen(req, timeout=PEER_TIMEOUT_S)

    def _alive(self, src):
        try:
            urllib.request.urlopen(urllib.request.Request(src["url"] + "/ping", headers={
                "Authorization": "Bearer " + self.token}), timeout=PING_TIMEOUT_S).close()
            return True
        except urllib.error.HTTPError as e:
            return e.code == 204
        except OSError:
            return False

    def read(self, n):
        stalls = 0
        while self.sources:
            src = self.sources[0]
            try:
                if self.resp is None:
                    self.resp = self._open(src)
                # read1: what has arrived, up to n (read(n) of a chunked body waits for all n)
                block = self.resp.read1(n) if hasattr(self.resp, "read1") else self.resp.read(n)
                self.at += len(block)
                return block
            except urllib.error.HTTPError as e:
                why = "it no longer has byte %d (HTTP %d)" % (self.at, e.code)
            except (OSError, http.client.HTTPException) as e:
                why = str(getattr(e, "reason", e)) or type(e).__name__
            if self.resp is not None:
                self.resp.close()
                self.resp = None
            if "no longer has" not in why and stalls < STALL_TRIES and self._alive(src):
                stalls += 1
                continue  # alive (slow, or the connection broke): ask it again from this byte
            self.sources.pop(0)
            if not self.sources:
                raise OSError("%s went away after %d bytes (%s) and no host before it is left" % (
                    src["name"], self.at, why))
            say(ev="dead", host=src["name"], why=why, at=self.at, next=self.sources[0]["name"])
        raise OSError("no source")


class Link:
    """This host's part of one run, once the plan arrived: where the bytes come from (its
    runtime's save, the control machine's FIFO, or the hosts before it), where they go (the
    spool the host after it reads, and this host's load), and how it ended."""

    def __init__(self, job, plan, spool, saver):
        self.rt, self.image, self.spool, self.saver = job["runtime"], job["image"], spool, saver
        digests = plan.get("layers") or []
        if saver is not None:
            self.read = pipe(saver.stdout).read
        elif job["input"] == "fifo":  # from the control machine, already without what all have
            self.read = open(job["fifo"], "rb").read  # noqa: SIM115 - open until the end of the run
        else:
            self.read = Upstream(plan["sources"], job["token"]).read
        self.load = None if saver is not None else subprocess.Popen(
            self.rt["load"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # the first host drops from the stream what every receiver has; a receiver empties what it has
        self.out = TarFilter(digests, plan.get("drop") or [], spool.write, spool_dir=job.get("spool_dir"))
        self.own = TarFilter(digests, plan.get("skip") or [], pipe(self.load.stdin).write) if self.load else None
        self.done = 0

    def pump(self):
        """Every byte from the source on to the spool and this host's load, with progress."""
        last = 0.0
        while True:
            block = self.read(CHUNK)
            if not block:
                return
            (self.out.feed if self.saver is not None else self.spool.write)(block)
            if self.own is not None:
                self.own.feed(block)
            self.done += len(block)
            now = time.monotonic()
            if now - last >= PROGRESS_EVERY_S:
                last = now
                say(ev="progress", bytes=self.done)

    def skipped(self):
        dropped = self.out.dropped + (self.own.dropped if self.own else [])
        if dropped:
            say(ev="skipped", dropped=[d for d, _ in self.out.dropped],
                skipped=[d for d, _ in (self.own.dropped if self.own else [])], bytes=sum(n for _, n in dropped))

    def finish(self):
        """The save's or the load's end: 0, or 1 once the error is said."""
        name = self.rt["name"]
        if self.saver is not None:
            err = pipe(self.saver.stderr).read().decode(errors="replace").strip()
            if self.saver.wait() != 0:
                say(ev="error", why="%s save failed: %s" % (name, err[-300:]))
                return 1
        if self.load is None:
            say(ev="done", bytes=self.done)
            return 0
        pipe(self.load.stdin).close()
        text = pipe(self.load.stdout).read().decode(errors="replace").strip()
        if self.load.wait() != 0:
            say(ev="error", why="%s load failed: %s" % (name, text[-300:]))
            return 1
        say(ev="done", bytes=self.done, id=name_it(self.rt, self.image, text))
        return 0


def serve_until_read(spool):
    """Until the host after this one (or one reattaching) read it all."""
    deadline = time.monotonic() + 600
    with spool.cond:
        while not spool.finished and spool.serving and time.monotonic() < deadline:
            if not spool.readers and spool.orphan and time.monotonic() - spool.orphan > ORPHAN_S:
                break
            spool.cond.wait(1.0)


def relay(job):
    """Two steps: listen (and say which layers this host has), then, once the run knows every
    host's, read the plan (sources, what to leave out) and move the bytes."""
    rt = job["runtime"]
    serving = bool(job.get("forward"))
    spool = Spool(int(job.get("window", WINDOW)), int(job.get("lag", LAG)), serving)
    port = serve(job, job["token"].encode(), spool).server_address[1]
    saver = None
    if job["input"] == "save":  # a save takes a while before its first byte: start it now
        saver = subprocess.Popen(rt["save"] + [job["image"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    say(ev="listening", port=port, **layers(rt, job["image"] if saver is not None else None))
    plan = wait_for(job["sources_file"], 300, remove=True, poll=0.05)  # the plan: read once
    if plan is None:
        say(ev="error", why="no plan arrived within 300 s")
        return 1
    link = Link(job, plan, spool, saver)
    try:
        link.pump()
    except OSError as e:
        say(ev="progress", bytes=link.done)
        say(ev="error", why="the stream broke after %d bytes: %s" % (link.done, e))
        return 1
    finally:
        spool.end()
    say(ev="progress", bytes=link.done, sent=spool.total)
    link.skipped()
    if link.finish():
        return 1
    if serving:
        serve_until_read(spool)
    return 0


def name_it(rt, image, loaded):
    """The image under the name asked for: a runtime may save a short name as localhost/NAME
    (podman), which another then loads as is."""
    null = subprocess.DEVNULL

    def image_id():
        p = subprocess.run(rt["inspect"] + ["{{.Id}}", image], stdout=subprocess.PIPE, stderr=null)
        return p.stdout.decode().strip() if p.returncode == 0 else ""

    got = image_id()
    names = re.findall(r"Loaded image(?:\(s\))?(?: ID)?: (\S+)", loaded)
    if not got and names:
        subprocess.run(rt["tag"] + [names[-1].split(",")[0], image], stdout=null, stderr=null)
        got = image_id()
    return got


def feed(fifo):
    with open(fifo, "wb") as out:
        while True:
            block = sys.stdin.buffer.read(CHUNK)
            if not block:
                return 0
            out.write(block)


def run_relay(job):
    try:
        return relay(job)
    except OSError as e:  # the runtime not there, a disk full: one line, not a traceback
        say(ev="error", why="%s: %s" % (type(e).__name__, e))
        return 1


def main(argv):
    if argv[0] == "feed":
        return feed(argv[1])
    with open(argv[0]) as fh:
        job = json.load(fh)
    os.unlink(argv[0])  # the copy token: on disk no longer than it takes to read it
    if job["input"] == "fifo" and not os.path.exists(job["fifo"]):
        os.mkfifo(job["fifo"], 0o600)
    try:
        return run_relay(job)
    finally:
        if job["input"] == "fifo":
            if os.path.exists(job["fifo"]):
                os.unlink(job["fifo"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
