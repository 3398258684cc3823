"""A fake ``ray``: ``ray start --head``, ``ray start --address A:P``, ``ray status``, ``ray stop``.

The head keeps a TCP "GCS" on its port; each worker node holds a heartbeat link to it, and
``ray status`` asks the head for the alive nodes (printed like Ray's autoscaler status)."""

import json
import os
import secrets
import signal
import socket
import sys
import threading
import time

from .engine import Args, Log, Peer, block_forever, dump_argv, fatal, handle_signals, knob, listen

VERSION = "2.49.1"
RAY_DIR = "/tmp/ray"
CURRENT = f"{RAY_DIR}/ray_current_cluster"
PIDS = f"{RAY_DIR}/fake-ray.pids"
NO_RAY = ("ConnectionError: Could not find any running Ray instance. Please specify the one to connect to "
          "by setting `--address` flag or `RAY_ADDRESS` environment variable.")


def main(argv):
    sub = argv[0] if argv else ""
    if sub in ("--version", "version"):
        print(f"ray, version {VERSION}")
        return
    if sub == "start":
        from .cli import ray_start

        ray_start(argv[1:])
        return start(Args(argv[1:]))
    if sub == "status":
        args = Args(argv[1:])
        sys.exit(status(args.get("address") or os.environ.get("RAY_ADDRESS") or current_address()))
    if sub == "stop":
        return stop()
    print(f"Usage: ray [OPTIONS] COMMAND [ARGS]...\nError: No such command '{sub}'.", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------- client side

def current_address():
    try:
        with open(CURRENT) as f:
            return f.read().strip()
    except OSError:
        return None


def split_address(address):
    host, _, port = (address or "").rpartition(":")
    return (host or address, int(port or 6379))


def query(address, timeout=3):
    """The head's alive nodes as dicts, or None when no head answers."""
    if not address:
        return None
    try:
        with socket.create_connection(split_address(address), timeout=timeout) as s:
            s.sendall(b'{"op": "status"}\n')
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return json.loads(buf)["nodes"]
    except (OSError, ValueError, KeyError):
        return None


def status(address):
    nodes = query(address)
    if nodes is None:
        print(NO_RAY, file=sys.stderr)
        return 1
    gpus = sum(n["gpus"] for n in nodes if n.get("gpus") is not None)
    print(f"======== Autoscaler status: {time.strftime('%Y-%m-%d %H:%M:%S')}.000000 ========")
    print("Node status\n" + "-" * 63 + "\nActive:")
    for n in nodes:
        print(f" 1 node_{n['id']}")
    print("Pending:\n (no pending nodes)\nRecent failures:\n (no failures)\n")
    print("Resources\n" + "-" * 63 + "\nUsage:")
    print(f" 0.0/{2.0 * len(nodes):.1f} CPU")
    print(f" 0.0/{float(gpus):.1f} GPU")
    print(" 0B/1.00GiB memory\n 0B/512.00MiB object_store_memory\n\nDemands:\n (no resource demands)")
    return 0


def stop():
    try:
        with open(PIDS) as f:
            pids = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        pids = []
    killed = 0
    for pid in pids:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGTERM)
                killed += 1
            except OSError:
                pass
    for path in (PIDS, CURRENT):
        try:
            os.remove(path)
        except OSError:
            pass
    print(f"Stopped all {killed} Ray processes.")


# ---------------------------------------------------------------- nodes

def start(args):
    dump_argv("ray")
    head = args.flag("head")
    port = args.int("port", 6379)
    address = args.get("address") or os.environ.get("RAY_ADDRESS")
    if not head and not address:
        print("ValueError: `ray start` needs --head or --address.", file=sys.stderr)
        sys.exit(1)
    gpus = args.get("num-gpus") or os.environ.get("FAKE_GPUS_PER_NODE")
    gpus = int(float(gpus)) if gpus not in (None, "", True) else None
    if head:
        ip = args.get("node-ip-address") or guess_ip(None)
    else:
        ip = args.get("node-ip-address") or guess_ip(split_address(address))
    log = Log("ray")
    if not args.flag("block"):
        _daemonize(log)
    os.makedirs(RAY_DIR, exist_ok=True)
    with open(PIDS, "a") as f:
        f.write(f"{os.getpid()}\n")
    handle_signals(log)
    node = {"id": secrets.token_hex(28), "ip": ip, "gpus": gpus}
    if head:
        Head(port, node, log).run()
        write_current(f"{ip}:{port}")
        log(f"Local node IP: {ip}\n\n" + "-" * 20 + "\nRay runtime started.\n" + "-" * 20 + "\n\nNext steps\n"
            f"  To add another node to this Ray cluster, run\n    ray start --address='{ip}:{port}'\n")
    else:
        join(address, node, log)
        write_current(address)
        log(f"Local node IP: {ip}\n\n" + "-" * 20 + "\nRay runtime started.\n" + "-" * 20)
    if args.flag("block"):
        log("--block\n  This command will now block forever until terminated by a signal.\n"
            "  Running subprocesses are monitored and a message will be printed if any of them terminate unexpectedly.")
    _ready_to_detach()
    block_forever()


def write_current(address):
    os.makedirs(RAY_DIR, exist_ok=True)
    with open(CURRENT, "w") as f:
        f.write(address + "\n")


def guess_ip(target):
    """The address this node would use towards ``target`` (a UDP connect sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(target or ("10.231.0.1", 9))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


class Head:
    def __init__(self, port, node, log):
        self.port, self.me, self.log = port, node, log
        self.nodes = {node["id"]: node}
        self.lock = threading.Lock()

    def run(self):
        os.makedirs(RAY_DIR, exist_ok=True)
        self.sock = listen("", self.port, self.log)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            conn, addr = self.sock.accept()
            threading.Thread(target=self._handle, args=(conn, addr), daemon=True).start()

    def _handle(self, conn, addr):
        buf = b""
        try:
            conn.settimeout(10)
            while b"\n" not in buf:
                chunk = conn.recv(4096)
                if not chunk:
                    return conn.close()
                buf += chunk
            conn.settimeout(None)
            msg = json.loads(buf.split(b"\n", 1)[0])
        except (OSError, ValueError):
            return conn.close()
        if msg.get("op") == "status":
            with self.lock:
                nodes = list(self.nodes.values())
            try:
                conn.sendall((json.dumps({"nodes": [{k: n[k] for k in ("id", "ip", "gpus")} for n in nodes]}) + "\n").encode())
            finally:
                conn.close()
        elif msg.get("op") == "join":
            node = {k: msg.get(k) for k in ("id", "ip", "gpus")}
            peer = Peer(conn, f"node {node['ip']}", self.log, on_lost=lambda p, why: self._lost(node, why))
            with self.lock:
                self.nodes[node["id"]] = node
            peer.start()
            peer.send({"op": "ok"})
            self.log(f"[fake-gcs] node {node['id'][:8]} joined from {node['ip']} ({len(self.nodes)} alive)")
        else:
            conn.close()

    def _lost(self, node, why):
        with self.lock:
            self.nodes.pop(node["id"], None)
        self.log(f"[fake-gcs] node {node['id'][:8]} at {node['ip']} is dead: {why}")


def join(address, node, log):
    deadline = time.monotonic() + knob("FAKE_RENDEZVOUS_TIMEOUT", 600)
    said = 0.0
    while True:
        try:
            sock = socket.create_connection(split_address(address), timeout=3)
            sock.settimeout(None)
            peer = Peer(sock, f"the Ray head at {address}", log)
            peer.start()
            peer.send(dict(node, op="join"))
            msg = peer.recv(timeout=10)
            if msg and msg.get("op") == "ok":
                peer.armed = True
                return peer
        except OSError as e:
            if time.monotonic() - said > 5:
                log(f"Waiting for the Ray head at {address}: {e.strerror or e}")
                said = time.monotonic()
        if time.monotonic() > deadline:
            fatal(log, f"Unable to connect to GCS (ray head) at {address}.", exc="ConnectionError")
        time.sleep(0.5)


# ---------------------------------------------------------------- ray start without --block

_detach_w = None


def _daemonize(log):
    """Without --block, ``ray start`` returns once the node runs in the background."""
    global _detach_w
    r, w = os.pipe()
    if os.fork() > 0:
        os.close(w)
        ok = os.read(r, 1)
        sys.exit(0 if ok == b"1" else 1)
    os.close(r)
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    _detach_w = w


def _ready_to_detach():
    global _detach_w
    if _detach_w is None:
        return
    sys.stdout.flush()
    os.write(_detach_w, b"1")
    os.close(_detach_w)
    _detach_w = None
    os.makedirs(RAY_DIR, exist_ok=True)
    fd = os.open(f"{RAY_DIR}/fake-ray.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for n in (0, 1, 2):
        os.dup2(os.open(os.devnull, os.O_RDONLY) if n == 0 else fd, n)
