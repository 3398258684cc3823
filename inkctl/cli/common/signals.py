"""Ctrl-C and SIGTERM, for the commands that run long: only the command line installs handlers.

The api takes a cancel token (a ``threading.Event``) instead: the first signal sets it and the
work stops at its next check and cleans up (rolls back, removes its containers). The handler
does not raise: an exception thrown at an arbitrary bytecode can leave a lock held (a ``with
lock:`` half entered) and hang the cleanup that follows. A second signal does raise
(``again()``), to abandon a cleanup that hangs on a dead host; ``app.main`` turns it into exit
130. A Python caller of the api sets the token itself, from whatever it listens to.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)


def on_signals(interrupt: threading.Event, again: Callable[[], BaseException]) -> dict:
    """Install the handlers; returns the previous ones for ``restore``."""
    def handler(signum, frame):
        if interrupt.is_set():
            raise again()
        interrupt.set()

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread (tests calling main() from a thread)
            log.debug("signal %s: not the main thread; its handler stays as it was", sig)
    return previous


def restore(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@contextmanager
def cancel_token(again: Callable[[], BaseException] = KeyboardInterrupt) -> Iterator[threading.Event]:
    """A cancel token for one api call, set by the first Ctrl-C or SIGTERM; the second raises
    ``again()``. The handlers that were there before come back on the way out."""
    cancel = threading.Event()
    previous = on_signals(cancel, again)
    try:
        yield cancel
    finally:
        restore(previous)
