"""Every table fits an 80-column terminal: read off a real one.

tmux runs the CLI in an 80x100 pane; ``capture-pane -J`` gives the screen with the terminal's own
wrapping undone, so a line longer than 80 there is one the terminal had to wrap. The hosts are
loopback addresses with nothing listening (connection refused at once), under very long names.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPE = "examples/vllm-ray-2node.yaml"
LONG = "a-very-long-host-name-in-the-first-rack-{:04d}.example.internal"
DONE = "__inkctl_screen_done__"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (tests/cluster/install.sh installs it)")


@pytest.fixture
def unreachable(tmp_path) -> Path:
    inv = tmp_path / "hosts.yaml"
    inv.write_text("hosts:\n" + "".join(
        f"  - {{name: {LONG.format(i + 1)}, address: 127.0.0.{i + 1}, cluster_address: 192.0.2.{i + 1}, port: 1, user: root}}\n"
        for i in range(2)))
    return inv


def screen(tmp_path: Path, *args: str, stderr: bool = False, cwd: Path = ROOT) -> list[str]:
    """What ``inkctl ARGS`` leaves on an 80-column terminal (stdout; with ``stderr`` both, as a
    user sees them), one entry per logical line."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    script = tmp_path / "screen.sh"
    script.write_text(
        f"cd {shlex.quote(str(cwd))}\n"
        f"export HOME={shlex.quote(str(home))} PYTHONPATH={shlex.quote(str(ROOT))} NO_COLOR=1\n"
        "unset COLUMNS LINES\n"
        f"{shlex.quote(sys.executable)} -m inkctl {shlex.join(args)} {'2>&1' if stderr else '2>/dev/null'}\n"
        f"echo {DONE}\nsleep 600\n")
    sock = f"inkctl-test-{os.getpid()}-{time.monotonic_ns()}"
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-x", "80", "-y", "100", "sh", str(script)], check=True, timeout=30)
    subprocess.run([*tmux, "set-option", "-g", "history-limit", "10000"], capture_output=True, timeout=30)
    try:
        deadline = time.monotonic() + 90  # bounds a hang only; a busy machine may take a while
        while True:
            text = subprocess.run([*tmux, "capture-pane", "-p", "-J", "-S", "-"], capture_output=True, text=True,
                                  timeout=30).stdout
            if DONE in text:
                return text[: text.index(DONE)].rstrip("\n").splitlines()
            assert time.monotonic() < deadline, f"inkctl {' '.join(args)} did not finish:\n{text}"
            time.sleep(0.2)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30)


def assert_fits(lines: list[str]) -> None:
    assert lines, "nothing on the screen"
    from tests.unit.test_piped_width import too_wide

    wide = too_wide("\n".join(ln.rstrip() for ln in lines), 80)  # a path wider than the screen stays whole
    assert not wide, "wider than 80 columns:\n" + "\n".join(wide)
    # no column squeezed to a letter per line: 3 rows in a row with a one-letter cell in one column
    runs: dict[int, int] = {}
    for ln in lines:
        cells = ln.split("│")[1:-1] if "│" in ln else []
        for j, cell in enumerate(cells):
            one = len(cell.strip()) == 1 and cell.strip().isalpha()
            runs[j] = runs.get(j, 0) + 1 if one else 0
            assert runs[j] < 3, "a column shows one letter per line:\n" + "\n".join(lines)
        if not cells:
            runs.clear()


def test_recipes_fits_80_columns(tmp_path):
    lines = screen(tmp_path, "recipes")
    assert_fits(lines)
    assert any("inkling-small-2x-dgx-spark-vllm" in ln for ln in lines)  # names whole, never cut
    assert not any("…" in ln for ln in lines)


def test_status_against_unreachable_hosts_fits_80_columns(tmp_path, unreachable):
    lines = screen(tmp_path, "status", RECIPE, "--hosts", str(unreachable))
    assert_fits(lines)
    text = "\n".join(lines)
    assert text.count("unreachable") >= 4 and "unreachable: unreachable" not in text
    assert "connection refused" in text


def test_doctor_against_unreachable_hosts_fits_80_columns(tmp_path, unreachable):
    lines = screen(tmp_path, "doctor", RECIPE, "--hosts", str(unreachable))
    assert_fits(lines)
    text = "\n".join(lines)
    assert text.count("FAIL") == 2 and "host unreachable" in text


def test_logs_against_unreachable_hosts_fits_80_columns(tmp_path, unreachable):
    lines = screen(tmp_path, "logs", RECIPE, "--hosts", str(unreachable), "--tail", "5")
    assert all(len(ln) <= 80 for ln in lines)  # nothing on stdout but what fits (the errors go to stderr)


# --- every command a user chains, both streams, from a project directory made by init --------------

@pytest.fixture
def project(tmp_path) -> Path:
    d = tmp_path / "project"
    d.mkdir()
    r = subprocess.run([sys.executable, "-m", "inkctl", "init", "inkling-small-2x-dgx-spark-vllm"], cwd=d,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return d


@pytest.mark.parametrize("args", [
    ("plan", "inkling-small-2x-dgx-spark-vllm.yaml", "--hosts", "hosts.yaml"),
    ("plan", "inkling-small-2x-rtxpro6000-sglang"),
    ("plan", "vllm-ray-2node"),
    ("validate", "inkling-small-2x-dgx-spark-vllm.yaml"),
    ("validate", "--strict", "inkling-small-2x-dgx-spark-vllm"),
    ("init", "vllm-native-2node"),
    (),
    ("up", "inkling-small-2x-dgx-spark-vllm.yaml", "--hosts", "hosts.yaml"),
], ids=lambda a: " ".join(a) or "bare")
def test_the_paper_commands_fit_80_columns_with_their_warnings(tmp_path, project, args):
    lines = screen(tmp_path, *args, stderr=True, cwd=project)
    assert_fits(lines)


def test_bench_smoke_and_results_fit_80_columns(tmp_path, project):
    from tests.unit.openai_fake import FakeServer

    runs = project / "bench-results"
    parsers = ("--reasoning-parser", "deepseek_r1", "--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    with FakeServer(*parsers) as s:
        assert_fits(screen(tmp_path, "smoke", "--url", s.url, "--reasoning", "--tools", stderr=True, cwd=project))
        assert_fits(screen(tmp_path, "smoke", "--url", s.url, "--model", "nope", stderr=True, cwd=project))
        assert_fits(screen(tmp_path, "bench", "--url", s.url, "-c", "1,2", "-n", "2", "--output-len", "4",
                           stderr=True, cwd=project))
    (run,) = [p.name for p in runs.iterdir()]
    for args in (("results",), ("results", run),
                 ("results", run, "--recipe", "inkling-small-2x-rtxpro6000-sglang")):
        lines = screen(tmp_path, *args, stderr=True, cwd=project)
        assert_fits(lines)
    assert any("how: " in ln for ln in lines) or all(len(ln) <= 80 for ln in lines)
    assert any(ln.startswith("note: ") and "compare two models" in " ".join(lines) for ln in lines)
