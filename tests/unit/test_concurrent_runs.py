"""Two inkctl processes on one control machine at the same moment (issue 18: one of two `up`
runs on other hosts, started together from one directory, ended after its smoke summary with
"internal error"). What they share is files: boot records, bench runs, run records, the lock
file, known_hosts. Each collision is made to happen here: two writers forced into the same
second and the same name, a reader in the middle of a write, a record of another shape."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from inkctl import runlog
from inkctl import bootlog as boots
from inkctl.bench import report
from inkctl.execute.supervise.bootphases import PhaseReader, slower_than

ROOT = Path(__file__).resolve().parents[2]
WHEN = datetime(2026, 12, 1, 23, 0, 0, tzinfo=timezone.utc)


def _record(weights: float, host: str) -> dict:
    return {"engine": "vllm", "inkctl": {"container": 1.0, "health": 30.0},
            "ranks": [{"host": host, "rank": 0, "seconds": {"weights": weights}, "compile_cache": None}]}


def test_two_ups_that_checked_the_name_before_either_wrote_keep_both_boot_records(tmp_path, monkeypatch):
    """The race of a name test followed by a write: both see the name free. Forced here by a
    Path.exists that always says free (what each process saw before the other wrote)."""
    monkeypatch.setattr(Path, "exists", lambda self: False)
    a = boots.save(tmp_path, "dep", _record(5.0, "h1"), when=WHEN)
    b = boots.save(tmp_path, "dep", _record(7.0, "h2"), when=WHEN)
    monkeypatch.undo()
    assert a != b
    assert [boots.read(p)["ranks"][0]["host"] for p in (a, b)] == ["h1", "h2"]
    assert sorted(f.name for f in a.parent.iterdir()) == ["20261201-230000-2.json", "20261201-230000.json"]


def _save_many(base: str, host: str, n: int, go) -> None:
    go.wait()
    for i in range(n):
        boots.save(Path(base), "dep", _record(float(i), host), when=WHEN)


def test_two_processes_saving_boot_records_in_one_second_lose_none(tmp_path):
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    procs = [ctx.Process(target=_save_many, args=(str(tmp_path), h, 25, go)) for h in ("h1", "h2")]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    files = sorted((tmp_path / "boots" / "dep").glob("*.json"))
    assert len(files) == 50
    hosts = [boots.read(f)["ranks"][0]["host"] for f in files]  # every one whole
    assert hosts.count("h1") == hosts.count("h2") == 25
    assert not list((tmp_path / "boots" / "dep").glob(".*"))  # no temp file left


def test_the_previous_boot_is_the_latest_whole_one_while_another_up_writes(tmp_path):
    whole = boots.save(tmp_path, "dep", _record(5.0, "h1"), when=WHEN)
    d = whole.parent
    (d / "20261201-230001.json").write_text("")  # the other up's file, opened, not written yet
    (d / "20261201-230002.json").write_text('{"engine": "vllm", "ranks": [')  # cut short
    (d / "20261201-230003.json").write_text("[1, 2]")  # JSON, not a record
    assert boots.previous(tmp_path, "dep") == ("dep/20261201-230000", boots.read(whole))


def test_a_previous_record_of_another_shape_names_no_phase_and_raises_nothing():
    now = _record(9.0, "h1")
    for before in ({"inkctl": None, "ranks": None}, {"ranks": [None, 3, {"seconds": {"weights": "4.0"}}]},
                   {"inkctl": {"container": "x"}, "ranks": [{"seconds": [1]}]}, {"ranks": {"0": {}}}):
        assert slower_than(now, before) == []
    assert slower_than(now, _record(2.0, "h1")) == ["weights loaded took 9.0 s, 2.0 s in the previous boot"]


def test_results_boots_on_a_record_cut_short_says_so_without_internal_error(tmp_path):
    boots.save(tmp_path, "dep", _record(5.0, "h1"), when=WHEN)
    (tmp_path / "boots" / "dep" / "20261201-230000.json").write_text('{"engine": "vl')
    r = subprocess.run([sys.executable, "-m", "inkctl", "results", "--boots", "dep/20261201-230000", "dep/2026",
                        "--results-dir", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode not in (0, 70), r.stderr
    assert "internal error" not in r.stderr and "not a readable boot record" in r.stderr


def test_the_boot_phases_handed_out_are_a_copy_the_log_followers_no_longer_touch():
    """A follower whose stream has not seen its stop yet may still feed a line while up builds
    the boot record from the phases (a dict changed during iteration, in another thread)."""
    class W:
        host, rank = "h1", 0

    reader = PhaseReader("vllm")
    reader(W(), "INFO Loading weights took 3.50 seconds")
    snapshot = reader.phases()
    reader(W(), "INFO Memory profiling takes 2.00 seconds")
    assert snapshot[0].seconds == {"weights": 3.5}
    assert reader.phases()[0].seconds == {"weights": 3.5, "profile": 2.0}


def test_two_benches_of_one_model_in_one_second_get_a_run_directory_each(tmp_path, monkeypatch):
    monkeypatch.setattr(Path, "exists", lambda self: False)  # both looked before either made it
    a = report.new_run_dir(tmp_path, "org/model", WHEN)
    b = report.new_run_dir(tmp_path, "org/model", WHEN)
    monkeypatch.undo()
    assert a != b and a.is_dir() and b.is_dir()


def test_a_run_record_of_a_command_still_running_is_not_pruned(tmp_path, monkeypatch):
    monkeypatch.setattr(runlog, "KEEP", 3)
    for i in range(5):
        (tmp_path / f"2000010{i}T000000Z-up").mkdir()
    (tmp_path / "20000100T000000Z-up" / "run.json").write_text(json.dumps({"status": "running", "pid": os.getpid()}))
    runlog.start("down", ["down"], base=tmp_path)
    runlog.finish(0)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "20000100T000000Z-up" in names  # a watch started long ago keeps its record
    assert len(names) == 4


def test_two_processes_in_one_second_get_a_run_record_each(tmp_path):
    code = ("import sys; from datetime import datetime, timezone; from pathlib import Path; import inkctl.runlog as r\n"
            "class Frozen(datetime):\n"
            "    @classmethod\n"
            "    def now(cls, tz=None): return datetime(2026, 12, 1, 23, 0, 0, tzinfo=timezone.utc)\n"
            "r.datetime = Frozen\n"
            "rec = r.start('up', ['up'], base=Path(sys.argv[1])); r.note(who=sys.argv[2]); r.finish(0)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), w], env={**os.environ, "PYTHONPATH": str(ROOT)})
             for w in ("a", "b")]
    assert [p.wait(60) for p in procs] == [0, 0]
    records = sorted(p.name for p in tmp_path.iterdir())
    assert records == ["20261201T230000Z-up", "20261201T230000Z-up-2"]
    assert sorted(runlog.read(tmp_path / n)["who"] for n in records) == ["a", "b"]


def _pin_many(recipe: str, key: str, n: int, go) -> None:
    from inkctl.api.cache import pin_cache
    from inkctl.recipe.reading.source import load_recipe

    class Source:
        host, files = "h1", ["a"]

    loaded = load_recipe(Path(recipe), [], None)
    go.wait()
    for i in range(n):
        s = Source()
        s.digest = f"{key}-{i}"  # type: ignore[attr-defined]
        with open(os.devnull, "w") as null:
            sys.stdout = null
            pin_cache(loaded, f"compile-cache:{key}", s)


@pytest.mark.parametrize("rounds", [30])
def test_two_commands_pinning_at_once_keep_each_others_pins(tmp_path, rounds):
    """`cache --lock` twice at once (two cache directories): a read-modify-write each. With one
    fixed temp name the second rename found the file gone (FileNotFoundError: internal error),
    and without a lock around reading and writing one pin overwrote the other."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text((ROOT / "tests" / "e2e" / "recipes" / "single.yaml").read_text())
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    procs = [ctx.Process(target=_pin_many, args=(str(recipe), k, rounds, go)) for k in ("a", "b")]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    pins = json.loads((tmp_path / "r.lock.json").read_text())["pins"]
    assert pins == {"compile-cache:a": f"a-{rounds - 1}", "compile-cache:b": f"b-{rounds - 1}"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.lock.json", "r.yaml"]
