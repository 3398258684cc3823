"""Hostile values in a recipe or --set reach the container literally: quotes, ';', '$()',
backticks, newlines, unicode. Nothing is interpreted by any shell on the way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

CANARY = "/tmp/inkctl-hostile-canary"
HOSTILE = f"a'b\"c;d $(touch {CANARY}) `touch {CANARY}` & | > x\nsecond line\t¿ünï©ødé? \\ $HOME *"


def test_hostile_values_arrive_literally(cluster, inkctl, inventory, recipe):
    Path(CANARY).unlink(missing_ok=True)
    r = recipe("single", name="e2e-hostile",
               container={"env": {"WEIRD": HOSTILE}},
               engine={"args": {"extra": [f"--chat-template={HOSTILE}", "--tokenizer", HOSTILE]}})
    override = f"container.env.FROM_SET={HOSTILE}"
    res = inkctl("up", r, "--hosts", inventory("h1"), "--set", override)
    assert res.rc == 0, res
    try:
        dump = json.loads(cluster.docker("h1", "exec", "inkctl-e2e-hostile-r0", "cat", "/tmp/inkctl-fake-engine.json").stdout)
        assert dump["env"]["WEIRD"] == HOSTILE
        assert dump["env"]["FROM_SET"] == HOSTILE
        argv = dump["argv"]
        assert f"--chat-template={HOSTILE}" in argv  # real flags: the engine's parser reads them (argv proof)
        assert argv[argv.index("--tokenizer") + 1] == HOSTILE
        # nothing was executed anywhere: not on the control machine, not on the host, not in the container
        assert not Path(CANARY).exists()
        assert cluster.docker("h1", "exec", "inkctl-e2e-hostile-r0", "ls", CANARY).returncode != 0
    finally:
        assert inkctl("down", r, "--hosts", inventory("h1")).rc == 0


@pytest.mark.parametrize("bad", ["../../etc", "a b", "x;rm -rf /", "$(id)", "UPPER"])
def test_unsafe_names_are_rejected_by_validation(inkctl, recipe, bad):
    r = recipe("single", name="e2e-ok")
    res = inkctl("validate", r, "--set", f"name={bad}")
    assert res.rc == 2
    assert "is not a safe name" in res.out
