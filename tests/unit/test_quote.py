"""The one quoting function: any argv survives a POSIX shell literally."""

from __future__ import annotations

import shlex
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from inkctl.plan.quote import command_line

HOSTILE = ["a b", "'", '"', "$(touch /tmp/pwned)", "`id`", "a;b", "x\ny", "ü→λ", "--flag=$HOME", "*", "", "\\", "!"]


def test_round_trip_through_a_real_shell():
    argv = ["printf", "%s\\0", *HOSTILE]
    out = subprocess.run(["sh", "-c", command_line(argv)], capture_output=True, check=True).stdout
    assert out.decode().split("\0")[:-1] == HOSTILE


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20), min_size=1, max_size=6))
def test_round_trip_through_shlex(argv):
    assert shlex.split(command_line(argv)) == argv
