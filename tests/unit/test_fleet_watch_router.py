"""The router's health during a replica's restart: a router that answers "unhealthy" while a
replica it routes to is down (vllm-router's /health can) is not a dead router; one that stops
answering, or keeps saying so once every replica serves again, is."""

from __future__ import annotations

import http.server
import threading
from types import SimpleNamespace

from inkctl.api.fleet_watch import _FleetWatch


class _Health(http.server.BaseHTTPRequestHandler):
    code = 503

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(type(self).code)
        self.end_headers()

    def log_message(self, *a):
        pass


def _watch(url: str) -> tuple[_FleetWatch, list]:
    said: list = []
    fleet = SimpleNamespace(name="f", gateway=False,
                            router=SimpleNamespace(health_url=url, hosts=[SimpleNamespace(name="h1")]))
    how = SimpleNamespace(interval=0.05, restart=False, max_restarts_per_hour=3, backoff=1.0)
    w = _FleetWatch(None, fleet, how, lambda kind, text, **kw: said.append((kind, text)), None, None)
    return w, said


def test_an_unhealthy_answer_while_a_replica_restarts_is_not_a_dead_router():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        w, said = _watch(f"http://127.0.0.1:{srv.server_port}/health")
        w.down.add("f-r0")  # a replica found failed, being restarted
        loop = threading.Thread(target=w.router_loop, daemon=True)
        loop.start()
        loop.join(0.6)  # a dozen 503s
        assert loop.is_alive() and said == [] and not w.fatal
        w.down.clear()  # every replica serves again, and the router still says 503: it is the router
        loop.join(5)
        assert not loop.is_alive()
        assert said and said[0][0] == "failure" and "did not answer 3 times (HTTP 503)" in said[0][1]
        assert w.fatal and "the router does not answer" in w.fatal[0].message
    finally:
        srv.shutdown()


def test_a_router_that_does_not_answer_is_dead_even_while_a_replica_restarts():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    port = srv.server_port
    srv.server_close()  # nothing listens there: connection refused
    w, said = _watch(f"http://127.0.0.1:{port}/health")
    w.down.add("f-r0")
    loop = threading.Thread(target=w.router_loop, daemon=True)
    loop.start()
    loop.join(5)
    assert not loop.is_alive() and said and said[0][0] == "failure" and "ConnectError" in said[0][1]
