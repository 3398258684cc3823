"""export prometheus: targets for every engine, the router and each host; every metric the
dashboard queries is one the engines (the fake engine's metrics.py, in their names) or the
router (a captured sglang-router answer) really export."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inkctl.client.prometheus import parse
from inkctl.export.prometheus import dashboard
from tests.cluster.fake_engine.metrics import Metrics
from tests.unit.test_prometheus import ROUTER

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("kind", ["vllm", "sglang"])
def test_dashboard_queries_real_names(kind):
    names = {s.name for s in parse(Metrics().text(kind, "m")).samples} | {s.name for s in parse(ROUTER).samples}
    names |= {"smg_worker_requests_active", "node_memory_MemAvailable_bytes"}
    board = dashboard("x", kind, True)
    used = set()
    for p in board["panels"]:
        used |= set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", p["targets"][0]["expr"]))
    assert used and used <= names, used - names
    assert all(n.startswith((kind + ":", "smg_", "node_")) for n in used)


def test_cli_writes_targets_for_a_fleet(tmp_path):
    inv = tmp_path / "hosts.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [{"name": "a", "address": "192.0.2.1", "gpus": "0,1,2,3"},
                                             {"name": "b", "address": "192.0.2.2", "gpus": "0,1"}]}))
    r = subprocess.run([sys.executable, "-m", "inkctl", "export", "prometheus", "tests/e2e/recipes/fleet.yaml",
                        "--hosts", str(inv), "--set", "fleet.replicas=3", "--out", str(tmp_path / "out")],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert all(len(line.replace(str(tmp_path / "out"), "DIR")) <= 80 for line in r.stdout.splitlines())
    conf = yaml.safe_load((tmp_path / "out" / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in conf["scrape_configs"]}
    engines = [(c["targets"][0], c["labels"]["replica"]) for c in jobs["inkctl-engines"]["static_configs"]]
    assert engines == [("192.0.2.1:18000", "e2e-fleet-r0"), ("192.0.2.1:18010", "e2e-fleet-r1"), ("192.0.2.2:18000", "e2e-fleet-r2")]
    assert jobs["inkctl-router"]["static_configs"][0]["targets"] == ["192.0.2.1:29000"]
    assert jobs["inkctl-hosts"]["static_configs"][0]["targets"] == ["192.0.2.1:9100", "192.0.2.2:9100"]
    board = json.loads((tmp_path / "out" / "grafana-dashboard.json").read_text())
    assert board["panels"] and board["schemaVersion"] == 39
