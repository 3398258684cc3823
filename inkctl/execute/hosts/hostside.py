"""What the programs inkctl runs ON hosts share (``execute/image/relay_host.py``, the image
relay; ``weights/onhost.py``, the weights relay and scan): their answers, JSON lines on
stdout, and reading the file inkctl writes for them once they listen (their sources).

Standard library only, and Python 3.8's: these programs run with a host's python3 (or an
engine image's), which has nothing of inkctl. Each is sent as ONE file: this module's text
takes the place of the line that imports it (``hosts/program.py``, at send time), so the
host runs exactly what a test here imports.
"""

import json
import os
import sys
import threading
import time

PROGRESS_EVERY_S = 0.25  # a progress line at most this often
OUT_LOCK = threading.Lock()


def say(**event):
    """One answer: a JSON line, whole (threads write one line at a time)."""
    with OUT_LOCK:
        sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def wait_for(path, seconds, remove=False, poll=0.02):
    """The JSON document inkctl writes at ``path`` once it knows it (None after ``seconds``);
    ``remove``: read once, nothing of it stays on disk."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.exists(path):
            try:
                with open(path) as fh:
                    doc = json.load(fh)
            except ValueError:
                time.sleep(0.01)  # being written: read it again
                continue
            if remove:
                os.unlink(path)
            return doc
        time.sleep(poll)
    return None
