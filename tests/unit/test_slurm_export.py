"""`inkctl export slurm` without a cluster: the script's text, its shell (bash -n, and values
arriving literally through shell_words), what it asserts, and the partition check."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inkctl.slurm.ctl import Partition, fields
from inkctl.export.slurm import HEAD, SlurmOptions, export_slurm
from inkctl.plan.quote import shell_words
from inkctl.recipe.reading.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "tests/e2e/recipes"
SECRET = "hf_unit_secret_value_9x8y7z"


def inkctl(*args, env=None, cwd=None):
    import os

    e = dict(os.environ, COLUMNS="200", NO_COLOR="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], capture_output=True, text=True, env=e,
                          cwd=cwd or ROOT)


def _rank_script(script: str) -> str:
    return script.split("<<'INKCTL_RANK_SCRIPT'\n", 1)[1].split("\nINKCTL_RANK_SCRIPT\n", 1)[0]


@pytest.mark.parametrize("value", ["plain", "it's", 'a "b" $HOME `id` $(id) ; rm -rf /', "new\nline", "ünï", "-x"])
def test_shell_words_keeps_values_literal_and_expands_only_tokens(value):
    argv = ["printf", "%s|", value, f"--addr={HEAD}:29500", f"{HEAD}"]
    text = shell_words(argv, {HEAD: "INK_HEAD_ADDR"})
    out = subprocess.run(["bash", "-c", text], capture_output=True, text=True, env={"INK_HEAD_ADDR": "10.0.0.7"}).stdout
    assert out == f"{value}|--addr=10.0.0.7:29500|10.0.0.7|"


def test_script_is_valid_bash_with_the_plans_argv(tmp_path):
    r = inkctl("export", "slurm", E2E / "vllm-native-2.yaml", "--partition", "gpu", "--account", "lab", "--time", "4:00:00",
               "--out", tmp_path / "job.sbatch")
    assert r.returncode == 0, r.stderr
    script = (tmp_path / "job.sbatch").read_text()
    for text in (script, _rank_script(script)):
        p = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --exclusive", "#SBATCH --gpus-per-node=1",
                 "#SBATCH --partition=gpu", "#SBATCH --account=lab", "#SBATCH --time=4:00:00"):
        assert line + "\n" in script
    assert 'INK_HEAD_HOST=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    assert 'case "$SLURM_NODEID" in' in script
    assert len(re.findall(r"^ *srun ", script, re.M)) == 2  # the step, and the clean-up step after a failure
    # the rank's argv is the plan's: headless worker, rendezvous at the head's address from the allocation
    rank1 = _rank_script(script).split("  1)\n", 1)[1]
    assert '--node-rank 1' in rank1 and '--master-addr "${INK_HEAD_ADDR}"' in rank1 and "--headless" in rank1
    assert all(len(ln) <= 110 for ln in script.splitlines() if ln.startswith("#"))


def test_no_secret_value_in_the_script_and_the_header_names_it(tmp_path):
    doc = yaml.safe_load((E2E / "vllm-native-2.yaml").read_text())
    doc["secrets"] = {"HF_TOKEN": {"env": "UNIT_TOKEN"}}
    rec = tmp_path / "r.yaml"
    rec.write_text(yaml.safe_dump(doc))
    r = inkctl("export", "slurm", rec, env={"UNIT_TOKEN": SECRET, "HF_TOKEN": SECRET})
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr
    header = r.stdout.split("#SBATCH", 1)[0]
    assert "$INKCTL_SECRETS_FILE" in header and "#   HF_TOKEN (inkctl up reads it from env UNIT_TOKEN)" in header
    assert 'secret_env "$INK_ENV_FILE" HF_TOKEN=HF_TOKEN:env:UNIT_TOKEN' in r.stdout
    assert "--env-file \"${INK_DIR}\"/e2e-vllm-native/rank0.env" in r.stdout


def test_rank_writes_its_secret_from_the_file_at_run_time(tmp_path):
    """The rank script's secret_env, run for real: the value comes from the file, into a 0600 env file."""
    doc = yaml.safe_load((E2E / "single.yaml").read_text())
    doc["secrets"] = {"HF_TOKEN": {"env": "UNIT_TOKEN"}}
    loaded_path = tmp_path / "r.yaml"
    loaded_path.write_text(yaml.safe_dump(doc))
    job = export_slurm(load_recipe(loaded_path).recipe, SlurmOptions())
    funcs = _rank_script(job.script).split("\ncase ", 1)[0]
    secrets = tmp_path / "secrets"
    secrets.write_text(f"OTHER=x\nHF_TOKEN={SECRET}\n")
    env_file = tmp_path / "d" / "rank0.env"
    p = subprocess.run(["bash", "-c", funcs.split("\n", 3)[3] + f'\nsecret_env "{env_file}" HF_TOKEN=HF_TOKEN:env:UNIT_TOKEN'],
                       capture_output=True, text=True,
                       env={"INKCTL_SECRETS_FILE": str(secrets), "SLURMD_NODENAME": "n1", "INK_DIR": str(tmp_path),
                            "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    assert env_file.read_text() == f"HF_TOKEN={SECRET}\n"
    assert env_file.stat().st_mode & 0o777 == 0o600
    missing = subprocess.run(["bash", "-c", funcs.split("\n", 3)[3] + f'\nsecret_env "{env_file}" HF_TOKEN=HF_TOKEN:env:UNIT_TOKEN'],
                             capture_output=True, text=True,
                             env={"SLURMD_NODENAME": "n1", "INK_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert missing.returncode == 3
    assert "secret HF_TOKEN is not set" in missing.stderr


def test_rank_reads_each_secret_where_the_recipe_says(tmp_path):
    """Issue 29: the job asked for $API_KEY though the recipe says env INKBARS_SECRET (and a file
    for another): sbatch from the environment `up` works in failed "secret API_KEY is not set".
    Now each is read from the variable or the file the recipe names, and the API key also lands
    under the name the engine reads (VLLM_API_KEY)."""
    doc = yaml.safe_load((E2E / "single.yaml").read_text())
    keyfile = tmp_path / "hf.txt"
    keyfile.write_text("hf_from_a_file_0123456789\n")
    doc["secrets"] = {"API_KEY": {"env": "INKBARS_SECRET"}, "HF_TOKEN": {"file": str(keyfile)}}
    doc["api_key"] = "API_KEY"
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(doc))
    job = export_slurm(load_recipe(path).recipe, SlurmOptions())
    assert SECRET not in job.script
    line = next(ln.strip() for ln in job.script.splitlines() if ln.strip().startswith("secret_env "))
    funcs = _rank_script(job.script).split("\ncase ", 1)[0]
    env_file = tmp_path / "d" / "rank0.env"
    p = subprocess.run(["bash", "-c", funcs.split("\n", 3)[3] + "\n" + line.replace('"$INK_ENV_FILE"', str(env_file))],
                       capture_output=True, text=True,
                       env={"INKBARS_SECRET": SECRET, "SLURMD_NODENAME": "n1", "INK_DIR": str(tmp_path),
                            "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    assert sorted(env_file.read_text().splitlines()) == sorted(
        [f"API_KEY={SECRET}", "HF_TOKEN=hf_from_a_file_0123456789", f"VLLM_API_KEY={SECRET}"])


def test_hotfixes_are_embedded_and_checked(tmp_path):
    doc = yaml.safe_load((E2E / "build-hotfix.yaml").read_text())
    body = b"print('hotfix applied')\n"
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "hotfix-marker.py").write_bytes(body)
    doc["patches"]["hotfixes"][0]["sha256"] = hashlib.sha256(body).hexdigest()
    rec = tmp_path / "r.yaml"
    rec.write_text(yaml.safe_dump(doc))
    r = inkctl("export", "slurm", rec)
    assert r.returncode == 0, r.stderr
    assert "print('hotfix applied')" in r.stdout
    assert f"check_sha256 \"${{INK_DIR}}\"/e2e-hotfix/hotfix/hotfix-marker.py {hashlib.sha256(body).hexdigest()} || exit 1" in r.stdout
    assert '"${INK_DIR}"/e2e-hotfix/hotfix:/inkctl/hotfix:ro' in r.stdout


def test_inventory_pins_the_nodes_and_ranks_by_name(tmp_path):
    inv = tmp_path / "hosts.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [{"name": "gpu07", "cluster_address": "192.0.2.7"},
                                             {"name": "gpu09", "cluster_address": "192.0.2.9"}]}))
    r = inkctl("export", "slurm", E2E / "sglang-2.yaml", "--hosts", inv)
    assert r.returncode == 0, r.stderr
    assert "#SBATCH --nodelist=gpu07,gpu09\n" in r.stdout
    assert 'case "$SLURMD_NODENAME" in' in r.stdout and "  gpu09)\n" in r.stdout
    assert "--dist-init-addr 192.0.2.7:20611" in r.stdout


def test_image_pin_is_asserted_on_every_node():
    loaded = load_recipe(E2E / "vllm-native-2.yaml")
    pin = "sha256:" + "ab" * 32
    job = export_slurm(loaded.recipe, SlurmOptions(), image_pin=pin)
    assert job.script.count(f"check_image {pin} docker image inspect --format") == 2


@pytest.mark.parametrize("args, needle", [
    (["--time", "soon"], "--time 'soon': expected a Slurm time"),
    (["--container", "lxc"], "--container 'lxc': expected docker, nerdctl, podman, pyxis or apptainer"),
    (["--partition", "a b"], "--partition 'a b': not a Slurm name"),
])
def test_bad_options_are_clear_errors(args, needle):
    r = inkctl("export", "slurm", E2E / "single.yaml", *args)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_partition_check_says_what_is_missing_before_submitting():
    from inkctl.errors import InkctlError
    from inkctl.slurm.run import check_request

    part = Partition("gpu", ("n1", "n2"), "UP", None, {"n1": 8, "n2": 8})
    check_request(None, 2, 8, part)
    with pytest.raises(InkctlError, match=re.escape("needs 3 nodes (hardware.nodes) but partition gpu has 2 (n1, n2)")):
        check_request(None, 3, 8, part)
    with pytest.raises(InkctlError, match="asks for 8 GPUs per node on 2 nodes"):
        check_request(None, 2, 8, Partition("gpu", ("n1", "n2"), "UP", None, {"n1": 8, "n2": 4}))
    with pytest.raises(InkctlError, match="allows 1 per job"):
        check_request(None, 2, 0, Partition("gpu", ("n1", "n2"), "UP", 1, {}))
    with pytest.raises(InkctlError, match="is DOWN"):
        check_request(None, 1, 0, Partition("gpu", ("n1",), "DOWN", None, {}))


def test_scontrol_fields_keep_values_with_spaces():
    f = fields("JobId=7 JobName=inkctl-x JobState=PENDING Reason=ReqNodeNotAvail, UnavailableNodes:n3 Dependency=(null) "
               "NodeList=n[1-2] StdOut=/shared/a b/x.out")
    assert f["JobState"] == "PENDING" and f["Reason"] == "ReqNodeNotAvail, UnavailableNodes:n3"
    assert f["NodeList"] == "n[1-2]" and f["StdOut"] == "/shared/a b/x.out"


def test_pyxis_starts_the_tasks_in_the_image_and_lists_what_it_cannot_do():
    loaded = load_recipe(E2E / "sglang-2.yaml")
    job = export_slurm(loaded.recipe, SlurmOptions(container="pyxis"))
    for text in (job.script, _rank_script(job.script)):
        assert subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True).returncode == 0
    assert "--container-image=inkctl-fake-engine:latest" in job.script
    assert '--container-mounts="${INK_DIR}":"${INK_DIR}"' in job.script
    assert "run_foreground python3 -m sglang.launch_server" in job.script and "docker run" not in job.script
    assert job.notes == ("container options --ipc have no pyxis form (not applied)",)


def test_apptainer_runs_the_plans_command_and_keeps_secrets_off_its_argv(tmp_path):
    doc = yaml.safe_load((E2E / "vllm-native-2.yaml").read_text())
    doc["secrets"] = {"HF_TOKEN": {"env": "UNIT_TOKEN"}}
    rec = tmp_path / "r.yaml"
    rec.write_text(yaml.safe_dump(doc))
    job = export_slurm(load_recipe(rec).recipe, SlurmOptions(container="apptainer"))
    assert subprocess.run(["bash", "-n"], input=_rank_script(job.script), capture_output=True, text=True).returncode == 0
    assert "run_foreground apptainer exec \\\n          --cleanenv --nv docker://inkctl-fake-engine:latest vllm serve" in job.script
    assert 'load_env "$INK_ENV_FILE" APPTAINERENV_' in job.script and "--env-file" not in job.script


def test_pyxis_refuses_vllm_over_ray():
    from inkctl.errors import InkctlError

    with pytest.raises(InkctlError, match="--container pyxis has no such container"):
        export_slurm(load_recipe(E2E / "vllm-ray-2.yaml").recipe, SlurmOptions(container="pyxis"))


def test_pyxis_image_names_use_enroots_registry_syntax():
    from inkctl.runtimes.task import Pyxis

    _pyxis_image = Pyxis.image
    assert _pyxis_image("nvcr.io/nvidia/pytorch:24.01") == "nvcr.io#nvidia/pytorch:24.01"
    assert _pyxis_image("vllm/vllm-openai:v0.11.0") == "vllm/vllm-openai:v0.11.0"
    assert _pyxis_image("/shared/images/vllm.sqsh") == "/shared/images/vllm.sqsh"


GOLDEN = ROOT / "tests" / "golden" / "slurm"
RECIPES = sorted((ROOT / "recipes").glob("*.yaml")) + sorted((ROOT / "examples").glob("*.yaml"))
RECIPES = [p for p in RECIPES if not p.name.startswith("hosts")]


def _job(path: Path, **opts):
    from inkctl.plan.inputs import plan_inputs

    loaded = load_recipe(path)
    inputs = plan_inputs(loaded)  # not require_trusted: a bundled recipe's hotfix bodies are not in the repo
    return loaded, export_slurm(loaded.recipe, SlurmOptions(**opts), image=inputs["image"],
                                hotfix_pins=inputs["hotfix_pins"], hotfix_files=inputs["hotfix_files"],
                                weights_pinned=inputs["weights_pinned"])


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_scripts_match_golden(recipe: Path):
    """Every bundled recipe and example as a script, byte for byte (INKCTL_UPDATE_GOLDEN=1 regenerates)."""
    import os

    _, job = _job(recipe, partition="gpu", time="4:00:00")
    text = job.script + "".join(f"# note: {n}\n" for n in job.notes)
    golden = GOLDEN / f"{recipe.parent.name}-{recipe.stem}.sbatch"
    if os.environ.get("INKCTL_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden.name}: run with INKCTL_UPDATE_GOLDEN=1 and review it"
    assert text == golden.read_text(), f"the script for {recipe.name} changed; review and regenerate {golden.name}"


STUB = """#!/bin/sh
# records its argv, one argument per line, NUL-free; `docker run` prints an id, `docker wait` an exit code.
# A rank runs `docker logs` and `docker wait` at once: one record at a time, or their lines interleave
exec 9>>"$CALLS.lock"; flock 9
{ printf '%s\\n' "$(basename "$0")"; for a in "$@"; do printf '%s\\0' "$a"; done; printf '\\n'; } >> "$CALLS"
case "$1" in run) echo 0123abcd ;; wait) echo 7 ;; esac
exit 0
"""


@pytest.mark.parametrize("name", ["vllm-native-2.yaml", "sglang-2.yaml"])
def test_each_rank_runs_exactly_the_plans_argv(tmp_path, name):
    """Run every rank's steps with a recording docker: the argv it gets, once the allocation's
    values are in, is the argv `inkctl plan` gives for hosts with those addresses."""
    from inkctl.plan.deploy import build_plan
    from inkctl.plan.step import Run
    from inkctl.recipe.hosts import Host

    loaded, job = _job(E2E / name)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("docker", "sh"):
        (stubs / tool).write_text(STUB)
        (stubs / tool).chmod(0o755)
    addrs = ["10.9.0.11", "10.9.0.12"]
    state = tmp_path / "job"
    (state / "status").mkdir(parents=True)
    hosts = [Host(name=f"rank{i}", address=a, state_dir=str(state)) for i, a in enumerate(addrs)]
    plan = build_plan(loaded.recipe, hosts)
    body = _rank_script(job.script)
    for rank, addr in enumerate(addrs):
        calls = tmp_path / f"calls{rank}"
        env = {"PATH": f"{stubs}:/usr/bin:/bin", "CALLS": str(calls), "SLURM_NODEID": str(rank), "SLURMD_NODENAME": f"n{rank}",
               "INK_DIR": str(state), "INK_HEAD_ADDR": addrs[0], "INK_NODE_ADDR": addr}
        p = subprocess.run(["bash", "-c", body.replace('INK_NODE_ADDR=$(getent ahostsv4 "$SLURMD_NODENAME" | awk \'NR == 1 {print $1}\')',
                                                       ": the test sets INK_NODE_ADDR")],
                           capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 3 and "the engine exited with code 7" in p.stderr, p.stderr  # the stub 'engine' exits 7
        got = _calls(calls)
        want = [tuple(s.argv) for st in plan.stages for s in st.steps
                if isinstance(s, Run) and s.rank == rank]
        runs = [c for c in got if c[1:2] in (("run",), ("exec",)) or c[0] == "sh"]
        # the one difference: the recipe hash label (of the stand-in plan, whose hosts are the allocation's)
        same = re.compile(r"^inkctl\.recipe-hash=.*")
        assert [tuple(same.sub("H", a) for a in c) for c in runs] == [tuple(same.sub("H", a) for a in c) for c in want], rank
        assert got[0][:3] == ("docker", "rm", "--force")  # a leftover of an earlier job goes first
        assert ("docker", "wait", f"inkctl-{loaded.recipe.name}-r{rank}") in got


def _calls(path: Path) -> list[tuple[str, ...]]:
    out = []
    lines = path.read_text().split("\n")
    for tool, args in zip(lines[0::2], lines[1::2]):
        out.append((tool, *[a for a in args.split("\0")[:-1]]))
    return out
