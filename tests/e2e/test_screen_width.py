"""What a deployment's life leaves on an 80-column terminal (a real tmux pane), on the test
cluster: up (the live view, health, smoke and the summary), status, logs, smoke, bench, down."""

from __future__ import annotations

import shutil

import pytest

from tests.unit.test_terminal_width import assert_fits, screen

pytestmark = [pytest.mark.cluster,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def test_a_deployments_life_fits_80_columns(tmp_path, home, inkctl, inventory, recipe):
    rec = recipe("single", name="e2e-narrow", watchdog={"enabled": False},
                 smoke={"prompts": ["What is 17 x 23? Answer with the number.", "Say hi."]})
    inv = inventory("h1")
    try:
        for args in (("up", rec, "--hosts", inv), ("status", rec, "--hosts", inv),
                     ("logs", rec, "--hosts", inv, "--tail", "20"), ("smoke", rec, "--hosts", inv),
                     ("bench", rec, "--hosts", inv, "-c", "1,2", "-n", "4", "--output-len", "8",
                      "--results-dir", str(tmp_path / "runs")),
                     ("doctor", rec, "--hosts", inv), ("down", rec, "--hosts", inv)):
            lines = screen(tmp_path, *map(str, args), stderr=True, cwd=tmp_path)
            assert_fits(lines)
            assert not any("internal error" in ln or "Traceback" in ln for ln in lines), "\n".join(lines)
    finally:
        inkctl("down", rec, "--hosts", inv)
