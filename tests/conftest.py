"""Suite-wide: the run records that commands leave (inkctl/runlog.py) go to a directory of the
test session's own, removed at its end, not into the state directory of the person running the
tests. Tests that check where records land set their own HOME / XDG_STATE_HOME and drop INKCTL_*
variables."""

import atexit
import os
import shutil
import tempfile

if "INKCTL_RUNS_DIR" not in os.environ:
    _runs = tempfile.mkdtemp(prefix="inkctl-test-runs-")
    os.environ["INKCTL_RUNS_DIR"] = _runs
    atexit.register(shutil.rmtree, _runs, True)
