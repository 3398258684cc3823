"""Server-sent events framing, as the WHATWG HTML standard defines the event stream
(https://html.spec.whatwg.org/multipage/server-sent-events.html#parsing-an-event-stream).

Lines end in CRLF, LF or CR; an event ends at a blank line; each ``data:`` line adds its value
(one leading space removed) to the event's data, lines joined with LF; a line that starts with
``:`` is a comment; ``event:``, ``id:``, ``retry:`` and unknown fields are accepted and not used
here (an OpenAI-compatible stream carries everything in ``data``); an event without data is not
dispatched; an unfinished event at the end of the stream is dropped; a leading byte order mark
is skipped. sse-starlette (under many Python servers) frames with CRLF; vLLM and SGLang with LF.

The hot path is the common one (LF framing, one ``data:`` line per event): one ``in`` test per
read, one split per read, one slice per event. Anything else takes the general path.
"""

from __future__ import annotations

_BOM = b"\xef\xbb\xbf"


class Events:
    """Feed it the body's bytes as they arrive; it gives back the data of each complete event."""

    __slots__ = ("_buf", "_started", "_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._started = False  # the BOM check is done (it needs the stream's first 3 bytes)
        self._cr = False  # the last read ended in CR: an LF that opens the next read belongs to it

    def feed(self, data: bytes) -> list[bytes]:
        """The data of every event that ``data`` completes (possibly none), in order."""
        if self._cr or not self._started or b"\r" in data:
            data = self._normal(data)
        buf = self._buf + data  # (bytes + b"" is the other operand itself, no copy)
        if b"\n\n" not in buf:
            self._buf = buf
            return []
        blocks = buf.split(b"\n\n")
        self._buf = blocks.pop()
        out = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:  # the common event: one data line
                out.append(block[6:])
            elif (found := _data(block)) is not None:
                out.append(found)
        return out

    def _normal(self, data: bytes) -> bytes:
        """The rare cases, before the common path: a BOM at the stream's start, CR line ends."""
        if not self._started:
            data = self._buf + data
            self._buf = b""
            if len(data) < 3 and _BOM.startswith(data):
                self._buf, data = data, b""  # too short to tell yet (an empty read included)
            else:
                self._started = True
                if data.startswith(_BOM):
                    data = data[3:]
            if not data:
                return data
        return self._lf(data) if self._cr or b"\r" in data else data

    def _lf(self, data: bytes) -> bytes:
        """``data`` with every line ending as LF. A CR at the end of a read may be the first half
        of a CRLF that the next read completes: it is kept as a pending LF-to-be, and that next
        read's leading LF (if any) is dropped, so one line ending never becomes two."""
        if self._cr:
            self._cr = False
            if data[:1] == b"\n":
                data = data[1:]
        if data.endswith(b"\r"):
            self._cr = True  # the line did end: count it now, drop a following LF later
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _data(block: bytes) -> bytes | None:
    """The data of one event (its lines without the blank line that ended it), or None when it
    has no data field (a comment, a keep-alive, an ``event:``/``id:``-only block)."""
    lines: list[bytes] = []
    for line in block.split(b"\n"):
        if line[:1] == b":" or not line:
            continue
        name, colon, value = line.partition(b":")
        if name != b"data":
            continue  # event, id, retry and unknown fields: nothing an OpenAI stream needs
        lines.append(value[1:] if colon and value[:1] == b" " else value)
    return b"\n".join(lines) if lines else None
