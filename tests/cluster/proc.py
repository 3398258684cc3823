"""Running commands, polling for readiness, and processes."""

import http.client
import os
import signal
import socket
import subprocess
import time


class HarnessError(RuntimeError):
    pass


def run(argv, check=True, timeout=120, **kw):
    """subprocess.run with captured text output and an error that shows stderr."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    try:
        cp = subprocess.run([str(a) for a in argv], timeout=timeout, **kw)
    except FileNotFoundError as e:
        raise HarnessError(f"{argv[0]}: not installed (run tests/cluster/install.sh)") from e
    if check and cp.returncode != 0:
        err = (cp.stderr or cp.stdout or "").strip() if kw.get("text") else ""
        raise HarnessError(f"{' '.join(map(str, argv))} exited {cp.returncode}: {err[-2000:]}")
    return cp


def spawn(argv, log_path, env=None):
    """Start a daemon detached from us (own session), output appended to log_path. Returns its pid."""
    with open(log_path, "ab") as log:
        p = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             env=env, start_new_session=True, close_fds=True)
    return p.pid


def wait_for(what, probe, timeout=60.0, interval=0.05, on_timeout=None):
    """Poll probe() until it returns a truthy value; never sleep a fixed time."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = on_timeout() if on_timeout else ""
            raise HarnessError(f"timed out after {timeout:g} s waiting for {what}" + (f": {detail}" if detail else ""))
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)


def alive(pid):
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_all(pids, timeout=10.0, graceful=True):
    """SIGTERM (unless not graceful), then SIGKILL what is left; return once all are gone."""
    pids = {p for p in pids if p and p != os.getpid()}
    for sig in (signal.SIGTERM, signal.SIGKILL) if graceful else (signal.SIGKILL,):
        for p in pids:
            try:
                os.kill(p, sig)
            except OSError:
                pass
        deadline = time.monotonic() + (timeout / 2)
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.05)
        pids = {p for p in pids if alive(p)}
        if not pids:
            return


def tcp_banner(host, port, timeout=0.5):
    """The first bytes a TCP server says (sshd: "SSH-2.0-..."), or b"" when nothing answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            return s.recv(64)
    except OSError:
        return b""


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=5):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def docker_api(sock_path, method, url, timeout=5):
    """(status, body bytes) from a Docker Engine API socket, or (None, b"") when it does not answer."""
    try:
        conn = _UnixHTTP(sock_path, timeout)
        conn.request(method, url)
        r = conn.getresponse()
        body = r.read()
        conn.close()
        return r.status, body
    except OSError:
        return None, b""


def docker_ping(sock_path):
    return docker_api(sock_path, "GET", "/_ping", timeout=2)[0] == 200
