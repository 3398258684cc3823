"""nerdctl (containerd's docker-compatible command): docker's grammar, but for these.

- ``ps --format`` has no ``.State``: its status (``Up``, ``Exited (0) ...``, ``Created``) is read;
- ``build`` is BuildKit's, which leaves no container of a failed step (no ``--force-rm``);
- containerd's image store loads whole archives only: the image relay skips no layer;
- the daemon to start is containerd.

Its argv is planned and unit-tested (``tests/unit/test_runtimes.py``); the test cluster has no
nerdctl host, so it has not run against a real one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inkctl.runtimes.grammar import DockerLike

if TYPE_CHECKING:
    from inkctl.runtimes.protocol import Runtime


class Nerdctl(DockerLike):
    name = "nerdctl"
    daemon = "containerd"
    state_field = "{{.Status}}"
    build_flags = ()

    def relay(self) -> dict[str, Any]:
        return {**super().relay(), "by": "diff", "whole_if": None,
                "whole": "nerdctl's containerd image store loads whole archives only"}


RUNTIME: Runtime = Nerdctl()  # mypy checks it fills the protocol
