"""``weights`` below the command line: load (the inventory, or the nodes Slurm names), check that
the recipe's model is pinned and has somewhere to go, the Hub token into the scrubber, then the
model (and its speculative draft) relayed host to host (``inkctl.weights.run``) under the
signal handlers; the report comes back, the failure's error is raised.

The events it sends are ``inkctl.weights.distribute``'s, named here for the renderers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from inkctl.api.target import Target, Targeted, load_target
from inkctl.errors import EXIT_INTERRUPTED, Cancelled, InkctlError, UsageError
from inkctl.weights.distribute import (WeightsHostDone, WeightsProgress, WeightsReattached, WeightsScanned,
                                       WeightsStarted)

if TYPE_CHECKING:
    from inkctl.execute.events import Sink
    from inkctl.recipe.reading.loaded import Loaded
    from inkctl.recipe.manifest import Manifest
    from inkctl.scrub import Scrubber
    from inkctl.weights.run import Report

# the api, and the events a display of ``weights`` reads (besides ``execute.events``' Info)
__all__ = ["WeightsOptions", "weights", "prepare", "put", "WeightsScanned", "WeightsStarted", "WeightsProgress",
           "WeightsReattached", "WeightsHostDone"]


@dataclass(frozen=True)
class WeightsOptions:
    source: str | None = None  # --from: the host that downloads (default: the head, rank 0)
    verify: bool = False
    repair: bool = False
    bwlimit: float | None = None  # MB/s per host-to-host stream
    accept_new: bool = False


@dataclass
class Prepared:
    """What ``weights`` acts on, checked before any host is reached."""

    targeted: Targeted
    models: list[tuple[Loaded, Manifest]]  # the model, then its draft (same cache, same copies)
    source: str  # the host that downloads
    scrub: Scrubber  # armed with the Hub token
    hub_url: str
    hub_env: dict[str, str] = field(default_factory=dict)  # the token, as the hosts' env names it


def weights(target: Target, options: WeightsOptions, display: Callable[[Manifest], Sink], *,
            on_report: Callable[[Report], None], nodes: Callable[[], Targeted] | None = None,
            cancel: threading.Event | None = None) -> None:
    """Put the pinned model (then its draft) on every host. ``display(manifest)`` is made for each
    model once the preparation passed; ``on_report`` gets each model's report before its failure
    (a host failed, a file is wrong) is raised. ``nodes``: the hosts come from Slurm
    (``api/slurm.slurm_target``), not from the target's inventory. ``cancel`` set stops the copies."""
    ready = prepare(target, options, nodes)
    for loaded, manifest in ready.models:
        report = put(ready, loaded, manifest, options, display(manifest), cancel=cancel)
        on_report(report)
        if report.failed or report.bad:
            from inkctl.weights.hub import token_how

            raise InkctlError(report.failure_text(), exit_code=1,
                              hint=report.hint(target.recipe, target.hosts, token_how(loaded.recipe)))


def prepare(target: Target, options: WeightsOptions, nodes: Callable[[], Targeted] | None = None) -> Prepared:
    """Load, and refuse (exit 2) what ``weights`` cannot do, before any host is reached."""
    from inkctl.recipe.manifest import host_cache_template, read_manifest
    from inkctl.scrub import arm
    from inkctl.weights.hub import endpoint, token_secret

    targeted = nodes() if nodes is not None else load_target(target, "weights")
    loaded, plan = targeted.loaded, targeted.plan
    if loaded.recipe.model.local:
        raise UsageError(f"model.repo is a local directory ({loaded.recipe.model.repo}): `inkctl weights` puts Hub models in the hosts' Hub cache",
                         hint="put the directory on every host yourself (same path); `inkctl lock` pins its files")
    manifest = read_manifest(loaded)
    if host_cache_template(loaded.recipe) is None:
        raise UsageError("the recipe does not put the Hub cache on the hosts, so there is nowhere to put the weights",
                         hint="mount the host's Hub cache into the container (container.mounts) or set model.weights.cache")
    if not loaded.recipe.model.weights.manage:
        raise UsageError("model.weights.manage is false: inkctl does not manage this recipe's weights")
    if manifest is None:
        from inkctl.bundled import lock_command

        raise InkctlError(f"the model is not pinned yet: {loaded.recipe.model.repo} has no manifest in the lock file",
                          hint=f"run {lock_command(loaded.path, f' --hosts {target.hosts}' if target.hosts else '')} first",
                          exit_code=2)
    names = [h.name for h in plan.hosts]
    source = options.source or names[0]
    if source not in names:
        raise UsageError(f"--from {source}: not a host of the inventory ({', '.join(names)})")
    token_name, token = token_secret(loaded.recipe)
    scrub = arm([token.reveal()] if token is not None else [])  # the one scrubber: the run's record too
    return Prepared(targeted, [(loaded, manifest), *_draft(loaded, target)], source, scrub, endpoint(loaded.recipe),
                    {token_name: token.reveal()} if token is not None else {})


def _draft(loaded: Loaded, target: Target) -> list[tuple[Loaded, Manifest]]:
    """The speculative draft, pinned: the same cache, the same copies, after the model."""
    from inkctl.recipe.draft import draft_view
    from inkctl.recipe.manifest import read_draft_manifest

    draft = read_draft_manifest(loaded)
    if draft is not None:  # pinned: the recipe has a draft (read_draft_manifest)
        view = draft_view(loaded.recipe)
        assert view is not None
        return [(replace(loaded, recipe=view), draft)]
    if loaded.recipe.speculative is not None and loaded.recipe.speculative.draft is not None:
        raise InkctlError(f"the draft model is not pinned yet: {loaded.recipe.speculative.draft.repo} has no manifest "
                          "in the lock file", hint=f"run `inkctl lock {target.recipe}"
                          + (f" --hosts {target.hosts}" if target.hosts else "") + "` first", exit_code=2)
    return []


def put(ready: Prepared, loaded: Loaded, manifest: Manifest, options: WeightsOptions, display: Sink, *,
        cancel: threading.Event | None = None) -> Report:
    """One model on every host: its events go to ``display`` (scrubbed, and in the run's record);
    ``cancel`` set stops the copies (partial files are kept); Cancelled raised meanwhile (the
    command line's second Ctrl-C) abandons them at once."""
    from inkctl import runlog
    from inkctl.execute.events import ScrubbingSink
    from inkctl.weights.run import run_weights

    sink = ScrubbingSink(runlog.recording(display), ready.scrub)
    interrupt = cancel or threading.Event()
    try:
        report = run_weights(loaded, ready.targeted.plan, ready.targeted.image, manifest, sink, source=ready.source,
                             verify=options.verify, repair=options.repair, accept_new=options.accept_new,
                             hub_url=ready.hub_url, hub_env=ready.hub_env, interrupt=interrupt,
                             bwlimit=options.bwlimit * 1e6 if options.bwlimit else None)
    except Cancelled:  # a second Ctrl-C: the copies stop where they are
        raise _interrupted() from None
    except InkctlError as e:
        if interrupt.is_set():
            raise _interrupted() from None
        ready.scrub.error(e)
        raise
    finally:
        sink.close()
    if interrupt.is_set():
        raise _interrupted()
    return report


def _interrupted() -> InkctlError:
    return InkctlError("interrupted: the copies stopped; partial files are kept and the next run resumes them",
                       exit_code=EXIT_INTERRUPTED)
