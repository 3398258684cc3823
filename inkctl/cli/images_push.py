"""``inkctl images push-to-hosts``: the recipe's image from the host that has it to every host
that lacks it, host to host along a chain (``inkctl.execute.image.relay``). Thin: flags ->
``inkctl.api.images.push_to_hosts`` (load, relay, Ctrl-C) -> print."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from inkctl.cli.app import app
from inkctl.cli.common.options import AcceptOpt, HostsOpt, OutputOpt, RecipeArg, SetOpt, output_format

images_app = typer.Typer(help="The recipe's image on every host: streamed host to host, no registry needed.",
                         no_args_is_help=True)
app.add_typer(images_app, name="images")


@images_app.command("push-to-hosts")
def push_to_hosts_cmd(
    recipe: Path = RecipeArg,
    hosts: Optional[Path] = HostsOpt,
    set_: Optional[List[str]] = SetOpt,
    from_: Optional[str] = typer.Option(None, "--from", help="Host that sends the image (default: the first host that has it)."),
    accept_new_host_keys: bool = AcceptOpt,
    output: str = OutputOpt,
) -> None:
    """Stream the image the recipe runs (a built one if patches.mode is build) from the host
    that has it (or this machine's docker daemon, when no host has it) to every host that
    lacks it: a chain over the cluster network, each host loading and forwarding at once
    (docker or podman, mixed). Hosts that have it are skipped; layers every host has are
    not sent; a relay host that dies is named and the hosts after it go on."""
    fmt = output_format(output)
    from inkctl.api import images as api
    from inkctl.api.target import Target

    target = Target.of(recipe, hosts, set_)
    from inkctl.cli.common.signals import cancel_token
    from inkctl.errors import Cancelled

    with cancel_token(lambda: Cancelled(started=True)) as cancel:
        out = api.push_to_hosts(target, source=from_, accept_new=accept_new_host_keys, display=lambda: _display(fmt),
                                cancel=cancel)
    if fmt == "json":
        print(json.dumps(out.as_dict()))
    else:
        _summary(out)
    failure = api.failure(out, target)
    if failure is not None:
        raise failure


def _display(fmt: str):
    """The relay's progress: JSON lines, or a line per host as it goes."""
    if fmt == "json":
        from inkctl.execute.events import JsonLines

        return JsonLines()
    return _Lines()


class _Lines:
    """Text progress: a line when a host starts, then every 25% of what the source sent."""

    def __init__(self):
        from inkctl.cli.show.terminal import console

        self.out = console()

    def emit(self, event) -> None:
        from inkctl.api.images import ImageHostDone, ImageLayers, ImageReattached, ImageStarted

        if isinstance(event, ImageStarted):
            self.out.print(f"{event.host}: receiving from {event.source}", markup=False, highlight=False)
        elif isinstance(event, ImageLayers):
            what = (f"the whole image: {event.whole}" if event.whole else
                    f"has {event.have} of {event.of} layers" if event.have else "has none of its layers")
            self.out.print(f"{event.host}: {what}", markup=False, highlight=False)
        elif isinstance(event, ImageReattached):
            self.out.print(f"{event.host}: {event.dead} went away ({event.why}); now from the host before it",
                           markup=False, highlight=False)
        elif isinstance(event, ImageHostDone):
            what = (f"loaded, {_mib(event.bytes)} at {_mib(int(event.rate))}/s" if event.ok
                    else f"FAILED: {event.error}")
            self.out.print(f"{event.host}: {what}", markup=False, highlight=False)
        elif hasattr(event, "text"):
            self.out.print(event.text, markup=False, highlight=False)

    def close(self) -> None:
        pass


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _summary(out) -> None:
    from inkctl.cli.show.terminal import console

    c = console()
    c.print(f"{out.image}: {out.image_id[:19]} from {out.source}", markup=False)
    if out.had:
        c.print(f"  already there: {', '.join(out.had)}", markup=False)
    if out.sent:
        c.print(f"  sent to {', '.join(out.sent)} in {out.seconds:.1f} s "
                f"({_mib(out.source_bytes)} from {out.source})", markup=False)
    for h, dead in out.reattached:
        c.print(f"  {h} reattached around {dead}", markup=False)
