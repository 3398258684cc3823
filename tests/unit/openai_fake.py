"""The fake engine's OpenAI server as a subprocess on loopback, for bench and smoke tests.

A subprocess, not a thread: the client under test gets a process (and a GIL) of its own, as it
does against a real server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeServer:
    def __init__(self, *flags: str, **knobs):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, PYTHONPATH=str(ROOT), FAKE_TOKEN_DELAY="0.002", FAKE_TTFT="0.01")
        env.update({k: str(v) for k, v in knobs.items()})
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.cluster.fake_engine", "vllm", "serve", "fake-model",
                                      "--host", "127.0.0.1", "--port", str(self.port), *flags],
                                     env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:  # poll for readiness
            try:
                if httpx.get(self.url + "/health", timeout=1, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"the fake OpenAI server did not come up on {self.url}")
            time.sleep(0.05)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
