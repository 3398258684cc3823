"""A small HTTP/1.1 client on asyncio streams, for streamed completions only.

Why not httpx here: measured with benchmarks/client.py, httpx's layers (httpcore's pool scan per
request, anyio and h11 per chunk) cost ~400 us of CPU per streamed token on this project's
machines, so at 64 streams the client, not the server, set the inter-token latency. This
client reads one chunk per token with two buffered reads and no per-chunk objects (~10x less
CPU). It speaks what OpenAI-compatible servers answer: a status line, headers, and a body
that is chunked, sized, or read to EOF; keep-alive connections are reused per worker.
"""

from __future__ import annotations

import asyncio
import json
import ssl as ssl_module
from dataclasses import dataclass
from urllib.parse import urlsplit


class WireError(Exception):
    """The connection failed or the server broke the protocol (a dropped stream)."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    path: str
    tls: bool

    @classmethod
    def parse(cls, url: str) -> "Endpoint":
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL")
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        return cls(u.hostname, u.port or (443 if u.scheme == "https" else 80), path, u.scheme == "https")


class Pool:
    """Idle keep-alive connections to one server, handed to one request at a time."""

    def __init__(self, endpoint: Endpoint, connect_timeout_s: float = 30.0):
        self.endpoint = endpoint
        self.connect_timeout_s = connect_timeout_s
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._ssl = ssl_module.create_default_context() if endpoint.tls else None

    async def get(self):
        while self.idle:
            reader, writer = self.idle.pop()
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        e = self.endpoint
        try:
            return await asyncio.wait_for(asyncio.open_connection(e.host, e.port, ssl=self._ssl, limit=1 << 20),
                                          self.connect_timeout_s)
        except asyncio.TimeoutError:
            raise WireError(f"connecting to {e.host}:{e.port} timed out after {self.connect_timeout_s:g} s")
        except OSError as err:
            raise WireError(f"cannot connect to {e.host}:{e.port}: {err.strerror or err}")

    def put(self, conn) -> None:
        self.idle.append(conn)

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


def request_bytes(endpoint: Endpoint, body: dict, headers: dict | None) -> bytes:
    data = json.dumps(body).encode()
    head = [f"POST {endpoint.path} HTTP/1.1", f"Host: {endpoint.host}:{endpoint.port}",
            "Content-Type: application/json", "Accept: text/event-stream", f"Content-Length: {len(data)}",
            "User-Agent: inkctl"]
    for k, v in (headers or {}).items():
        head.append(f"{k}: {v}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        raise WireError("the server closed the connection before answering")
    except asyncio.LimitOverrunError:
        raise WireError("the answer's headers are larger than 1 MiB")
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise WireError(f"not an HTTP answer: {lines[0][:80]!r}")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def body_pieces(reader: asyncio.StreamReader, headers: dict[str, str]):
    """Yield the body as the server sent it (one piece per HTTP chunk); raises WireError when
    the connection ends before the body does."""
    try:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                line = await reader.readline()
                if not line.endswith(b"\n"):
                    raise WireError("the stream was cut (the connection closed inside the body)")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    await reader.readline()  # the empty trailer line
                    return
                piece = await reader.readexactly(size + 2)
                yield piece[:-2]
        elif "content-length" in headers:
            yield await reader.readexactly(int(headers["content-length"]))
        else:
            while piece := await reader.read(65536):
                yield piece
    except asyncio.IncompleteReadError:
        raise WireError("the stream was cut (the connection closed inside the body)")
    except ValueError:
        raise WireError("the server sent a malformed chunk size")
    except (ConnectionError, OSError) as err:
        raise WireError(f"the connection failed inside the body: {err}")
