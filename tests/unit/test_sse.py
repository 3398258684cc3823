"""SSE framing per the standard (inkctl/client/sse.py), and a whole streamed completion from a
real server on loopback that frames with CRLF, as sse-starlette does by default."""

from __future__ import annotations

import asyncio
import json

import pytest

from inkctl.client.sse import Events
from inkctl.client.stream import chat_body, new_pool, stream


def feed_all(*reads: bytes) -> list[bytes]:
    events = Events()
    return [d for r in reads for d in events.feed(r)]


def chunk(text: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode()


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending_frames_the_same_events(eol):
    body = b"data: one" + eol + eol + b"data: two" + eol + eol + b"data: [DONE]" + eol + eol
    assert feed_all(body) == [b"one", b"two", b"[DONE]"]


def test_crlf_split_between_its_cr_and_its_lf_is_one_line_ending():
    # the CR ends one read, the LF opens the next: one line end, not a blank line (no empty event)
    reads = [b"data: a\r", b"\ndata: b\r\n\r", b"\n", b"data: c\r\n", b"\r\ndata: d\r\n\r\n"]
    assert feed_all(*reads) == [b"a\nb", b"c", b"d"]


def test_an_event_split_anywhere_across_reads():
    body = b"data: {\"x\": 1}\r\n\r\n: keep-alive\r\n\r\ndata: second\r\n\r\n"
    want = [b'{"x": 1}', b"second"]
    for cut in range(len(body) + 1):
        assert feed_all(body[:cut], body[cut:]) == want, cut
    assert feed_all(*(body[i:i + 1] for i in range(len(body)))) == want  # byte by byte


def test_multi_line_data_is_joined_with_lf():
    body = b'data: {"a":\ndata:  1}\ndata\n\n'
    # one leading space removed per line (the second keeps one), a bare "data" adds an empty line
    assert feed_all(body) == [b'{"a":\n 1}\n']
    assert json.loads(feed_all(b'data: {"a":\r\ndata: 1}\r\n\r\n')[0]) == {"a": 1}


def test_comments_and_other_fields_are_tolerated():
    body = (b": a comment\n\n"  # a comment alone: no event
            b"event: message\nid: 7\nretry: 100\n: note\ndata: x\nunknown: y\n\n"
            b"id: 8\n\n"  # no data: not dispatched
            b"data:y\n\n")  # no space after the colon
    assert feed_all(body) == [b"x", b"y"]


def test_leading_bom_is_skipped_even_when_split_and_an_unfinished_event_is_dropped():
    assert feed_all(b"\xef\xbb", b"\xbfdata: a\n\n", b"data: never finished\n") == [b"a"]


async def _serve(frames: list[bytes]):
    """A server on loopback answering one chat completion with ``frames``, one HTTP chunk each."""
    async def answer(reader, writer):
        await reader.readuntil(b"\r\n\r\n")  # the request's head; its body is not needed
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                     b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n")
        for f in frames:
            writer.write(b"%x\r\n%s\r\n" % (len(f), f))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, "127.0.0.1", 0)


def test_a_crlf_framed_stream_is_read_to_its_end():
    """sse-starlette's framing: CRLF, an id per event, a ping comment, a CRLF split across
    chunks; the completion reads whole (before the fix: no event ever parsed)."""
    frames = [b": ping - 2024-01-01 00:00:00\r\n\r\n",
              b"id: 1\r\ndata: " + chunk("Hel") + b"\r\n\r",
              b"\nid: 2\r\ndata: " + chunk("lo") + b"\r\n\r\n",
              b"data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode()
              + b"\r\n\r\ndata: [DONE]\r\n\r\n"]

    async def go():
        server = await _serve(frames)
        port = server.sockets[0].getsockname()[1]
        try:
            pool = new_pool(f"http://127.0.0.1:{port}/v1/chat/completions")
            return await stream(pool, chat_body("m", [{"role": "user", "content": "hi"}], 8))
        finally:
            server.close()

    out = asyncio.run(go())
    assert (out.ok, out.error, out.text, out.chunks, out.output_tokens, out.prompt_tokens) == (True, "", "Hello", 2, 2, 3)
