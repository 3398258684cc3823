"""The image relay's stream on one host (``relay_host.Spool``, ``serve``, ``Upstream``), over real
sockets on loopback: a host reads from the one before it; when that one stops answering, it is
named and the host before that serves the rest from the byte the reader has."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from inkctl.execute.image import relay_host as rh

TOKEN = b"t" * 64


def test_a_stuck_reader_holds_the_stream_back_only_until_another_reads(monkeypatch):
    monkeypatch.setattr(rh, "STUCK_S", 0.3)
    data = os.urandom(3 << 20)
    spool = rh.Spool(window=2 << 20, lag=1 << 20, serving=True)
    stuck_at = []

    def stuck(part):  # takes 1 MiB, then hangs (its host cut off)
        stuck_at.append(len(part))
        if len(stuck_at) > 1:
            time.sleep(60)

    threading.Thread(target=spool.read_from, args=("b", 0, stuck), daemon=True).start()
    def write() -> None:
        for i in range(0, len(data), 65536):
            spool.write(data[i:i + 65536])
        spool.end()

    wrote = threading.Thread(target=write, daemon=True)
    wrote.start()
    time.sleep(0.5)
    assert wrote.is_alive() and spool.total <= (2 << 20) + 65536  # held back by the stuck reader
    got = bytearray()
    assert spool.read_from("c", (1 << 20), got.extend)  # the next host, from an earlier byte
    assert bytes(got) == data[1 << 20:]
    wrote.join(5)
    assert not spool.read_from("late", 0, got.extend)  # byte 0 is gone: refused, not garbage


def test_the_host_after_a_dead_one_reattaches_to_the_one_before_it(monkeypatch, capsys):
    monkeypatch.setattr(rh, "PEER_TIMEOUT_S", 0.5)
    monkeypatch.setattr(rh, "PING_TIMEOUT_S", 0.5)
    data = os.urandom(5 << 20)
    a = rh.Spool(window=8 << 20, lag=8 << 20, serving=True)
    port_a = rh.serve({"bind": "127.0.0.1"}, TOKEN, a).server_address[1]
    b = rh.Spool(window=8 << 20, lag=8 << 20, serving=True)
    server_b = rh.serve({"bind": "127.0.0.1"}, TOKEN, b)
    port_b = server_b.server_address[1]
    for s in (a, b):
        s.write(data[:2 << 20])
    up = rh.Upstream([{"name": "b", "url": f"http://127.0.0.1:{port_b}"},
                      {"name": "a", "url": f"http://127.0.0.1:{port_a}"}], TOKEN.decode())
    got = bytearray(up.read(1 << 20))
    # b dies: it stops sending and its port stops answering
    b.cond.acquire()  # its readers freeze mid-stream
    server_b.shutdown()
    server_b.server_close()
    a.write(data[2 << 20:])
    a.end()
    while True:
        block = up.read(1 << 20)
        if not block:
            break
        got.extend(block)
    b.cond.release()
    assert bytes(got) == data
    dead = [json.loads(x) for x in capsys.readouterr().out.splitlines() if '"dead"' in x]
    assert dead and dead[0]["host"] == "b" and dead[0]["next"] == "a" and dead[0]["at"] >= 1 << 20


def test_a_stream_cut_short_is_not_taken_for_its_end(monkeypatch, capsys):
    monkeypatch.setattr(rh, "PEER_TIMEOUT_S", 0.5)
    monkeypatch.setattr(rh, "PING_TIMEOUT_S", 0.5)
    a = rh.Spool(window=4 << 20, lag=4 << 20, serving=True)
    port = rh.serve({"bind": "127.0.0.1"}, TOKEN, a).server_address[1]
    a.write(b"x" * 1000)
    up = rh.Upstream([{"name": "a", "url": f"http://127.0.0.1:{port}"}], TOKEN.decode())
    assert up.read(1 << 20) == b"x" * 1000
    a.serving = False  # it stops serving (its stream is gone): no end mark was sent
    with a.cond:
        a.cond.notify_all()
    with pytest.raises(OSError, match="went away after 1000 bytes"):
        up.read(1 << 20)
