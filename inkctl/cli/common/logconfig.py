"""Logging for the command line: quiet by default, everything with --debug.

Every module logs to ``logging.getLogger(__name__)`` (under ``inkctl``). On stderr: warnings
and errors, one line each (``inkctl: warning: ...``); with ``--debug`` or ``INKCTL_DEBUG=1``
every debug line, timed and named, with tracebacks. A recorded command (``inkctl.runlog``)
also writes every debug line to its record's debug.log, whatever stderr shows. Every line
passes the scrubber.
"""

from __future__ import annotations

import logging
import sys


class Terse(logging.Formatter):
    def __init__(self, debug: bool):
        super().__init__()
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        from inkctl.scrub import active

        text = f"inkctl: {record.levelname.lower()}: {record.getMessage()}"
        if self.debug:
            text = f"{self.formatTime(record, '%H:%M:%S')} {record.name}: " + text
            if record.exc_info:
                text += "\n" + self.formatException(record.exc_info)
        return active().text(text)


class _Stderr(logging.StreamHandler):
    """Writes to the sys.stderr of the moment (a test's capture, a redirected stream)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


_HANDLER = _Stderr()


def configure(debug: bool) -> None:
    root = logging.getLogger("inkctl")
    if _HANDLER not in root.handlers:
        root.addHandler(_HANDLER)
    _HANDLER.setFormatter(Terse(debug))
    _HANDLER.setLevel(logging.DEBUG if debug else logging.WARNING)
    # the logger passes DEBUG when a record's debug.log or --debug wants it (runlog.start)
    if debug or root.level in (logging.NOTSET,) or root.level > logging.WARNING:
        root.setLevel(logging.DEBUG if debug else logging.WARNING)
