"""The container runtimes, by the recipe's word (``container.runtime``).

A runtime on a host is one module in ``on_host/`` named for that word, holding ``RUNTIME``: an
object that fills the ``Runtime`` protocol (``protocol.py``), mostly by inheriting docker's
grammar (``DockerLike``) and overriding where it differs. Being there registers it: ``names()``
reads the folder (nothing imported), ``get(name)`` imports that one module. Nothing outside this
package compares a runtime's name (``tests/unit/test_runtimes.py``). The containers a Slurm task
starts itself (pyxis, apptainer) are ``task.py``'s.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inkctl.runtimes.protocol import InTask, Runtime

DEFAULT = "docker"  # a recipe that names none


@functools.cache
def names() -> tuple[str, ...]:
    """Every registered runtime's name: the modules of ``on_host/`` (the default first), read
    from the folder without importing them (``validate`` pays nothing for the runtimes)."""
    import os

    folder = os.path.join(os.path.dirname(__file__), "on_host")
    found = sorted(f[:-3] for f in os.listdir(folder) if f.endswith(".py") and not f.startswith("_"))
    return tuple(sorted(found, key=lambda n: n != DEFAULT))


@functools.cache
def get(name: str) -> Runtime:
    """The runtime a recipe (or a planned host) names; KeyError for a name none registered."""
    if name not in names():
        raise KeyError(f"no container runtime {name!r}; known: {', '.join(names())}")
    import importlib

    return importlib.import_module(f"inkctl.runtimes.on_host.{name}").RUNTIME


def in_task_names() -> tuple[str, ...]:
    from inkctl.runtimes.task import IN_TASK

    return tuple(IN_TASK)


def in_task(name: str) -> InTask:
    from inkctl.runtimes.task import IN_TASK

    return IN_TASK[name]
