"""bench and results as a user chains them: a rate sweep without -c, a sweep that completes
nothing, a cut-short point file, Ctrl-C before the first point, the plot of a rate sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.unit.openai_fake import ROOT, FakeServer, free_port


def inkctl(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.fixture(scope="module")
def quick():
    with FakeServer(FAKE_TTFT=0.01, FAKE_TOKEN_DELAY=0.002) as s:
        yield s


def test_a_request_rate_without_c_is_not_capped_at_one_request(quick, tmp_path):
    r = inkctl("bench", "--url", quick.url, "--model", "fake-model", "--request-rate", "50", "-n", "8",
               "--output-len", "4", "--results-dir", str(tmp_path), "-o", "json")
    assert r.returncode == 0, r.stderr
    (point,) = json.loads(r.stdout)["points"]
    assert point["max_concurrency"] is None and point["request_rate"] == 50
    (run,) = tmp_path.iterdir()
    assert (run / "point-r50.json").is_file()
    c = inkctl("bench", "--url", quick.url, "--model", "fake-model", "--request-rate", "50", "-c", "2", "-n", "4",
               "--output-len", "4", "--results-dir", str(tmp_path), "-o", "json")
    assert json.loads(c.stdout)["points"][0]["max_concurrency"] == 2  # -c given: it caps


def test_a_rate_sweep_is_plotted_against_the_rate():
    from inkctl.bench.plot import plot_axis

    pts = [{"request_rate": 8, "max_concurrency": 1}, {"request_rate": 2, "max_concurrency": 1},
           {"request_rate": 4, "max_concurrency": None}]
    _, x, label = plot_axis(pts)
    assert x == [2, 4, 8] and label.startswith("request rate")
    _, x, label = plot_axis([{"request_rate": "inf", "max_concurrency": c} for c in (4, 1)])
    assert x == [1, 4] and label == "max concurrency"


@pytest.mark.parametrize("why", ["unknown model", "closed port"])
def test_a_bench_that_completes_nothing_fails_says_why_and_saves_no_run(quick, tmp_path, why):
    url, model = (quick.url, "no-such-model") if why == "unknown model" else (f"http://127.0.0.1:{free_port()}", "m")
    r = inkctl("bench", "--url", url, "--model", model, "-c", "1,2", "-n", "2", "--output-len", "4",
               "--results-dir", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no request completed against" in r.stderr
    assert ("404" in r.stderr) if why == "unknown model" else ("cannot connect" in r.stderr), r.stderr
    assert "Traceback" not in r.stderr
    assert not list(tmp_path.iterdir())  # nothing saved
    listing = inkctl("results", "--results-dir", str(tmp_path), "-o", "json")
    assert json.loads(listing.stdout) == []


def test_results_on_a_cut_short_point_file_is_one_clear_error(quick, tmp_path):
    r = inkctl("bench", "--url", quick.url, "--model", "fake-model", "-c", "1", "-n", "2", "--output-len", "4",
               "--results-dir", str(tmp_path), "-o", "json")
    run = json.loads(r.stdout)["run"]
    point = tmp_path / run / "point-c1.json"
    point.write_text(point.read_text()[:100])
    s = inkctl("results", run, "--results-dir", str(tmp_path))
    assert s.returncode == 1, s.stderr
    assert "point-c1.json: not a readable result file" in s.stderr and "internal error" not in s.stderr


def test_ctrl_c_before_the_first_point_leaves_no_run_directory(tmp_path):
    with FakeServer(FAKE_TTFT=5, FAKE_TOKEN_DELAY=0.01) as slow:
        p = subprocess.Popen([sys.executable, "-m", "inkctl", "bench", "--url", slow.url, "--model", "fake-model",
                              "-c", "1", "-n", "2", "--output-len", "4", "--results-dir", str(tmp_path)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not list(tmp_path.iterdir()):  # the run directory appears when measuring starts
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())


def test_the_missing_extras_say_how_to_install_them_here_and_exit_alike(monkeypatch):
    from inkctl import extras

    monkeypatch.setattr(sys, "prefix", "/home/u/.local/share/pipx/venvs/inkctl")
    assert extras.install_command(["matplotlib"]) == "pipx inject inkctl matplotlib"
    monkeypatch.setattr(sys, "prefix", "/srv/inkctl/.venv")
    assert extras.install_command(["matplotlib"]) == f"{sys.executable} -m pip install matplotlib"
    a, b = extras.missing("plot", "--plot", "matplotlib"), extras.missing("k8s", "--check", "kubernetes-validate")
    assert a.exit_code == b.exit_code == 1


def test_plot_without_matplotlib_names_this_pythons_pip(quick, tmp_path):
    blocker = tmp_path / "no-matplotlib" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('blocked by the test')\n")
    env = dict(os.environ, PYTHONPATH=str(blocker.parent))
    r = inkctl("bench", "--url", quick.url, "--model", "fake-model", "-c", "1", "-n", "2",
               "--results-dir", str(tmp_path / "runs"), "--plot", env=env)
    assert r.returncode == 1
    assert "python -m pip install matplotlib" in r.stderr and "inkctl[plot]" not in r.stderr


@pytest.mark.parametrize("flag", [["--recipe", "r.yaml"], ["--plot"]])
def test_results_with_recipe_or_plot_but_no_run_says_how_to_name_one(tmp_path, flag):
    r = inkctl("results", *flag, "--results-dir", str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert "--recipe and --plot need a run" in r.stderr
    want = "--recipe FILE" if flag[0] == "--recipe" else "--plot"
    assert f"hint: name a run (inkctl results lists them): inkctl results RUN {want}" in r.stderr, r.stderr
