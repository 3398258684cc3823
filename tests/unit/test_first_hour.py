"""Issue 29 section 3, "The first hour, again": each a defect found as a new user would, each pinned
here by a test that failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def inkctl(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("INKCTL_")}
    e.update(PYTHONPATH=str(ROOT), COLUMNS="80", NO_COLOR="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], cwd=cwd or ROOT, env=e,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name,cc,gib", [("rtx-4090", "8.9", 24), ("l4", "8.9", 24), ("a10g", "8.6", 24),
                                         ("rtx-a6000", "8.6", 48), ("l40", "8.9", 48), ("rtx-3090", "8.6", 24)])
def test_common_workstation_and_cloud_gpus_are_known(name, cc, gib):
    from inkctl.recipe.accelerators import lookup

    a = lookup(name)
    assert a is not None and a.arch == cc and a.memory_gib == gib and a.vendor == "nvidia"
