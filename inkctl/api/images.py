"""The recipe's image to every host that lacks it, host to host (``execute.image.relay``): what
``images push-to-hosts`` and ``up --distribute-image`` run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.errors import InkctlError

if TYPE_CHECKING:
    import threading

    from inkctl.execute.events import Sink
    from inkctl.execute.image.relay import Pushed
    from inkctl.plan.step import Plan
    from inkctl.recipe.loaded import Loaded


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


def distribute_before_up(loaded: Loaded, plan: Plan, image: str | None, accept_new: bool, sink: Sink) -> None:
    """``up --distribute-image``: the image to every host that lacks it, before the preflight. No
    host has it yet (a patched image not built yet): nothing to send, the build makes it."""
    from inkctl.execute.events import Info
    from inkctl.execute.image.relay import NoSource

    try:
        out = distribute_image(loaded, plan, image, source=None, accept_new=accept_new, sink=sink)
    except NoSource as e:
        sink.emit(Info(text=f"--distribute-image: {e.message}; nothing to send"))
        return
    if out.failed:
        raise InkctlError(f"--distribute-image: {out.image} did not reach {', '.join(out.failed)}:\n" +
                          "\n".join(f"  {h}: {why}" for h, why in out.failed.items()), exit_code=1)
    if out.sent:
        sink.emit(Info(text=f"image {out.image} sent to {', '.join(out.sent)} in {out.seconds:.1f} s"))
