"""The OpenAI-compatible HTTP side of the fake engine: /health, /v1/models, /v1/chat/completions,
/v1/completions (JSON and SSE streaming), /metrics, and /inkctl/fake/argv."""

import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .engine import knob

WORDS = ("This is a fake completion from the inkctl test engine . It streams one word per token , "
         "just like a real model would , but knows nothing .").split()


class Server:
    def __init__(self, flavour, model, served_names, host, port, log, argv_info, api_key=None, version="0.11.0"):
        self.flavour, self.model, self.names = flavour, model, list(served_names) or [model]
        self.host, self.port, self.log, self.argv_info = host, port, log, argv_info
        self.api_key, self.version = api_key, version
        self.ready = threading.Event()
        self.created = int(time.time())
        self.stats = {"requests": 0, "prompt_tokens": 0, "generation_tokens": 0, "running": 0}
        self.lock = threading.Lock()
        self.httpd = None

    def start(self):
        """Bind and serve in a thread. Raises OSError when the port is taken."""
        server = self

        class Handler(_Handler):
            srv = server

        self.httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True, name="http").start()


class _Handler(BaseHTTPRequestHandler):
    srv: Server
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    # -- plumbing
    def log_message(self, fmt, *args):
        pass

    def _access(self, code):
        self.srv.log.raw(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - '
                         f'"{self.command} {self.path} HTTP/1.1" {code}')

    def _send(self, code, body, ctype="application/json"):
        data = body if isinstance(body, bytes) else (json.dumps(body) if not isinstance(body, str) else body).encode()
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self._access(code)

    def _error(self, code, message, etype="BadRequestError"):
        self._send(code, {"error": {"message": message, "type": etype, "param": None, "code": code}})

    def _authorised(self):
        key = self.srv.api_key
        if not key or not self.path.startswith("/v1/"):
            return True
        if self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        self._send(401, {"error": "Unauthorized"})
        return False

    # -- routes
    def do_GET(self):
        s, path = self.srv, self.path.split("?", 1)[0]
        if not self._authorised():
            return
        if path == "/health":
            if s.ready.is_set():
                return self._send(200, b"", "text/plain")
            return self._send(503, {"detail": "Server is not ready"} if s.flavour == "sglang" else b"")
        if path == "/v1/models":
            return self._send(200, {"object": "list", "data": [
                {"id": n, "object": "model", "created": s.created, "owned_by": s.flavour, "root": s.model,
                 "parent": None, "max_model_len": 32768} for n in s.names]})
        if path == "/metrics":
            return self._send(200, self._metrics(), "text/plain; version=0.0.4")
        if path == "/version":
            return self._send(200, {"version": s.version})
        if path in ("/get_model_info", "/model_info"):
            return self._send(200, {"model_path": s.model, "tokenizer_path": s.model, "is_generation": True})
        if path == "/health_generate":
            return self._send(200 if s.ready.is_set() else 503, b"", "text/plain")
        if path == "/inkctl/fake/argv":
            return self._send(200, s.argv_info)
        self._send(404, {"detail": "Not Found"})

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        s, path = self.srv, self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._authorised():
            return
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return self._send(404, {"detail": "Not Found"})
        if not s.ready.is_set():
            return self._error(503, "The server is not ready yet", "ServiceUnavailableError")
        try:
            req = json.loads(raw or b"{}")
            assert isinstance(req, dict)
        except (ValueError, AssertionError):
            return self._error(400, "Request body is not a JSON object")
        model = req.get("model") or s.names[0]
        if model not in s.names:
            return self._error(404, f"The model `{model}` does not exist.", "NotFoundError")
        chat = path.endswith("chat/completions")
        if chat:
            msgs = req.get("messages")
            if not isinstance(msgs, list) or not msgs:
                return self._error(400, "messages: field required")
            prompt = " ".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
        else:
            if "prompt" not in req:
                return self._error(400, "prompt: field required")
            prompt = req["prompt"] if isinstance(req["prompt"], str) else json.dumps(req["prompt"])
        limit = req.get("max_completion_tokens") or req.get("max_tokens")
        try:
            limit = None if limit is None else int(limit)
        except (TypeError, ValueError):
            return self._error(400, "max_tokens must be an integer")
        if limit is None:
            limit = len(WORDS) if chat else 16
        n = limit if req.get("ignore_eos") else min(limit, len(WORDS))
        finish = "length" if n == limit else "stop"
        tokens = [WORDS[i % len(WORDS)] + " " for i in range(n)]
        usage = {"prompt_tokens": max(1, len(prompt.split())), "completion_tokens": n}
        usage["total_tokens"] = usage["prompt_tokens"] + n
        with s.lock:
            s.stats["requests"] += 1
            s.stats["prompt_tokens"] += usage["prompt_tokens"]
            s.stats["running"] += 1
        try:
            rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
            if req.get("stream"):
                self._stream(rid, model, chat, tokens, finish, usage, req)
            else:
                time.sleep(knob("FAKE_TOKEN_DELAY", 0.01) * n)
                text = "".join(tokens)
                choice = ({"index": 0, "message": {"role": "assistant", "content": text, "tool_calls": []},
                           "logprobs": None, "finish_reason": finish} if chat else
                          {"index": 0, "text": text, "logprobs": None, "finish_reason": finish})
                self._send(200, {"id": rid, "object": "chat.completion" if chat else "text_completion",
                                 "created": int(time.time()), "model": model, "choices": [choice], "usage": usage})
        finally:
            with s.lock:
                s.stats["running"] -= 1
                s.stats["generation_tokens"] += n

    def _stream(self, rid, model, chat, tokens, finish, usage, req):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        delay = knob("FAKE_TOKEN_DELAY", 0.01)
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"

        def event(choice, extra=None):
            body = {"id": rid, "object": obj, "created": created, "model": model, "choices": [choice]}
            body.update(extra or {})
            self._chunk(f"data: {json.dumps(body)}\n\n".encode())

        try:
            if chat:
                event({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None})
            for i, tok in enumerate(tokens):
                time.sleep(delay)
                last = i == len(tokens) - 1
                if chat:
                    event({"index": 0, "delta": {"content": tok}, "logprobs": None, "finish_reason": finish if last else None})
                else:
                    event({"index": 0, "text": tok, "logprobs": None, "finish_reason": finish if last else None})
            if not tokens:
                event({"index": 0, "delta": {}, "finish_reason": finish} if chat else {"index": 0, "text": "", "finish_reason": finish})
            if (req.get("stream_options") or {}).get("include_usage"):
                body = {"id": rid, "object": obj, "created": created, "model": model, "choices": [], "usage": usage}
                self._chunk(f"data: {json.dumps(body)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self._access(200)

    def _chunk(self, data):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _metrics(self):
        s = self.srv
        p = "vllm:" if s.flavour == "vllm" else "sglang:"
        label = f'{{model_name="{s.names[0]}"}}'
        st = dict(s.stats)
        lines = [
            f"# HELP {p}num_requests_running Number of requests currently running.",
            f"# TYPE {p}num_requests_running gauge",
            f"{p}num_requests_running{label} {st['running']}",
            f"# TYPE {p}num_requests_waiting gauge",
            f"{p}num_requests_waiting{label} 0",
            f"# TYPE {p}gpu_cache_usage_perc gauge",
            f"{p}gpu_cache_usage_perc{label} 0.0",
            f"# TYPE {p}prompt_tokens_total counter",
            f"{p}prompt_tokens_total{label} {st['prompt_tokens']}",
            f"# TYPE {p}generation_tokens_total counter",
            f"{p}generation_tokens_total{label} {st['generation_tokens']}",
            f"# TYPE {p}request_success_total counter",
            f'{p}request_success_total{{model_name="{s.names[0]}",finished_reason="stop"}} {st["requests"]}',
            "# TYPE process_start_time_seconds gauge",
            f"process_start_time_seconds {s.created}",
            "# TYPE fake_engine_pid gauge",
            f"fake_engine_pid {os.getpid()}",
        ]
        return "\n".join(lines) + "\n"
