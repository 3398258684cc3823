"""The OpenAI-compatible HTTP side of the fake engine: /health, /v1/models, /v1/chat/completions,
/v1/completions (JSON and SSE streaming), /metrics, and /inkctl/fake/argv.

Like a real engine it streams on a clock (first token after FAKE_TTFT, then one token every
FAKE_TOKEN_DELAY, scheduled from the first token so the pace does not drift), reports usage,
returns reasoning in its own delta field when started with a reasoning parser, returns tool
calls when started with a tool-call parser, and has the real engines' bad habits on request:

  FAKE_TTFT              seconds before the first token (default: FAKE_TOKEN_DELAY)
  FAKE_MAX_RUNNING       requests decoded at once (the engine's batch); the rest wait, counted as waiting in /metrics
  FAKE_ITL               FAKE_TOKEN_DELAY under a name a recipe's env may carry (inkctl takes *TOKEN* for a secret)
  FAKE_REASONING_FIELD   delta field for reasoning: reasoning_content (default) or reasoning
  FAKE_TOOL_MALFORMED    1: tool-call arguments are not JSON (a parser that cut the text short)
  FAKE_WRONG_ANSWER      1: arithmetic is answered wrong
  FAKE_FAIL_EVERY        every Nth completion request answers HTTP 500
  FAKE_DROP_EVERY        every Nth stream is cut after a few tokens (no [DONE])
  FAKE_HANG_EVERY        every Nth request sends headers, then nothing for FAKE_HANG_S (default 3600)
"""

import json
import signal
import os
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .engine import knob
from .metrics import Metrics

WORDS = ("This is a fake completion from the inkctl test engine . It streams one word per token , "
         "just like a real model would , but knows nothing .").split()


class Server:
    def __init__(self, flavour, model, served_names, host, port, log, argv_info, api_key=None, version="0.11.0",
                 reasoning=False, tools=False, knobs=None):
        self.flavour, self.model, self.names = flavour, model, list(served_names) or [model]
        self.reasoning, self.tools = reasoning, tools  # started with a reasoning / tool-call parser
        self.knobs = dict(knobs or {})  # in-process tests set knobs here instead of the environment
        self.counter = 0
        self.host, self.port, self.log, self.argv_info = host, port, log, argv_info
        self.api_key, self.version = api_key, version
        self.ready = threading.Event()
        self.created = int(time.time())
        self.core_stopped = threading.Event()  # SIGUSR1: the engine core hangs, the API server answers on
        self.metrics = Metrics()  # served at /metrics under the real engines' names
        self.lock = threading.Lock()
        self.httpd = None
        self.pd = None  # prefill/decode disaggregation (disagg.Disagg): this replica's role

    def start(self):
        """Bind and serve in a thread. Raises OSError when the port is taken."""
        server = self

        class Handler(_Handler):
            srv = server

        try:  # vllm#39863: the core is stuck or dead, /health and /version still answer 200
            signal.signal(signal.SIGUSR1, lambda *_: self.stop_core())
        except ValueError:  # not the main thread (in-process tests)
            pass
        ThreadingHTTPServer.request_queue_size = 2048  # uvicorn's backlog; the stdlib's 5 resets bursts of clients
        self.httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True, name="http").start()

    def stop_core(self):
        self.core_stopped.set()
        self.log("EngineCore stopped making progress (SIGUSR1)", level="WARNING", src="core.py:1")

    def stop(self):
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    def slots(self):
        """FAKE_MAX_RUNNING > 0: at most that many requests decode at once (max_num_seqs /
        --max-running-requests); the rest wait. Without it every request runs at once."""
        n = int(self.knob("FAKE_MAX_RUNNING", 0))
        if n <= 0:
            return None
        with self.lock:
            if getattr(self, "_slots", None) is None or self._slots[0] != n:
                self._slots = (n, threading.Semaphore(n))
            return self._slots[1]

    def knob(self, name, default):
        if name in self.knobs:
            return float(self.knobs[name])
        if name == "FAKE_TOKEN_DELAY":  # FAKE_ITL: the same, under a name recipes may carry (not secret-looking)
            default = knob("FAKE_ITL", default)
        return knob(name, default)

    def every(self, name, n):
        every = int(self.knob(name, 0))
        return every > 0 and n % every == 0


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
        if path == "/metrics" and s.flavour == "trtllm":  # TensorRT-LLM's: JSON iteration stats
            return self._send(200, s.metrics.iteration_stats())
        if path == ("/prometheus/metrics" if s.flavour == "trtllm" else "/metrics"):
            return self._send(200, s.metrics.text(s.flavour, s.names[0], int(s.knob("FAKE_MAX_RUNNING", 0)) or 256),
                              "text/plain; version=0.0.4; charset=utf-8")
        if path == "/version":
            return self._send(200, {"version": s.version})
        if path == "/get_server_info" and s.flavour == "sglang":  # SGLang's; a router reads the served name here
            return self._send(200, {"model_path": s.model, "served_model_name": s.names[0], "tokenizer_path": s.model,
                                    "port": s.port, "version": s.version})
        if path in ("/get_model_info", "/model_info"):
            return self._send(200, {"model_path": s.model, "tokenizer_path": s.model, "is_generation": True})
        if path == "/health_generate":
            return self._send(200 if s.ready.is_set() else 503, b"", "text/plain")
        if path == "/inkctl/fake/argv":
            return self._send(200, s.argv_info)
        if path == "/inkctl/fake/pd" and s.pd is not None:
            return self._send(200, s.pd.status())
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
        self.ttft_override, extra = None, {}
        if s.pd is not None:  # a prefill publishes the prompt's KV, a decode fetches it first
            from .disagg import Refused

            try:
                o = s.pd.before(req, s.knob("FAKE_TTFT", s.knob("FAKE_TOKEN_DELAY", 0.01)), s.slots())
            except Refused as e:
                return self._error(e.code, e.message)
            limit, self.ttft_override, extra = o.get("limit", limit), o.get("ttft"), o.get("extra", {})
        with s.lock:
            s.counter += 1
            nth = s.counter
        if s.every("FAKE_FAIL_EVERY", nth):
            s.log.raw("ERROR:    Exception in ASGI application\nTraceback (most recent call last):\n"
                      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB")
            return self._error(500, "Internal Server Error", "InternalServerError")
        reasoning, content, tool = self._answer(chat, prompt, req, limit)
        n = len(reasoning) + len(content) + (1 if tool else 0)
        finish = "tool_calls" if tool else ("length" if n >= limit else "stop")
        usage = {"prompt_tokens": max(1, len(prompt.split())), "completion_tokens": n}
        usage["total_tokens"] = usage["prompt_tokens"] + n
        if s.core_stopped.is_set():  # queued for a core that never schedules it
            s.metrics.queued(1)
            time.sleep(s.knob("FAKE_STUCK_HOLD_S", 3600))
            s.metrics.queued(-1)
            return self._error(503, "The engine core is not responding", "ServiceUnavailableError")
        t0 = time.monotonic()
        slots = s.slots()
        if slots is not None:  # a full batch: wait, as a request in the engine's waiting queue does
            s.metrics.queued(1)
            slots.acquire()
            s.metrics.queued(-1)
        s.metrics.started(usage["prompt_tokens"])
        try:
            rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
            if req.get("stream"):
                self._stream(rid, model, chat, (reasoning, content, tool), finish, usage, req, nth)
            else:
                time.sleep(self._ttft())
                s.metrics.first_token(time.monotonic() - t0)
                time.sleep(s.knob("FAKE_TOKEN_DELAY", 0.01) * max(0, n - 1))
                text = "".join(content)
                if chat:
                    message = {"role": "assistant", "content": text or None, "tool_calls": [tool] if tool else []}
                    if reasoning:
                        message[self._reasoning_field()] = "".join(reasoning)
                    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
                else:
                    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
                self._send(200, {"id": rid, "object": "chat.completion" if chat else "text_completion",
                                 "created": int(time.time()), "model": model, "choices": [choice], "usage": usage,
                                 **extra})
        finally:
            s.metrics.finished_one(n, time.monotonic() - t0, finish)
            if slots is not None:
                slots.release()

    def _ttft(self):
        """Seconds to the first token: the prefill's (FAKE_TTFT), or what P/D left of it."""
        if getattr(self, "ttft_override", None) is not None:
            return self.ttft_override
        return self.srv.knob("FAKE_TTFT", self.srv.knob("FAKE_TOKEN_DELAY", 0.01))

    def _reasoning_field(self):
        return os.environ.get("FAKE_REASONING_FIELD") or self.srv.knobs.get("FAKE_REASONING_FIELD") or "reasoning_content"

    def _answer(self, chat, prompt, req, limit):
        """(reasoning tokens, content tokens, tool call or None) for this request, at most ``limit`` tokens."""
        s = self.srv
        reasoning = []
        if chat and s.reasoning:
            reasoning = ["Let ", "me ", "think ", "about ", "this . "][:max(0, limit - 1)]
        tool = None
        tools = req.get("tools") if chat else None
        if tools and s.tools and req.get("tool_choice") != "none" and len(reasoning) < limit:
            fn = (tools[0] or {}).get("function") or {}
            params = fn.get("parameters") or {}
            args = {k: _example(v) for k, v in (params.get("properties") or {}).items()}
            text = json.dumps(args)
            if s.knob("FAKE_TOOL_MALFORMED", 0):
                text = text[:-1].replace('"', "'", 1)  # a parser that lost the closing brace and a quote
            tool = {"index": 0, "id": "call_" + uuid.uuid4().hex[:24], "type": "function",
                    "function": {"name": fn.get("name", ""), "arguments": text}}
            return reasoning, [], tool
        words = list(WORDS)
        m = re.search(r"(-?[0-9]+)\s*(?:x|\*|times)\s*(-?[0-9]+)", prompt)
        if m:
            value = int(m.group(1)) * int(m.group(2)) + (1 if s.knob("FAKE_WRONG_ANSWER", 0) else 0)
            words = [str(value)]
        budget = max(0, limit - len(reasoning))
        n = budget if req.get("ignore_eos") else min(budget, len(words))
        return reasoning, [words[i % len(words)] + ("" if m else " ") for i in range(n)], tool

    def _stream(self, rid, model, chat, parts, finish, usage, req, nth):
        s = self.srv
        reasoning, content, tool = parts
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        delay = s.knob("FAKE_TOKEN_DELAY", 0.01)
        ttft = self._ttft()
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"
        field = self._reasoning_field()
        drop_at = 3 if s.every("FAKE_DROP_EVERY", nth) else None

        def event(choice, extra=None):
            body = {"id": rid, "object": obj, "created": created, "model": model, "choices": [choice]}
            body.update(extra or {})
            self._chunk(f"data: {json.dumps(body)}\n\n".encode())

        deltas = [{field: r} for r in reasoning] + [{"content": c} for c in content]
        if tool:
            deltas.append({"tool_calls": [tool]})
        try:
            if s.every("FAKE_HANG_EVERY", nth):
                time.sleep(s.knob("FAKE_HANG_S", 3600))
                return
            start = time.monotonic()
            if chat:
                event({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None})
            for i, delta in enumerate(deltas):
                # on a clock: token i is due at start + ttft + i * delay, however long sending took
                wait = start + ttft + i * delay - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if i == 0:
                    s.metrics.first_token(time.monotonic() - start)
                if drop_at is not None and i == drop_at:
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                last = i == len(deltas) - 1
                if chat:
                    event({"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish if last else None})
                else:
                    event({"index": 0, "text": delta.get("content", ""), "logprobs": None, "finish_reason": finish if last else None})
            if not deltas:
                event({"index": 0, "delta": {}, "finish_reason": finish} if chat else {"index": 0, "text": "", "finish_reason": finish})
            if (req.get("stream_options") or {}).get("include_usage"):
                body = {"id": rid, "object": obj, "created": created, "model": model, "choices": [], "usage": usage}
                self._chunk(f"data: {json.dumps(body)}\n\n".encode())
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass
        self._access(200)

    def _chunk(self, data):
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _example(schema):
    """A value that satisfies a JSON-schema property, as a model filling in a tool call would."""
    kind = (schema or {}).get("type")
    if (schema or {}).get("enum"):
        return schema["enum"][0]
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}.get(kind, "Paris")
