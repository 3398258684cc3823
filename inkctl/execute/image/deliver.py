"""Deliver a locally built image: ``docker save`` streamed into ``docker load``/``podman load`` on
the host, over that host's existing SSH connection. No temp files on either side.

Each host gets its own save stream, so hosts load in parallel at their own pace.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from inkctl.execute.state.images import Counted, HostImages
from inkctl.execute.image.local_daemon import LocalDaemon
from inkctl.execute.hosts.transport import HostError


@dataclass
class Delivered:
    host: str
    image_id: str
    bytes_sent: int
    seconds: float


def deliver(daemon: LocalDaemon, host: HostImages, tag: str, local_id: str,
            on_progress: Callable[[int], None] | None = None) -> Delivered:
    """Stream ``tag`` from the local daemon into ``host``; check it arrived as the same image."""
    t0 = time.monotonic()
    counted = Counted(daemon.save(tag), on_progress)
    res = host.load(counted)
    if not res.ok:
        err = (res.err_text() or res.text()).strip().splitlines()
        raise HostError(host.host, "runtime", f"{host.runtime} load of {tag} failed after {counted.sent} bytes: "
                                              f"{err[-1] if err else 'exit ' + str(res.exit_code)}",
                        hint=f"check free disk space and {host.runtime} on {host.host}")
    got = host.inspect(tag)
    if got is None:
        raise HostError(host.host, "runtime", f"{host.runtime} load finished but {tag} is not there",
                        hint=f"{host.runtime} load printed: {res.text().strip()[-200:]}")
    if got.id != local_id:
        raise HostError(host.host, "runtime", f"{tag} arrived as {got.id}, but the local image is {local_id}",
                        hint="a different image carries that tag there: remove it and run again")
    return Delivered(host.host, got.id, counted.sent, time.monotonic() - t0)
