"""podman: docker's grammar, but for these.

- ``rm --force`` of a container that is gone exits 1 unless ``--ignore`` is given, which it is;
- ``ps --format``: its Go template reads labels with ``index .Labels``, docker's with ``.Label``;
- ``build`` pulls the base image unless told ``--pull=never`` (the base is there);
- GPUs reach its containers through CDI (``--device nvidia.com/gpu=...``), not ``--gpus``;
- no daemon: when it does not answer, ``podman info`` says why;
- its store reuses a layer by its content (diff ids), whatever is below it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from inkctl.errors import Problem
from inkctl.runtimes.grammar import Argv, DockerLike

if TYPE_CHECKING:
    from inkctl.runtimes.protocol import Runtime


class Podman(DockerLike):
    name = "podman"
    default_gpus = "cdi"
    label_field = '{{index .Labels "%s"}}'
    build_pull = ("--pull=never",)

    def remove(self, *containers: str) -> Argv:
        return (*super().remove(*containers), "--ignore")

    def findings(self, gpus: str, security_opt: Sequence[str]) -> list[Problem]:
        out = []
        if gpus == "all":
            out.append(Problem("podman exposes GPUs through CDI, not --gpus", path="container.gpus",
                               hint="set container.gpus: cdi (--device nvidia.com/gpu=all)"))
        if gpus == "cdi" and "label=disable" not in security_opt:
            out.append(Problem("CDI devices on SELinux hosts need label=disable", path="container.security_opt",
                               hint="add 'label=disable' to security_opt", severity="warning"))
        return out

    def not_answering(self, host: str) -> str:
        return f"podman has no daemon: see what `podman info` says on {host} (storage, runtime, configuration)"

    def relay(self) -> dict[str, Any]:
        return {**super().relay(), "by": "diff", "whole_if": None}


RUNTIME: Runtime = Podman()  # mypy checks it fills the protocol
