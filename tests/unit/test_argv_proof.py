"""The argv proof without hosts: which engine processes a plan starts (each role), the programs
that run inside the image (run here with python3 against the fake engine's stand-ins for the
engines' modules, and with nothing installed), the verdict's key, its store, and where in the
recipe a refused flag came from."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inkctl.execute.deploy import proof
from inkctl.plan.deploy import build_plan
from inkctl.plan.inputs import plan_inputs
from inkctl.plan.proof import RankArgv, program_input, rank_argvs
from inkctl.recipe.reading.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]
FAKE_SITE = ROOT / "tests" / "cluster" / "fake_engine" / "site"


def _plan(path: Path, sets: list[str] | None = None):
    loaded = load_recipe(path, sets or [], ROOT / "examples" / "hosts.yaml" if "2node" in path.name else None)
    return loaded, build_plan(loaded.recipe, loaded.hosts, **plan_inputs(loaded))


def _ask(kind: str, argv: list[str], site: bool = True) -> dict:
    """Run the proof program as the image's python3 would (the fake engine's modules on the path)."""
    r = RankArgv("h1", 0, "head", "docker", "img", tuple(argv), (), (), ())
    path = os.pathsep.join([str(FAKE_SITE), str(ROOT / "tests" / "cluster")]) if site else ""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": path}
    prog = proof.program(kind)
    assert prog is not None
    p = subprocess.run([sys.executable, "-"], input=program_input(r, prog), capture_output=True, env=env, timeout=60,
                       cwd="/")
    line = next(ln for ln in p.stdout.decode().splitlines() if ln.startswith(proof.MARK))
    return json.loads(line[len(proof.MARK):])


def test_every_role_of_a_native_two_node_vllm_plan_is_an_engine_process():
    loaded, plan = _plan(ROOT / "examples" / "vllm-native-2node.yaml")
    ranks = rank_argvs(plan, loaded.recipe)
    assert [(r.rank, r.role) for r in ranks] == [(0, "head"), (1, "worker")]
    assert ranks[0].argv[:2] == ("vllm", "serve") and "--headless" not in ranks[0].argv
    assert "--headless" in ranks[1].argv
    assert all(r.image == loaded.recipe.engine.image.ref for r in ranks)


def test_vllm_over_ray_proves_both_ray_starts_and_the_serve_in_the_head():
    loaded, plan = _plan(ROOT / "examples" / "vllm-ray-2node.yaml")
    ranks = rank_argvs(plan, loaded.recipe)
    assert [(r.rank, r.role, r.argv[0]) for r in ranks] == [(0, "head", "ray"), (1, "worker", "ray"), (0, "serve", "vllm")]
    assert "--distributed-executor-backend" in ranks[2].argv


def test_the_hotfix_wrapper_is_taken_off_and_the_hotfixes_go_with_the_request():
    loaded, plan = _plan(ROOT / "tests" / "e2e" / "recipes" / "build-hotfix.yaml")
    (head,) = rank_argvs(plan, loaded.recipe)
    assert head.argv[:2] == ("vllm", "serve")  # not the wrapper: what the wrapper execs
    assert [h.name for h in head.hotfixes] == ["hotfix-marker.py"]
    req = json.loads(head.request())
    assert req["hotfixes"][0]["interpreter"] == ["python3"]
    assert base64.b64decode(req["hotfixes"][0]["content"]) == (ROOT / "tests" / "e2e" / "patches" / "hotfix-marker.py").read_bytes()
    # what the plan puts in the rank's mounts goes too, at its path inside the container
    assert [p for p, _ in head.files] == ["/inkctl/hotfix/entry.sh", "/inkctl/hotfix/hotfix-marker.py"]
    assert "files" in req and not any("rank0.env" in p for p, _ in head.files)
    # the Spark recipe's hotfixes are not shipped: nothing to send, the rest is still read
    loaded, plan = _plan(ROOT / "recipes" / "inkling-small-2x-dgx-spark-vllm.yaml")
    assert [r.hotfixes for r in rank_argvs(plan, loaded.recipe)] == [(), ()]


def test_the_key_changes_with_the_image_argv_and_environment_and_nothing_else():
    prog = b"print('x')"
    a = RankArgv("h1", 0, "head", "docker", "img", ("vllm", "serve", "m"), (("A", "1"),), ("HF_TOKEN",), ())
    same = RankArgv("h9", 3, "worker", "podman", "img", ("vllm", "serve", "m"), (("A", "1"),), ("HF_TOKEN",), ())
    assert a.key("sha256:1", prog) == same.key("sha256:1", prog)  # where it runs is not what it is
    assert a.key("sha256:1", prog) != a.key("sha256:2", prog)
    assert a.argv_key(prog) == a.argv_key(prog) and a.key("sha256:1", prog) != a.key("sha256:1", b"other")
    other_env = RankArgv("h1", 0, "head", "docker", "img", ("vllm", "serve", "m"), (("A", "2"),), ("HF_TOKEN",), ())
    assert a.key("sha256:1", prog) != other_env.key("sha256:1", prog)
    other_argv = RankArgv("h1", 0, "head", "docker", "img", ("vllm", "serve", "m", "--x"), (("A", "1"),), ("HF_TOKEN",), ())
    assert a.argv_key(prog) != other_argv.argv_key(prog)


def test_the_proof_container_gets_the_program_on_stdin_and_no_secret_network_or_gpu():
    from inkctl.plan.proof import proof_run

    r = RankArgv("h1", 0, "head", "podman", "reg/img:1", ("vllm", "serve", "m", "--port", "8000"),
                 (("NCCL_SOCKET_IFNAME", "eth0"),), ("HF_TOKEN",), ())
    argv = proof_run(r, "inkctl-proof-x")
    assert argv[:3] == ("podman", "run", "--rm") and "--interactive" in argv
    assert argv[argv.index("--network") + 1] == "none" and "--gpus" not in argv
    assert argv[-3:] == ("python3", "reg/img:1", "-")  # the request rides on stdin, not on the command line
    assert "--port" not in argv and "HF_TOKEN" not in " ".join(argv)
    assert "NCCL_SOCKET_IFNAME=eth0" in argv


@pytest.mark.parametrize("argv,verdict,says", [
    (["vllm", "serve", "m", "--port", "8000"], "ok", None),
    (["vllm", "serve", "m", "--foo-bar"], "refused", "unrecognized arguments: --foo-bar"),
    (["vllm", "serve", "m", "--headless", "--api-server-count", "8"], "refused", "--api-server-count=8 cannot be used with --headless"),
    (["vllm", "serve", "m", "--kv-cache-dtype"], "refused", "expected one argument"),
    (["ray", "start", "--head", "--port", "6379", "--block"], "ok", None),
    (["ray", "start", "--address", "10.0.0.1:6379", "--bogus"], "refused", "No such option: --bogus"),
])
def test_the_vllm_program_reads_argv_with_the_engines_own_code(argv, verdict, says):
    got = _ask("vllm", argv)
    assert got["verdict"] == verdict, got
    if says:
        assert says in got["message"], got


@pytest.mark.parametrize("argv,verdict,says", [
    (["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "2"], "ok", None),
    (["python3", "-m", "sglang.launch_server", "--model-path", "m", "--reasoning-parser", "deepseek_r1"], "refused",
     "argument --reasoning-parser: invalid choice: 'deepseek_r1'"),
    (["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp-size", "3", "--nnodes", "2"], "refused",
     "tp_size (3) must be divisible by nnodes (2)"),
    (["sglang", "serve", "--model-path", "m", "--foo"], "refused", "unrecognized arguments: --foo"),
    (["sglang", "serve", "--model-path", "m", "--tp-size", "2"], "ok", None),
])
def test_the_sglang_program_reads_argv_with_the_engines_own_code(argv, verdict, says):
    got = _ask("sglang", argv)
    assert got["verdict"] == verdict, got
    if says:
        assert says in got["message"], got


def test_an_image_without_the_engine_is_said_not_checked():
    got = _ask("vllm", ["vllm", "serve", "m"], site=False)
    assert got["verdict"] == "unchecked" and "the image has no vllm Python package" in got["message"]
    got = _ask("sglang", ["python3", "-m", "sglang.launch_server", "--model-path", "m"], site=False)
    assert got["verdict"] == "unchecked" and "no sglang Python package" in got["message"]


def test_no_python_in_the_image_is_said_plainly():
    text = 'docker: Error response from daemon: exec: "python3": executable file not found in $PATH'
    assert "the image has no python3" in proof._no_answer(text, 127)


def test_a_refused_flag_is_located_in_extra_or_at_its_typed_field():
    v = proof.Verdict("h2", 1, "worker", "refused", "vllm serve: error: unrecognized arguments: --foo-bar")
    assert proof.locate(v, ["--enforce-eager", "--foo-bar=1"], {}) == "engine.args.extra[1] (--foo-bar)"
    v = proof.Verdict("h2", 1, "worker", "refused", "ValueError: --api-server-count=8 cannot be used with --headless")
    assert proof.locate(v, ["--api-server-count", "8"], {}) == "engine.args.extra[0] (--api-server-count)"
    v = proof.Verdict("h1", 0, "head", "refused", "argument --reasoning-parser: invalid choice: 'deepseek_r1'")
    assert proof.locate(v, [], {"--reasoning-parser": "engine.args.reasoning_parser"}) == \
        "engine.args.reasoning_parser (--reasoning-parser)"
    assert proof.locate(v, [], {}) == ""


def test_a_verdict_is_kept_by_key_and_by_argv_and_an_unchecked_one_is_not(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    r = RankArgv("h1", 0, "head", "docker", "img", ("vllm", "serve", "m"), (), (), ())
    prog = proof.program("vllm")
    assert prog is not None
    v = proof.Verdict("h1", 0, "head", "ok", stage="engine-config", engine="vllm", version="0.34.0",
                      key=r.key("sha256:1", prog), argv_key=r.argv_key(prog), image="sha256:1")
    proof.keep(v)
    assert proof.cached(v.key)["verdict"] == "ok"
    seen = proof.known(r, "vllm", {})
    assert seen is not None and seen.source == "cache" and proof.said(seen).startswith("accepted by vllm 0.34.0")
    assert proof.known(r, "vllm", {"k": {**v.record(), "verdict": "refused", "message": "no"}}).source == "lock"
    u = proof.Verdict("h1", 0, "head", "unchecked", "no engine", key="k2", argv_key="a2")
    proof.keep(u)
    assert proof.cached("k2") is None


def test_reaching_the_model_lookup_is_as_far_as_the_checks_go():
    """Real vLLM (0.31, run here on CPU) looks the model up before it builds its engine config:
    without the weights or the network that is where its checks end, all passed ("model-files")."""
    from inkctl.engines.proof import common

    class LocalEntryNotFoundError(Exception):
        pass

    def lookup():
        raise LocalEntryNotFoundError("Cannot find an appropriate cached snapshot folder for the specified revision on "
                                      "the local disk and outgoing traffic has been disabled.")

    notes: list[str] = []
    assert common.judge(lookup, "serve", notes, ["/vllm/"]) == "model-files"
    assert notes and notes[0].startswith("stopped at the model's files")
