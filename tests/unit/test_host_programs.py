"""The programs inkctl runs on hosts (``weights/onhost.py``, ``execute/image/relay_host.py``)
share their answers and their wait for inkctl's file (``execute/hosts/hostside.py``) and are
still sent as one file each (``execute/hosts/program.py``): a host has nothing of inkctl."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from inkctl.execute.hosts import hostside
from inkctl.execute.hosts.program import HOSTSIDE, program

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = [ROOT / "inkctl/weights/onhost.py", ROOT / "inkctl/execute/image/relay_host.py"]
PYTHON3 = shutil.which("python3") or "python3"  # a host's python3, not this venv's


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_a_program_is_sent_as_one_file_with_the_shared_part_inlined(path, tmp_path):
    sent = program(path).decode()
    assert "inkctl.execute" not in "\n".join(line for line in sent.splitlines() if "import" in line), \
        "the file a host gets imports nothing of inkctl"
    assert sent.count("def say(") == 1 and sent.count("def wait_for(") == 1
    assert hostside.say.__doc__ and hostside.say.__doc__ in sent
    compile(sent, path.name, "exec")
    here = tmp_path / "host"  # no inkctl beside it, none on the path: -I -S as the relays run
    here.mkdir()
    (here / path.name).write_text(sent)
    (here / "plan.json").write_text(json.dumps({"sources": ["h1"]}))
    code = ("import runpy, sys; g = runpy.run_path(sys.argv[1]); g['say'](ev='progress', bytes=3); "
            "doc = g['wait_for'](sys.argv[2], 5, remove=True); g['say'](ev='plan', doc=doc); "
            "assert not [m for m in sys.modules if m.startswith('inkctl')]")
    ran = subprocess.run([PYTHON3, "-I", "-S", "-c", code, str(here / path.name), str(here / "plan.json")],
                         capture_output=True, text=True, timeout=60, cwd=here)
    assert ran.returncode == 0, ran.stderr
    assert [json.loads(x) for x in ran.stdout.splitlines()] == [
        {"ev": "progress", "bytes": 3}, {"ev": "plan", "doc": {"sources": ["h1"]}}]
    assert not (here / "plan.json").exists(), "read once: nothing of it stays"


def test_the_sent_file_is_the_one_whose_hash_a_host_is_compared_with():
    """The weights scan compares the host's onhost.py with the bytes inkctl would send."""
    from inkctl.weights.distribute import ONHOST

    assert program(ONHOST) != ONHOST.read_bytes() and HOSTSIDE.read_text() in program(ONHOST).decode()


def test_a_program_without_exactly_one_import_of_the_shared_part_is_refused(tmp_path):
    lonely = tmp_path / "lonely.py"
    lonely.write_text("print('hi')\n")
    with pytest.raises(ValueError, match="0 lines import hostside"):
        program(lonely)


def test_wait_for_gives_up_after_its_seconds(tmp_path):
    assert hostside.wait_for(str(tmp_path / "never.json"), 0.1) is None
