"""The two roles of prefill/decode disaggregation, as the real engines play them for the real routers.

SGLang (``--disaggregation-mode prefill|decode``, ``--disaggregation-transfer-backend``,
``--disaggregation-bootstrap-port``): sglang-router sends every request to a prefill and a
decode replica at once, with ``bootstrap_host`` (the prefill's host), ``bootstrap_port`` (its
bootstrap server) and ``bootstrap_room`` (one number per request) added to the body. The
prefill computes the prompt's KV and publishes it in that room of its bootstrap server; the
decode waits for the room there, then streams the tokens. A request without a room is refused
by both (only a P/D router sends them).

vLLM (``--kv-transfer-config '{"kv_connector":"NixlConnector",...}'``): vllm-router sends the
request to a prefill replica first with ``kv_transfer_params.do_remote_decode`` and
``max_tokens`` 1; the answer carries ``kv_transfer_params`` (``remote_engine_id``,
``remote_block_ids``, ``remote_host``, ``remote_port``: the NIXL side channel,
VLLM_NIXL_SIDE_CHANNEL_HOST/PORT), which the router passes on to a decode replica; the decode
reads the blocks from that side channel, then streams. A plain request is served as usual
(kv_role kv_both).

Here "the KV" is a small JSON record served over HTTP from the bootstrap / side-channel port:
a decode that cannot reach it, or finds no such room, fails the request, as a real one does.
GET /inkctl/fake/pd on the API port counts what each replica did (the tests read it).

  FAKE_PD_WAIT_S   how long a decode waits for the prefill's KV (default 30)
"""

import json
import os
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .engine import knob


class Refused(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


class Disagg:
    """One replica's side of the split: its KV store (served on ``port``) and its counters."""

    def __init__(self, flavour, role, backend, host, port, log, advertise=None):
        self.flavour, self.role, self.backend = flavour, role, backend
        self.host, self.port, self.log = host, port, log
        self.advertise = advertise or host  # the address a decode replica reaches the side channel at
        self.engine_id = uuid.uuid4().hex
        self.kv = {}
        self.lock = threading.Lock()
        self.counts = {"prefilled": 0, "decoded": 0, "refused": 0}
        self.httpd = None

    # -- the bootstrap server / NIXL side channel
    def start(self):
        disagg = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                key = self.path.rsplit("/", 1)[-1]
                with disagg.lock:
                    rec = disagg.kv.pop(key, None)
                body = json.dumps(rec if rec is not None else {"error": f"no KV for {key}"}).encode()
                self.send_response(200 if rec is not None else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("0.0.0.0" if self.host in ("", "0.0.0.0") else self.host, self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True, name="kv-bootstrap").start()
        what = "bootstrap server" if self.flavour == "sglang" else "NIXL side channel"
        self.log(f"Disaggregation {self.role or 'kv_both'}: {self.backend} KV transfer, {what} on port {self.port}")

    def _count(self, what):
        with self.lock:
            self.counts[what] += 1

    def status(self):
        with self.lock:
            return {"role": self.role or "kv_both", "backend": self.backend, "engine_id": self.engine_id, **self.counts}

    # -- a request: before the engine answers it
    def before(self, req, prefill_s, slots=None):
        """What the engine does with ``req`` before its tokens: the prefill's KV published, or the
        decode's fetched. Returns overrides for the answer ({'limit', 'ttft', 'extra'}); raises
        Refused for a request this role cannot serve. ``slots``: the engine's batch (FAKE_MAX_RUNNING),
        which a prefill's forward pass takes a place in."""
        if self.flavour == "sglang":
            return self._sglang(req, prefill_s, slots)
        return self._vllm(req, prefill_s, slots)

    @staticmethod
    def _forward(seconds, slots):
        """The prompt's forward pass, in a place of the batch."""
        if slots is not None:
            slots.acquire()
        try:
            time.sleep(seconds)
        finally:
            if slots is not None:
                slots.release()

    def _sglang(self, req, prefill_s, slots):
        room = req.get("bootstrap_room")
        if room is None or not req.get("bootstrap_host"):
            self._count("refused")
            raise Refused(400, f"this server runs --disaggregation-mode {self.role}: a request needs bootstrap_host, "
                          "bootstrap_port and bootstrap_room (send it through the P/D router)")
        key = str(room)
        if self.role == "prefill":
            self._forward(prefill_s, slots)
            with self.lock:
                self.kv[key] = {"room": key, "from": self.engine_id, "prompt": req.get("messages") or req.get("prompt")}
            self._count("prefilled")
            return {"limit": 1, "ttft": 0.0}
        rec = self._fetch(req.get("bootstrap_host"), req.get("bootstrap_port"), key)
        self._count("decoded")
        self.log(f"decode: KV of room {key} from prefill {rec.get('from', '?')[:8]}")
        return {"ttft": 0.0}

    def _vllm(self, req, prefill_s, slots):
        params = req.get("kv_transfer_params") or {}
        if params.get("do_remote_decode"):  # a prefill for a remote decode: KV kept for it
            self._forward(prefill_s, slots)
            block = uuid.uuid4().hex
            with self.lock:
                self.kv[block] = {"block": block, "from": self.engine_id}
            self._count("prefilled")
            out = {"do_remote_prefill": True, "do_remote_decode": False, "remote_engine_id": self.engine_id,
                   "remote_block_ids": [block], "remote_host": self.advertise, "remote_port": self.port, "tp_size": 1}
            return {"limit": 1, "ttft": 0.0, "extra": {"kv_transfer_params": out}}
        if params.get("do_remote_prefill"):
            blocks = params.get("remote_block_ids") or []
            if not blocks:
                self._count("refused")
                raise Refused(400, "kv_transfer_params.do_remote_prefill without remote_block_ids")
            rec = self._fetch(params.get("remote_host"), params.get("remote_port"), str(blocks[0]))
            self._count("decoded")
            self.log(f"decode: KV blocks of engine {rec.get('from', '?')[:8]} read over NIXL")
            return {"ttft": 0.0}
        return {}

    def _fetch(self, host, port, key):
        """The prefill's KV for ``key``, waited for (the prefill may still be computing it)."""
        url = f"http://{host}:{port}/kv/{key}"
        deadline = time.monotonic() + knob("FAKE_PD_WAIT_S", 30)
        why = ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310 - the prefill's own port
                    return json.loads(r.read())
            except urllib.error.HTTPError as e:
                why = f"HTTP {e.code}"
            except OSError as e:
                why = str(e)
            time.sleep(0.005)
        self._count("refused")
        self.log(f"KV transfer from {host}:{port} failed: {why}", level="ERROR")
        raise Refused(500, f"KV transfer failed: no KV from {host}:{port} for {key} ({why})")


def from_args(flavour, args, host, log):
    """The replica's Disagg from its flags, or None when it is not a P/D replica."""
    if flavour == "sglang":
        role = args.get("disaggregation-mode")
        if not role or role is True or role == "null":
            return None
        if role not in ("prefill", "decode"):
            raise SystemExit(f"--disaggregation-mode: invalid choice {role!r} (choose from 'null', 'prefill', 'decode')")
        backend = args.get("disaggregation-transfer-backend") or "mooncake"
        return Disagg("sglang", role, backend, host, args.int("disaggregation-bootstrap-port", 8998), log)
    raw = args.get("kv-transfer-config")
    if not raw or raw is True:
        return None
    try:
        cfg = json.loads(raw)
    except ValueError:
        raise SystemExit(f"--kv-transfer-config: not JSON: {raw!r}") from None
    connector = cfg.get("kv_connector")
    if connector != "NixlConnector":
        raise SystemExit(f"--kv-transfer-config: the fake engine knows the NixlConnector only, not {connector!r}")
    port = int(os.environ.get("VLLM_NIXL_SIDE_CHANNEL_PORT", "5600"))
    side = os.environ.get("VLLM_NIXL_SIDE_CHANNEL_HOST", "localhost")
    return Disagg("vllm", "", "nixl", host, port, log, advertise=side)
