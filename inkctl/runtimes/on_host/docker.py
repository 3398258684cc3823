"""docker: the grammar every docker-like runtime starts from (``grammar.DockerLike``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inkctl.runtimes.grammar import DockerLike

if TYPE_CHECKING:
    from inkctl.runtimes.protocol import Runtime


class Docker(DockerLike):
    name = "docker"


RUNTIME: Runtime = Docker()  # mypy checks it fills the protocol
