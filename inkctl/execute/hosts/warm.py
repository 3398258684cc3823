"""Imports started early, in a background thread, for what a command will need: ``up`` starts
importing paramiko while the recipe loads. A module of its own with nothing to import, so
that asking costs nothing."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

_WARMING: set[str] = set()  # what warm_imports has started importing in this process


def warm_imports(*modules: str) -> None:
    """Import ``modules`` in a background thread: ``up`` starts importing paramiko while the
    recipe loads, off the critical path. A module already imported (or already being warmed)
    is not asked again."""
    import importlib
    import sys

    todo = [m for m in modules if m not in sys.modules and m not in _WARMING]
    if not todo:
        return
    _WARMING.update(todo)

    def warm():
        for m in todo:
            try:
                importlib.import_module(m)
            except ImportError as e:  # the command that needs it says so
                log.debug("warming %s: %s", m, e)

    threading.Thread(target=warm, daemon=True, name="warm-imports").start()
