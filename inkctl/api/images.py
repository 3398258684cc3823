"""The recipe's image to every host that lacks it, host to host (``execute.image.relay``): what
``images push-to-hosts`` and ``up --distribute-image`` run.

The events it sends are ``execute.image.relay``'s, named here for the renderers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from inkctl.api.target import Target, load_target
from inkctl.errors import EXIT_INTERRUPTED, InkctlError
from inkctl.execute.image.relay import ImageHostDone, ImageLayers, ImageReattached, ImageStarted

if TYPE_CHECKING:
    from inkctl.execute.events import Sink
    from inkctl.execute.image.relay import Pushed
    from inkctl.plan.step import Plan
    from inkctl.recipe.reading.loaded import Loaded


# the api, and the events a display of ``images push-to-hosts`` reads (besides Info)
__all__ = ["push_to_hosts", "failure", "distribute_image", "distribute_before_up", "ImageStarted", "ImageLayers",
           "ImageReattached", "ImageHostDone"]


def push_to_hosts(target: Target, *, source: str | None, accept_new: bool, display: Callable[[], Sink],
                  cancel: threading.Event | None = None) -> Pushed:
    """``images push-to-hosts``: load, then the image relayed with its events sent to
    ``display()`` (made once the recipe loaded); ``cancel`` set stops it (exit 130). Hosts it did
    not reach are in the report (``failure``)."""
    loaded, plan, image = load_target(target, "images push-to-hosts")
    interrupt = cancel or threading.Event()
    sink = display()
    try:
        out = distribute_image(loaded, plan, image, source=source, accept_new=accept_new, sink=sink,
                               stop=interrupt)
    finally:
        sink.close()
    if interrupt.is_set():
        raise InkctlError("interrupted: the image did not reach every host; run again to finish",
                          exit_code=EXIT_INTERRUPTED)
    return out


def failure(out: Pushed, target: Target) -> InkctlError | None:
    """The error to end ``images push-to-hosts`` with when a host did not get the image."""
    if not out.failed:
        return None
    return InkctlError(f"{out.image} did not reach {', '.join(out.failed)}:\n" +
                       "\n".join(f"  {h}: {why}" for h, why in out.failed.items()),
                       hint=f"fix what is named, then run `inkctl images push-to-hosts {target.where()}` again: "
                            "only hosts lacking it receive", exit_code=1)


def distribute_image(loaded: Loaded, plan: Plan, image: str | None, *, source: str | None, accept_new: bool,
                     sink: Sink, stop: threading.Event | None = None) -> Pushed:
    """Connect, relay, close; returns the relay's report (``execute.image.relay``)."""
    from inkctl.execute.deploy.preflight import host_image
    from inkctl.execute.hosts.connect import close_all, connect_all
    from inkctl.execute.image.relay import nodes_for, push_to_hosts

    assert loaded.hosts is not None
    ref = host_image(loaded.recipe, plan, image)
    transports = connect_all(list(loaded.hosts), accept_new=accept_new)
    try:
        return push_to_hosts(nodes_for(loaded, plan, transports), ref, source=source, sink=sink, stop=stop,
                             local=_local_daemon)
    finally:
        close_all(transports)


def _local_daemon():
    """This machine's docker daemon (the SDK), the source when no host has the image; None when
    there is none to reach."""
    import logging

    from inkctl.execute.image.local_daemon import LocalDaemon

    try:
        return LocalDaemon()
    except InkctlError as e:
        logging.getLogger(__name__).debug("no local docker daemon: %s", e.message)
        return None


def distribute_before_up(loaded: Loaded, plan: Plan, image: str | None, accept_new: bool, sink: Sink, *,
                         cancel: threading.Event | None = None) -> None:
    """``up --distribute-image``: the image to every host that lacks it, before the preflight. No
    host has it yet (a patched image not built yet): nothing to send, the build makes it."""
    from inkctl.execute.events import Info
    from inkctl.execute.image.relay import NoSource

    try:
        out = distribute_image(loaded, plan, image, source=None, accept_new=accept_new, sink=sink, stop=cancel)
    except NoSource as e:
        sink.emit(Info(text=f"--distribute-image: {e.message}; nothing to send"))
        return
    if out.failed:
        raise InkctlError(f"--distribute-image: {out.image} did not reach {', '.join(out.failed)}:\n" +
                          "\n".join(f"  {h}: {why}" for h, why in out.failed.items()), exit_code=1)
    if out.sent:
        sink.emit(Info(text=f"image {out.image} sent to {', '.join(out.sent)} in {out.seconds:.1f} s"))
