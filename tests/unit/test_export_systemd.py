"""`export systemd`: the unit runs as written (systemd-analyze verify), with the recipe by its real
path (a bundled name too), and says where each secret comes from."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]


def inkctl(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**(env or os.environ), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


def exec_start(unit: str) -> list[str]:
    line = next(ln for ln in unit.splitlines() if ln.startswith("ExecStart="))
    return shlex.split(line[len("ExecStart="):])


def test_a_bundled_name_becomes_the_real_path_and_env_secrets_an_environment_file(tmp_path):
    assert inkctl(tmp_path, "init", "vllm-single-docker").returncode == 0
    r = inkctl(tmp_path, "export", "systemd", "vllm-single-docker", "--hosts", "hosts.yaml", "--out", "u.service")
    assert r.returncode == 0, r.stderr
    unit = (tmp_path / "u.service").read_text()
    argv = exec_start(unit)
    recipe = Path(argv[argv.index("watch") + 1])
    assert recipe.is_file() and recipe == (tmp_path / "vllm-single-docker.yaml").resolve()
    assert Path(argv[argv.index("--hosts") + 1]).is_file()
    assert "EnvironmentFile=/etc/inkctl/qwen-small-single.env" in unit and "HF_TOKEN=" in unit
    assert "RestartPreventExitStatus=2" in unit
    if shutil.which("systemd-analyze"):
        v = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "u.service")], capture_output=True, text=True)
        assert v.returncode == 0 and "u.service" not in v.stderr, v.stderr


def test_the_install_commands_come_one_per_line_within_80_columns(tmp_path):
    assert inkctl(tmp_path, "init", "vllm-native-2node").returncode == 0
    r = inkctl(tmp_path, "export", "systemd", "vllm-native-2node.yaml", "--hosts", "hosts.yaml", "--out", "x.service")
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert all(len(ln) <= 80 for ln in lines), r.stderr
    commands = [ln.strip() for ln in lines if ln.startswith("  ")]
    assert commands == ["cp x.service /etc/systemd/system/inkctl-moe-native-2node.service",
                        "systemctl daemon-reload", "systemctl enable --now inkctl-moe-native-2node"]


def test_a_file_secret_is_a_credential_the_watch_reads_back(tmp_path):
    assert inkctl(tmp_path, "init", "vllm-single-docker").returncode == 0
    copy = tmp_path / "vllm-single-docker.yaml"
    text = copy.read_text()
    assert "HF_TOKEN: {env: HF_TOKEN}" in text
    token = tmp_path / "token"
    token.write_text("hf_abcdefghijklmnop\n")
    copy.write_text(text.replace("HF_TOKEN: {env: HF_TOKEN}", f"HF_TOKEN: {{file: {token}}}"))
    r = inkctl(tmp_path, "export", "systemd", str(copy), "--hosts", "hosts.yaml")
    assert r.returncode == 0, r.stderr
    assert f"LoadCredential=HF_TOKEN:{token}" in r.stdout
    argv = exec_start(r.stdout)
    # what systemd does: %d is the credentials directory, holding a copy of the file under the secret's name
    creds = tmp_path / "creds"
    creds.mkdir()
    shutil.copy(token, creds / "HF_TOKEN")
    sets = [argv[i + 1].replace("%d", str(creds)) for i, a in enumerate(argv) if a == "--set"]
    assert sets == [f"secrets.HF_TOKEN={{file: {creds}/HF_TOKEN}}"]
    sys.path.insert(0, str(ROOT))
    from inkctl.secret import resolve_secrets
    from inkctl.recipe.reading.source import load_recipe

    loaded = load_recipe(copy, sets)
    assert resolve_secrets(dict(loaded.recipe.secrets))["HF_TOKEN"].reveal() == "hf_abcdefghijklmnop"
