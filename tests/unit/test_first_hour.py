"""Issue 29 section 3, "The first hour, again": each a defect found as a new user would, each pinned
here by a test that failed before its fix."""

from __future__ import annotations

from inkctl.recipe.checks.rules import recipe_findings

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def inkctl(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("INKCTL_")}
    e.update(PYTHONPATH=str(ROOT), COLUMNS="80", NO_COLOR="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], cwd=cwd or ROOT, env=e,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name,cc,gib", [("rtx-4090", "8.9", 24), ("l4", "8.9", 24), ("a10g", "8.6", 24),
                                         ("rtx-a6000", "8.6", 48), ("l40", "8.9", 48), ("rtx-3090", "8.6", 24)])
def test_common_workstation_and_cloud_gpus_are_known(name, cc, gib):
    from inkctl.recipe.accelerators import lookup

    a = lookup(name)
    assert a is not None and a.arch == cc and a.memory_gib == gib and a.vendor == "nvidia"


def test_lease_help_describes_its_own_status():
    r = inkctl("lease", "--help")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("status"))
    assert "lease" in line and "Each rank's container" not in r.stdout


def test_prose_that_names_inkctl_is_not_folded_like_a_command():
    """HF_TOKEN=short printed a stray ` \\` in the middle of prose: "inkctl masks ..." was taken for
    the start of a command line."""
    from inkctl.cli.show.terminal import fold

    text = ("  HF_TOKEN: the value from env HF_TOKEN has 5 characters; inkctl masks every secret value in all it "
            "prints, and masking one shorter than 8 characters would shred the output: use the real secret")
    assert not any(ln.endswith(" \\") for ln in fold(text, 80))
    cmd = "next: run inkctl up recipes/some-long-recipe-name.yaml --hosts inventories/production-hosts.yaml --timeout 900"
    assert fold(cmd, 80)[0].endswith(" \\")  # a real command still continues with a backslash


def test_folding_never_breaks_inside_a_path_a_hash_or_a_url():
    from inkctl.cli.show.terminal import fold

    path = "/usr/local/lib/python3.11/site-packages/inkctl/share/examples/vllm-single-docker-with-a-long-name.yaml"
    url = "https://huggingface.co/organisation-with-a-long-name/model-with-an-even-longer-name-FP8-dynamic/tree/main"
    digest = "sha256:" + "0123456789abcdef" * 4
    for word in (path, url, digest):
        lines = fold(f"warning: see {word} for the details of what happened here", 80)
        assert any(word in ln for ln in lines), lines


def _recipe(**args):

    doc = {"name": "t", "model": {"repo": "org/m"},
           "hardware": {"accelerator": "h200", "nodes": 1, "gpus_per_host": 8},
           "engine": {"kind": "vllm", "version": "v1", "image": {"ref": "img:1"},
                      "args": {"tensor_parallel": 4, "data_parallel": {"size": 2}, **args}}}
    return doc


def test_an_all2all_backend_in_the_environment_beside_the_field_is_flagged():
    from inkctl.recipe.model import Recipe

    doc = _recipe(expert={"all2all_backend": "deepep_low_latency"})
    doc["container"] = {"env": {"VLLM_ALL2ALL_BACKEND": "pplx"}}
    found = [p for p in recipe_findings(Recipe.model_validate(doc)) if p.path == "container.env.VLLM_ALL2ALL_BACKEND"]
    assert found and found[0].severity == "error" and "expert.all2all_backend" in found[0].hint


def test_an_expert_size_vllm_does_not_take_is_said_not_dropped():
    from inkctl.recipe.model import Recipe

    found = [p for p in recipe_findings(Recipe.model_validate(_recipe(expert={"size": 8})))
             if p.path == "engine.args.expert.size"]
    assert found and "not passed" in found[0].message


@pytest.mark.parametrize("setting,hint", [
    ("engine.args.expert=true", "expert: {enabled: true}"),
    ("engine.args.data_parallel=2", "data_parallel: {size: 2}"),
    ("engine.args.max_num_seqs=8", "'max_running_requests'"),
])
def test_wrong_shapes_get_an_example_and_engine_flags_their_field(setting, hint):
    r = inkctl("validate", "tests/e2e/recipes/single.yaml", "--set", setting)
    assert r.returncode != 0 and hint in " ".join(r.stdout.split()), r.stdout


def test_the_plan_header_keeps_dp_and_ep_and_says_which_hash_to_compare():
    r = inkctl("plan", "qwen3-235b-a22b-fp8-8x-h200-dp-ep-vllm")
    assert "TP=1 PP=1 DP=8 EP" in " ".join(r.stdout.split())
    r = inkctl("plan", "examples/vllm-single-docker.yaml", "--hosts", "examples/hosts-one.yaml")
    text = " ".join(r.stdout.split())
    assert "(deployment " in text and "`status` compares the deployment hash" in text
    s = inkctl("export", "slurm", "examples/vllm-single-docker.yaml")
    recipe_hash = text.split("recipe ", 1)[1].split()[0]
    assert f"recipe hash {recipe_hash}" in s.stdout and "Job hash" in s.stdout


def test_recipes_of_a_directory_then_init_of_one_of_them(tmp_path):
    """`inkctl recipes ./mine` ends with `next: inkctl init RECIPE`; `init ./mine/x.yaml` said "no
    bundled recipe named ..."."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "x.yaml").write_text((ROOT / "tests/e2e/recipes/single.yaml").read_text())
    listing = inkctl("recipes", mine, cwd=tmp_path)
    assert "inkctl init RECIPE" in listing.stdout
    project = tmp_path / "project"
    project.mkdir()
    r = inkctl("init", mine / "x.yaml", cwd=project)
    assert r.returncode == 0, r.stderr
    assert (project / "x.yaml").read_text().startswith("# One host") and (project / "hosts.yaml").exists()


def test_inventory_misfits_are_all_reported_at_the_inventory_line(tmp_path):
    """Host count and GPU lists that do not fit the recipe were INK099 "cannot-load" at the recipe,
    and only the first."""
    inv = tmp_path / "two.yaml"
    inv.write_text('hosts:\n  - {name: a, address: 10.0.0.1, gpus: "0,1"}\n  - {name: b, address: 10.0.0.2, gpus: "0,1,2"}\n')
    r = inkctl("validate", "tests/e2e/recipes/single.yaml", "--hosts", inv)
    text = " ".join(r.stdout.split())
    assert r.returncode != 0 and "INK099" not in text
    assert f"INK210 {inv}:2:3: hosts: the recipe needs 1 host" in text
    assert f"{inv}:2:" in text and "hosts[0].gpus: host a" in text
    assert f"{inv}:3:" in text and "hosts[1].gpus: host b" in text


def test_a_loopback_address_says_it_runs_here_without_ssh(tmp_path):
    """address: 127.0.0.1 ran on this machine without SSH while doctor said "ssh ok": now the
    inventory warns (write local: true), plan says "this machine, no SSH", and local: true is the
    documented way."""
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  - {name: me, address: 127.0.0.1}\n")
    r = inkctl("validate", "tests/e2e/recipes/single.yaml", "--hosts", inv)
    assert "runs on this machine without SSH" in " ".join(r.stdout.split())
    p = inkctl("plan", "tests/e2e/recipes/single.yaml", "--hosts", inv)
    assert "(this machine, no SSH)" in p.stdout
    inv.write_text("hosts:\n  - {name: me, local: true}\n")
    r = inkctl("validate", "tests/e2e/recipes/single.yaml", "--hosts", inv)
    assert r.returncode == 0 and "without SSH" not in r.stdout
    from inkctl.recipe.hosts import Host

    assert Host(name="me", local=True).runs_here and not Host(name="me", address="127.0.0.1", port=2222).runs_here


def test_doctor_checks_the_secrets_up_would_stop_on(tmp_path):
    import yaml

    doc = yaml.safe_load((ROOT / "tests/e2e/recipes/single.yaml").read_text())
    doc.update(secrets={"API_KEY": {"env": "FIRST_HOUR_UNSET_VAR"}}, api_key="API_KEY")
    rec = tmp_path / "r.yaml"
    rec.write_text(yaml.safe_dump(doc))
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  - {name: gone, address: 192.0.2.1, port: 1}\n")  # documentation range: never reached
    from inkctl.api.observe.doctor import secrets_check
    from inkctl.api.target import Target, load_target

    loaded, plan, _ = load_target(Target.of(rec, inv, None), "doctor")
    got = secrets_check(loaded, plan)
    assert got.status == "fail" and "FIRST_HOUR_UNSET_VAR" in got.detail and got.host == "local"
    os.environ["FIRST_HOUR_UNSET_VAR"] = "sk-first-hour-0123456789"
    try:
        got = secrets_check(loaded, plan)
    finally:
        del os.environ["FIRST_HOUR_UNSET_VAR"]
    assert got.status == "ok" and "sk-first-hour" not in got.detail


def _readme_commands() -> list[list[str]]:
    """Every `inkctl COMMAND ...` line of the README's code blocks, continuation lines joined."""
    import shlex

    out, block, pending = [], False, ""
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```"):
            block, pending = not block, ""
            continue
        if not block:
            continue
        code = line.split(" # ", 1)[0]
        text = (pending + " " + code).strip() if pending else code.strip()
        if text.endswith("\\"):
            pending = text[:-1]
            continue
        pending = ""
        for part in text.split(";"):  # `inkctl a ...; inkctl b ...`
            part = part.strip()
            if not part.startswith("inkctl "):
                continue
            try:
                words = shlex.split(part)[1:]
            except ValueError:
                continue
            out.append([w.split("|")[0] if not w.startswith("-") else w for w in words])  # status|logs: the first
    return out


def _command_tree():
    """Every command module imported (as `inkctl --help` does), then click's command tree."""
    import importlib

    import typer.main

    from inkctl.cli import app as cli_app

    for mod in sorted(set(cli_app.COMMAND_MODULES.values())):
        importlib.import_module(mod)
    return typer.main.get_command(cli_app._app())


def test_every_option_in_the_readme_is_one_its_command_takes():
    """The README's import example `-o gptoss.yaml` failed: -o is --output everywhere else."""
    root = _command_tree()
    bad = []
    for words in _readme_commands():
        cmd, i = root, 0
        while i < len(words) and hasattr(cmd, "commands") and words[i] in cmd.commands:
            cmd, i = cmd.commands[words[i]], i + 1
        known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        bad += [f"inkctl {' '.join(words)}: {w}" for w in words[i:]
                if w.startswith("-") and len(w) > 1 and not w[1:2].isdigit() and w.split("=")[0] not in known]
    assert not bad, "\n".join(bad)


def test_one_meaning_per_short_option():
    """-n was num-prompts in bench and a count in top; -o is --output wherever it exists."""
    meanings: dict[str, set[str]] = {}

    def walk(cmd):
        for p in cmd.params:
            for short in [o for o in p.opts if o.startswith("-") and not o.startswith("--")]:
                longs = [o for o in p.opts if o.startswith("--")]
                meanings.setdefault(short, set()).add(longs[0] if longs else p.name)
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(_command_tree())
    assert {k: v for k, v in meanings.items() if len(v) > 1} == {}
    assert meanings["-o"] == {"--output"}


def test_export_out_says_file_or_dir_as_it_is():
    for sub, word in (("k8s", "DIR"), ("prometheus", "DIR"), ("slurm", "FILE"), ("systemd", "FILE")):
        r = inkctl("export", sub, "--help")
        assert f"--out {word}" in r.stdout, (sub, r.stdout)


def test_a_release_cut_off_halfway_still_gives_the_lease_back(tmp_path):
    """The lease left held after a failed `up`: the release removed the lock's files one by one over
    the file channel; cut off after the token went (a channel failing while the rollback and the
    health wait's log streams still use the connection), the fallback command found no token, took
    the lock for someone else's and left holder.json: `lease status` showed the `up` that had exited."""
    from inkctl.execute.hosts.local import LocalTransport
    from inkctl.execute.hosts.transport import HostError
    from inkctl.execute.state.deploylock import DeployLock, lock_dir, status
    from inkctl.plan.step import Plan, PlannedHost

    plan = Plan(deployment="d", recipe_hash="x", hosts=(PlannedHost(name="h1", address="localhost", rank=0,
                                                                    runtime="docker", state_dir=str(tmp_path / "d")),),
                stages=(), containers=(), teardown=())

    class CutOff(LocalTransport):
        def remove_dir(self, path: str) -> None:
            os.unlink(os.path.join(path, "token"))  # the first file went, then the channel failed
            raise HostError(self.name, "command", f"cannot remove {path}: channel closed")

    t = CutOff("h1")
    lock = DeployLock(plan, {"h1": t}, "up").acquire()
    assert status(plan, {"h1": t})["h1"] is not None
    lock.release()
    assert not os.path.exists(lock_dir(plan, "h1"))
    assert status(plan, {"h1": t})["h1"] is None
    # another command's lock is still never released by this one
    other = DeployLock(plan, {"h1": LocalTransport("h1")}, "down").acquire()
    lock.held_on = ["h1"]
    lock.release()
    assert status(plan, {"h1": t})["h1"] is not None
    other.release()


def test_bench_rows_show_itl_and_goodput_with_slos_and_a_dash_for_an_all_failed_point():
    from inkctl.cli.show.benchtable import point_header, point_line, progress_text

    p = {"max_concurrency": 4, "request_rate": "inf", "completed": 8, "failed": 0, "request_throughput": 2.0,
         "output_throughput": 100.0, "median_ttft_ms": 20.0, "p99_ttft_ms": 40.0, "median_tpot_ms": 5.0,
         "p99_tpot_ms": 9.0, "median_itl_ms": 4.5, "p99_itl_ms": 8.25, "request_goodput": 1.75}
    assert "ITL" in point_header(True) and "goodput" in point_header(True)
    two = point_line(p, True).splitlines()
    assert len(two) == 2 and "4.50/8.25" in two[1] and "1.75" in two[1]
    assert all(len(ln) <= 80 for ln in point_header(True).splitlines() + two)
    dead = dict(p, completed=0, failed=8, request_throughput=0.0, output_throughput=0.0, median_ttft_ms=0.0,
                p99_ttft_ms=0.0, median_tpot_ms=0.0, p99_tpot_ms=0.0)
    row = point_line(dead)
    assert "0.0/" not in row and row.split()[-2:] == ["-/-", "-/-"]
    assert progress_text(64, None, 23, 1, 64) == "  c=64: 23/64 done, 0 failed".replace("0 failed", "1 failed")


def test_bench_reports_progress_inside_a_point():
    """55 s of nothing at -c 1,64 -n 64: the sweep now calls back after every request."""
    from tests.unit.openai_fake import FakeServer

    from inkctl.bench import load

    seen: list[tuple] = []
    with FakeServer() as s:
        target = load.Target(s.url, "fake-model", api="chat")
        prompts = load.random_prompts(8, 8, 4, 0, None)
        load.sweep(target, prompts, concurrencies=[2], rates=None, num_prompts=6, duration_s=None,
                   on_request=lambda c, r, done, failed: seen.append((c, done, failed)))
    assert [d for _, d, _ in seen] == [1, 2, 3, 4, 5, 6] and all(c == 2 and f == 0 for c, _, f in seen)
