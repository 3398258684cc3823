"""validate of a gateway file (its fields, its recipes, how its models fit together), export of
one (prometheus targets; k8s refused, located), and the lease around leftover removal."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "tests" / "e2e" / "recipes"
GATEWAY = RECIPES / "gateway.yaml"


def _dir(tmp_path: Path, text: str | None = None) -> Path:
    for name in ("gw-alpha.yaml", "gw-beta.yaml"):
        shutil.copy(RECIPES / name, tmp_path / name)
    g = tmp_path / "gateway.yaml"
    g.write_text(text if text is not None else GATEWAY.read_text())
    return g


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inkctl", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "80"})


def _json(tmp_path: Path, *paths: str, hosts: str | None = None) -> tuple[int, dict]:
    extra = ["--hosts", hosts] if hosts else []
    r = _cli("validate", "-o", "json", *paths, *extra, cwd=tmp_path)
    return r.returncode, json.loads(r.stdout)


def test_a_good_gateway_file_validates_with_and_without_an_inventory(tmp_path):
    g = _dir(tmp_path)
    rc, doc = _json(tmp_path, str(g))
    assert rc == 0 and doc["ok"] and doc["recipes"][0]["errors"] == []
    (tmp_path / "inv.yaml").write_text('hosts: [{name: h5, address: 10.0.0.5, gpus: "0,1,2,3,4,5,6,7"}]\n')
    rc, doc = _json(tmp_path, str(g), hosts="inv.yaml")
    assert rc == 0 and doc["ok"]


@pytest.mark.parametrize("change,path,line,text", [
    (('"2,3"', '"1,2"'), "models[1].gpus", 7, "models[1] and models[0] both use GPU 1 on h5"),
    (("port: 30090", "port: 18110"), "models[1]", 7, "models[1]'s API port 18110 on h5 is also the gateway's port"),
    (("gw-beta.yaml", "gw-alpha.yaml"), "models[1]", 7, "have the same name 'e2e-gw-alpha'"),
    (("[h5], gpus: \"2,3\"", "[h5, h6], gpus: \"2,3\""), "models[1].hosts", 7, "(hardware.nodes) but models[1].hosts"),
])
def test_collisions_are_located_problems_with_a_code(tmp_path, change, path, line, text):
    g = _dir(tmp_path, GATEWAY.read_text().replace(*change))
    rc, doc = _json(tmp_path, str(g))
    assert rc != 0 and not doc["ok"]
    [err] = doc["recipes"][0]["errors"]
    assert text in err["message"], err
    assert (err["code"], err["name"], err["path"], err["file"], err["line"]) == ("INK240", "gateway", path, str(g), line)
    assert err["col"] is not None


def test_the_gateway_files_own_fields_are_checked(tmp_path):
    g = _dir(tmp_path, GATEWAY.read_text().replace("gateway: {", "gateway: {colour: red, "))
    rc, doc = _json(tmp_path, str(g))
    [err] = doc["recipes"][0]["errors"]
    assert rc != 0 and err["name"] == "unknown-field" and err["path"] == "gateway.colour" and err["line"] == 4


def test_a_listed_recipes_problems_are_located_in_that_recipe(tmp_path):
    g = _dir(tmp_path)
    beta = tmp_path / "gw-beta.yaml"
    beta.write_text(beta.read_text().replace("engine:", "bogus_field: 1\nengine:", 1))
    rc, doc = _json(tmp_path, str(g))
    errs = doc["recipes"][0]["errors"]
    assert rc != 0
    assert any(e["file"] == str(beta) and e["name"] == "unknown-field" and e["path"] == "bogus_field" for e in errs)
    assert any(e["file"] == str(g) and e["path"] == "models[1].recipe" for e in errs)


def test_a_missing_recipe_is_located_at_its_entry(tmp_path):
    g = _dir(tmp_path, GATEWAY.read_text().replace("gw-beta.yaml", "nope.yaml"))
    rc, doc = _json(tmp_path, str(g))
    [err] = doc["recipes"][0]["errors"]
    assert rc != 0 and err["path"] == "models[1].recipe" and err["file"] == str(g) and err["line"] == 7
    assert "nope.yaml" in err["message"]


def test_a_host_missing_from_the_inventory_is_found_with_hosts(tmp_path):
    g = _dir(tmp_path)
    (tmp_path / "inv.yaml").write_text('hosts: [{name: h9, gpus: "0,1,2,3"}]\n')
    rc, doc = _json(tmp_path, str(g), hosts="inv.yaml")
    [err] = doc["recipes"][0]["errors"]
    assert rc != 0 and "'h5' is not a host of the inventory" in err["message"] and err["path"] == "models[0].hosts"


def test_a_directory_of_gateway_files_and_recipes_validates_each(tmp_path):
    _dir(tmp_path)
    (tmp_path / "bad-gateway.yaml").write_text(GATEWAY.read_text().replace('"2,3"', '"0,3"'))
    rc, doc = _json(tmp_path, ".")
    by = {Path(r["recipe"]).name: r for r in doc["recipes"]}
    assert set(by) == {"gateway.yaml", "bad-gateway.yaml", "gw-alpha.yaml", "gw-beta.yaml"}
    assert rc != 0 and [n for n, r in sorted(by.items()) if not r["ok"]] == ["bad-gateway.yaml"]
    assert by["bad-gateway.yaml"]["errors"][0]["message"].startswith("models[1] and models[0] both use GPU 0")
    r = _cli("validate", ".", cwd=tmp_path)
    assert "FAIL bad-gateway.yaml" in r.stdout and "ok gateway.yaml" in r.stdout
    assert "bad-gateway.yaml:7:47: models[1].gpus: models[1] and models[0]" in r.stdout


def test_export_prometheus_of_a_gateway_lists_every_group_and_the_gateway(tmp_path):
    g = _dir(tmp_path)
    (tmp_path / "inv.yaml").write_text('hosts: [{name: h5, address: 192.0.2.5, gpus: "0,1,2,3,4,5,6,7"}]\n')
    r = _cli("export", "prometheus", str(g), "--hosts", "inv.yaml", "-o", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    targets = json.dumps(json.loads(r.stdout)["prometheus"])
    for t in ("192.0.2.5:18100", "192.0.2.5:18110", "192.0.2.5:29090"):
        assert t in targets


def test_export_k8s_of_a_gateway_is_refused_located(tmp_path):
    g = _dir(tmp_path)
    r = _cli("export", "k8s", str(g), cwd=tmp_path)
    assert r.returncode == 2 and "gateway.yaml:1:1: export k8s of a gateway file is not supported" in r.stderr
    assert max(map(len, r.stderr.splitlines())) <= 80, r.stderr
    assert "Traceback" not in r.stderr


def test_leftover_removal_holds_the_deploy_lease(tmp_path):
    """retire's removal runs inside the deployment's lease: a held lease refuses it (HostError)."""
    from inkctl.execute.deploy.fleet import leased
    from inkctl.execute.hosts.transport import HostError
    from inkctl.recipe.hosts import Host

    class Held:  # the lock directory exists and names a live holder: refused
        def run(self, argv, timeout=None):
            from types import SimpleNamespace

            if argv[0] == "cat":
                rec = {"who": "someone@elsewhere", "pid": 1, "command": "up", "since": "now"}
                return SimpleNamespace(exit_code=0, text=lambda: json.dumps(rec), err_text=lambda: "")
            from inkctl.execute.state.deploylock import HELD

            return SimpleNamespace(exit_code=HELD, text=lambda: "", err_text=lambda: "")

    ran = []
    with pytest.raises(HostError) as e:
        with leased(Host(name="h1"), "docker", "old-r2", Held()):
            ran.append(1)
    assert not ran and e.value.host == "h1" and "old-r2 not removed" in e.value.message
