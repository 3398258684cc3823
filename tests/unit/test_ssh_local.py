"""LocalTransport (``address: localhost``) keeps the SSH transport's contract: argv straight to
exec (no shell), atomic writes with the mode set before the content, streaming in and out."""

from __future__ import annotations

import os
import threading
import time

import pytest

from inkctl.execute.hosts.connect import connect_host
from inkctl.execute.hosts.local import LocalTransport
from inkctl.execute.hosts.transport import HostError
from inkctl.recipe.hosts import Host


def test_localhost_without_port_is_local():
    assert isinstance(connect_host(Host(name="me", address="localhost"), accept_new=False), LocalTransport)


def test_argv_is_never_parsed_by_a_shell(tmp_path):
    t = LocalTransport("me")
    res = t.run(["printf", "%s|", "$(touch pwned)", "a;b", "`x`"])
    assert res.text() == "$(touch pwned)|a;b|`x`|" and not (tmp_path / "pwned").exists()
    assert t.run(["sh", "-c", "echo e >&2; exit 4"]).exit_code == 4
    assert t.run(["no-such-binary-inkctl"]).exit_code == 127


def test_stdin_bytes_and_streamed_chunks():
    t = LocalTransport("me")
    assert t.run(["cat"], stdin=b"abc").text() == "abc"
    res = t.run(["wc", "-c"], stdin=(b"x" * 65536 for _ in range(32)))
    assert res.text().strip() == str(32 * 65536)


def test_timeout_names_the_host():
    with pytest.raises(HostError) as e:
        LocalTransport("me").run(["sleep", "5"], timeout=0.2)
    assert e.value.cause == "timeout" and e.value.message.startswith("me: timed out")


def test_put_atomic_with_mode(tmp_path):
    t = LocalTransport("me")
    path = tmp_path / "a" / "b" / "rank0.env"
    t.put(str(path), b"K=v\n", 0o600)
    assert path.read_bytes() == b"K=v\n" and oct(path.stat().st_mode & 0o777) == "0o600"
    t.put(str(path), b"K=w\n", 0o600)
    assert os.listdir(path.parent) == ["rank0.env"] and path.read_bytes() == b"K=w\n"
    (tmp_path / "file").write_text("")
    with pytest.raises(HostError):
        t.put(str(tmp_path / "file" / "x"), b"", 0o644)


def test_stream_lines_exit_code_and_stop():
    t = LocalTransport("me")
    lines: list[str] = []
    assert t.stream(["sh", "-c", "echo a; echo b >&2; exit 2"], lines.append) == 2
    assert sorted(lines) == ["a", "b"]
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    assert t.stream(["sleep", "10"], lambda _: None, stop) == -1
    assert time.monotonic() - t0 < 3
