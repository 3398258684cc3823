"""inkctl top's table from two scrapes: per replica and the router, within 80 columns."""

from __future__ import annotations

import io

from rich.console import Console

from inkctl.api.measure.top import top_rows
from inkctl.cli.fleet import top_table
from inkctl.client.prometheus import parse
from tests.cluster.fake_engine.metrics import Metrics
from tests.unit.test_prometheus import ROUTER


def test_top_rows_and_table():
    a, b = Metrics(), Metrics()
    t = [("replica 0", "vllm", "http://h1:8000/metrics"), ("replica 1", "sglang", "http://h2:8000/metrics"),
         ("router", "router", "http://h1:29000/metrics")]
    before = {t[0][2]: (parse(a.text("vllm", "m")), ""), t[1][2]: (parse(b.text("sglang", "m")), ""),
              t[2][2]: (parse(ROUTER.replace("} 3", "} 1")), "")}
    for m, n in ((a, 3), (b, 1)):
        for _ in range(n):
            m.started(4)
            m.first_token(0.05)
            m.finished_one(20, 0.5, "stop")
    a.started(4)
    now = {t[0][2]: (parse(a.text("vllm", "m")), ""), t[1][2]: (None, "connection refused"),
           t[2][2]: (parse(ROUTER), "")}
    rows = top_rows(t, before, now, 2.0)
    assert rows[0]["running"] == 1 and rows[0]["gen_tokens_per_s"] == 30.0 and rows[0]["requests"] == 3
    assert 0.04 < rows[0]["ttft_p50_s"] <= 0.06
    assert rows[1]["error"] == "connection refused"
    assert rows[2]["requests"] == 3 and rows[2]["requests_per_s"] == 1.0
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(top_table(rows))
    text = out.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "replica 0" in text and "30.0" in text and "connection refused" in text


def test_scrape_uses_watchs_http_client_settings(monkeypatch):
    """top scrapes with the same client as watch (httpx, trust_env off): a proxy in the
    environment is not used (with urllib it was: every scrape went to the dead proxy), an
    answer that is not 200 and a refused connection are one short error each."""
    import http.server
    import socket
    import threading

    from inkctl.api.measure.top import scrape

    body = Metrics().text("vllm", "m").encode()

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            ok = self.path == "/metrics"
            self.send_response(200 if ok else 404)
            self.send_header("Content-Length", str(len(body) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # nothing listens here once closed
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{dead}")
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{dead}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        got, err = scrape(base + "/metrics")
        assert err == "" and got is not None and got.total(("vllm:num_requests_running",)) is not None
        assert scrape(base + "/nothing") == (None, "HTTP 404 Not Found")
        got, err = scrape(f"http://127.0.0.1:{dead}/metrics", timeout=2)
        assert got is None and err
    finally:
        srv.shutdown()
