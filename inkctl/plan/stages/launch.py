"""What an engine's stage builder gets: the recipe, every rank's context, its containers, and
how one rank's container is started (``run_step``: the spec, the hotfix wrapper, the env file)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from inkctl.plan.hostvars import HostContext
from inkctl.plan.step import Container, Run, Stage
from inkctl.recipe.model import Recipe

# Runs an engine's server as a second process in the head's container (after a cluster the head's
# first process opened, e.g. Ray), its output on the container's log: ``sh -c SERVE_IN_HEAD inkctl-serve ARGV``.
SERVE_IN_HEAD = 'exec "$@" >/proc/1/fd/1 2>/proc/1/fd/2'
# Where an engine's own files (``EngineSpec.files``: a config file its command line names) are, in every rank's container.
ENGINE_FILES = "/inkctl/engine"


@dataclass(frozen=True)
class Launch:
    recipe: Recipe
    ctxs: list[HostContext]  # rank order: ctxs[0] is the head
    containers: tuple[Container, ...]
    run_step: Callable[[HostContext, list[str], str], Run]  # (rank, command, purpose) -> its container's start

    @property
    def head(self) -> HostContext:
        return self.ctxs[0]

    @property
    def workers(self) -> list[HostContext]:
        return self.ctxs[1:]

    @property
    def nodes(self) -> int:
        return self.recipe.hardware.nodes

    @property
    def runtime(self) -> str:
        return self.recipe.container.runtime


def all_at_once(b: Launch, command: Callable[[HostContext], list[str]], workers: str) -> list[Stage]:
    """Every rank in one stage: the ``workers`` retry their rendezvous until the head answers,
    so nothing is gained by waiting for the head's start."""
    head = b.head
    if not b.workers:
        return [Stage("launch", "start rank 0 (the head)", (b.run_step(head, command(head), "start the head"),))]
    return [Stage("launch", f"start every rank at once (the {workers} retry until the head answers)",
                  (b.run_step(head, command(head), "start the head"),
                   *(b.run_step(c, command(c), f"start rank {c.rank}") for c in b.workers)))]
