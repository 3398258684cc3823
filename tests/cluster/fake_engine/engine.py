"""What the fake vLLM, SGLang and Ray share: argv parsing, engine-style logs, the FAKE_* knobs,
the argv dump, crashes, signals, weight "loading" and the rank-to-rank rendezvous."""

import json
import os
import signal
import socket
import sys
import threading
import time

ARGV_DUMP = "/tmp/inkctl-fake-engine.json"
START = time.monotonic()


def knob(name, default):
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw.strip() else default
    except ValueError:
        return default


# ---------------------------------------------------------------- argv

class Args:
    """A tolerant ``--flag value`` parser: engines get flags we do not model, so accept any.

    A flag takes the next token as its value unless it is a known boolean, starts with
    --enable-/--disable-/--no-, or the next token is itself a flag.
    """

    BOOLEANS = {
        "headless", "trust-remote-code", "enforce-eager", "block", "head", "disable-log-requests",
        "disable-log-stats", "skip-tokenizer-init", "async-scheduling", "disable-cuda-graph",
        "skip-server-warmup", "disable-radix-cache", "log-requests", "disable-frontend-multiprocessing",
        "enable-metrics", "verbose",
    }

    def __init__(self, argv, aliases=None, multi=()):
        self.positionals, self.opts = [], {}
        aliases = aliases or {}
        i = 0
        while i < len(argv):
            tok = argv[i]
            if tok.startswith("-") and len(tok) > 1 and not _is_number(tok):
                name, eq, value = tok.lstrip("-").partition("=")
                name = aliases.get(name, name).replace("_", "-")
                if eq:
                    self.opts[name] = value
                elif name in multi:
                    vals = []
                    while i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                        i += 1
                        vals.append(argv[i])
                    self.opts[name] = vals
                elif (name in self.BOOLEANS or name.startswith(("enable-", "disable-", "no-"))
                      or i + 1 >= len(argv) or (argv[i + 1].startswith("-") and not _is_number(argv[i + 1]))):
                    self.opts[name] = True
                else:
                    i += 1
                    self.opts[name] = argv[i]
            else:
                self.positionals.append(tok)
            i += 1

    def get(self, name, default=None):
        return self.opts.get(name, default)

    def int(self, name, default):
        try:
            return int(self.opts.get(name, default))
        except (TypeError, ValueError):
            fatal(None, f"argument --{name}: invalid int value: {self.opts.get(name)!r}", code=2)

    def flag(self, name):
        v = self.opts.get(name)
        return v is True or (isinstance(v, str) and v.lower() in ("1", "true", "yes"))


def _is_number(tok):
    try:
        float(tok)
        return True
    except ValueError:
        return False


# ---------------------------------------------------------------- logs

class Log:
    """Prints like the engine it plays: vLLM ``INFO 11-29 16:21:24 [file.py:123] msg``,
    SGLang ``[2026-11-29 16:21:24] msg``, Ray plain."""

    def __init__(self, style, prefix=""):
        self.style, self.prefix = style, prefix
        self.lock = threading.Lock()
        try:
            sys.stdout.reconfigure(line_buffering=True)
        except (AttributeError, ValueError):
            pass

    def __call__(self, msg, level="INFO", src="api_server.py:1"):
        now = time.localtime()
        if self.style == "vllm":
            line = f"{self.prefix}{level} {time.strftime('%m-%d %H:%M:%S', now)} [{src}] {msg}"
        elif self.style == "sglang":
            line = f"[{time.strftime('%Y-%m-%d %H:%M:%S', now)}{self.prefix}] {msg}"
        else:
            line = msg
        with self.lock:
            print(line, flush=True)

    def raw(self, text):
        with self.lock:
            print(text, flush=True)


def fatal(log, message, code=None, exc="RuntimeError"):
    """Die like a Python engine does: a traceback on stderr-ish stdout, then a non-zero exit."""
    code = int(knob("FAKE_EXIT_CODE", 1)) if code is None else code
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3/dist-packages/fake_engine/engine.py", line 1, in <module>',
        "    run_engine()",
        f"{exc}: {message}",
    ]
    if log is not None and log.style == "vllm":
        log(f"EngineCore encountered a fatal error: {message}", level="ERROR", src="core.py:708")
    sys.stdout.flush()
    print("\n".join(lines), file=sys.stderr, flush=True)
    os._exit(code)


def dump_argv(prog):
    info = {"prog": prog, "argv": list(sys.argv), "env": dict(os.environ), "cwd": os.getcwd(), "pid": os.getpid()}
    for path in (ARGV_DUMP, f"/tmp/inkctl-fake-engine-{prog}.json"):
        try:
            with open(path, "w") as f:
                json.dump(info, f, indent=1)
        except OSError:
            pass
    return info


def start_crash_timer(log):
    after = knob("FAKE_CRASH_AFTER", -1)
    if after < 0:
        return

    def crash():
        time.sleep(max(0.0, after - (time.monotonic() - START)))
        fatal(log, f"CUDA error: an illegal memory access was encountered (FAKE_CRASH_AFTER={after:g})")

    threading.Thread(target=crash, daemon=True, name="fake-crash").start()


def handle_signals(log, on_exit=None):
    """PID 1 in a container ignores SIGTERM without a handler; engines exit promptly."""

    def stop(signum, _frame):
        log(f"Received signal {signal.Signals(signum).name}, shutting down", src="launcher.py:80")
        if on_exit:
            on_exit()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


LOADED = []  # seconds the weights took (the fake's boot phases read it)


def load_weights(log, model, shards_line, done_line):
    """Spend FAKE_READY_AFTER seconds (minus what already passed) "loading" the checkpoint, or
    exactly FAKE_WEIGHTS_S seconds when that is set (a phase of known length, however long the
    rendezvous before it took)."""
    total = knob("FAKE_READY_AFTER", 0)
    every = knob("FAKE_LOG_EVERY", 0)
    left = max(0.0, total - (time.monotonic() - START))
    if knob("FAKE_WEIGHTS_S", -1) >= 0:
        left = knob("FAKE_WEIGHTS_S", 0)
    shards = max(1, int(knob("FAKE_SHARDS", 4)))
    log(f"Loading weights for {model}", src="default_loader.py:267")
    t0 = time.monotonic()
    if every > 0 and left > 0:
        steps = max(1, int(left // every))
        for k in range(1, steps + 1):
            time.sleep(every)
            log(shards_line(min(shards, max(1, round(k * shards / steps))), shards), src="weight_utils.py:441")
        time.sleep(max(0.0, left - (time.monotonic() - t0)))
    else:
        time.sleep(left)
        for k in range(1, shards + 1):
            log(shards_line(k, shards), src="weight_utils.py:441")
    LOADED.append(time.monotonic() - t0)
    log(done_line(LOADED[-1]), src="default_loader.py:273")


# ---------------------------------------------------------------- rank to rank

class Peer:
    """One TCP link between ranks, kept alive by heartbeats. Losing it after start-up is fatal
    (like an NCCL timeout), which is what fault tests expect of a multi-node engine."""

    def __init__(self, sock, name, log, on_lost=None):
        self.sock, self.name, self.log, self.on_lost = sock, name, log, on_lost
        self.last = time.monotonic()
        self.armed = False  # fatal on loss only once the engine runs
        self.lost = threading.Event()
        self.lines = []
        self.cv = threading.Condition()

    def start(self):
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._beat, daemon=True).start()

    def send(self, obj):
        try:
            self.sock.sendall((json.dumps(obj) + "\n").encode())
        except OSError:
            self._lose("connection broken")

    def recv(self, timeout=None):
        with self.cv:
            if not self.cv.wait_for(lambda: self.lines or self.lost.is_set(), timeout):
                return None
            return self.lines.pop(0) if self.lines else None

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = self.sock.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                if not self.lost.is_set():
                    # NCCL notices a dead peer after its own abort path, not within a millisecond:
                    # the peer's death is on record first, as on real hosts
                    time.sleep(knob("FAKE_PEER_NOTICE_S", 0.5))
                return self._lose("connection closed by peer")
            self.last = time.monotonic()
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line or b"{}")
                if msg.get("op") != "ping":
                    with self.cv:
                        self.lines.append(msg)
                        self.cv.notify_all()

    def _beat(self):
        timeout = knob("FAKE_PEER_TIMEOUT", 15)
        while not self.lost.is_set():
            self.send({"op": "ping"})
            if time.monotonic() - self.last > timeout:
                return self._lose(f"no heartbeat for {timeout:g} s")
            time.sleep(1)

    def _lose(self, why):
        if self.lost.is_set():
            return
        self.lost.set()
        with self.cv:
            self.cv.notify_all()
        try:
            self.sock.close()
        except OSError:
            pass
        if self.on_lost:
            self.on_lost(self, why)
        if self.armed:
            fatal(self.log, f"NCCL error: remote process exited or network error ({self.name}: {why})",
                  exc="torch.distributed.DistBackendError")


def listen(host, port, log):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
    except OSError as e:
        fatal(log, f"[Errno {e.errno}] error while attempting to bind on address ({host!r}, {port}): {e.strerror}",
              exc="OSError")
    s.listen(64)
    return s


def serve_rendezvous(port, nnodes, log, bind=""):
    """Rank 0: accept the other nnodes-1 ranks on ``port``, then tell them all to go."""
    srv = listen(bind, port, log)
    peers = {}
    log(f"Waiting for {nnodes - 1} other node(s) to join on port {port}", src="parallel_state.py:1165")
    while len([p for p in peers.values() if not p.lost.is_set()]) < nnodes - 1:
        conn, addr = srv.accept()
        peer = Peer(conn, f"{addr[0]}", log)
        peer.start()
        hello = peer.recv(timeout=10) or {}
        rank, their_n = hello.get("rank"), hello.get("nnodes")
        if their_n != nnodes or not isinstance(rank, int) or not 0 < rank < nnodes:
            log(f"Rejected node {addr[0]}: rank={rank} nnodes={their_n} (expected nnodes={nnodes})",
                level="WARNING", src="parallel_state.py:1170")
            peer.send({"op": "reject", "why": f"nnodes mismatch: head has {nnodes}"})
            continue
        if rank in peers and not peers[rank].lost.is_set():
            peer.send({"op": "reject", "why": f"rank {rank} already joined"})
            continue
        peers[rank] = peer
        log(f"Node rank {rank} joined from {addr[0]} ({len(peers)}/{nnodes - 1})", src="parallel_state.py:1180")
    for p in peers.values():
        p.send({"op": "go"})
        p.armed = True
    srv.close()
    return peers


def join_rendezvous(addr, port, rank, nnodes, log):
    """Rank > 0: connect (retrying) to rank 0 until it says go."""
    deadline = time.monotonic() + knob("FAKE_RENDEZVOUS_TIMEOUT", 600)
    said = 0.0
    while True:
        try:
            sock = socket.create_connection((addr, port), timeout=3)
            sock.settimeout(None)
            peer = Peer(sock, f"rank 0 at {addr}:{port}", log)
            peer.start()
            peer.send({"op": "hello", "rank": rank, "nnodes": nnodes})
            msg = peer.recv()
            if msg and msg.get("op") == "go":
                peer.armed = True
                log(f"Connected to the head at {addr}:{port} as node rank {rank}", src="parallel_state.py:1190")
                return peer
            if msg and msg.get("op") == "reject":
                fatal(log, f"the head at {addr}:{port} rejected node rank {rank}: {msg.get('why')}")
        except OSError as e:
            if time.monotonic() - said > 5:
                log(f"Waiting for the head at {addr}:{port} ({e.strerror or e})", src="parallel_state.py:1195")
                said = time.monotonic()
        if time.monotonic() > deadline:
            fatal(log, f"timed out connecting to the head at {addr}:{port}", exc="TimeoutError")
        time.sleep(0.5)


def block_forever():
    while True:
        time.sleep(3600)
