"""A command stays thin: the CLI parses flags, calls ``inkctl.api`` and renders what comes back.

What a long command prepares and orchestrates (loading, host-key trust, planning, secrets, the
scrubber, signals, the failure's last words, the ``--watch`` hand-over, boot records) lives in
``inkctl/api/``, callable from Python without typer. Read with ``ast``:

- every function in the CLI modules named in ``THIN`` has a cyclomatic complexity (counted as
  radon does, nested functions and lambdas included in the function that holds them) of at
  most ``MAX_COMPLEXITY``;
- those modules reach hosts, plans, recipes and secrets only through ``inkctl.api``: they import
  nothing of inkctl but ``api``, other ``cli`` modules, ``errors`` and the event types
  (``execute.events``, the vocabulary the renderers speak);
- ``api`` imports neither typer nor rich (nor click): a Python caller or a test needs neither.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from tests.unit.test_layers import imports_of, modules

ROOT = Path(__file__).resolve().parents[2]
MAX_COMPLEXITY = 10
THIN = ("inkctl/cli/deploy.py", "inkctl/cli/watch.py", "inkctl/cli/weights.py", "inkctl/cli/show/weights_view.py",
        "inkctl/cli/cache.py", "inkctl/cli/images.py", "inkctl/cli/images_push.py", "inkctl/cli/lease.py",
        "inkctl/cli/runs.py", "inkctl/cli/bench.py", "inkctl/cli/logs.py", "inkctl/cli/observe.py",
        "inkctl/cli/show/slurm.py", "inkctl/cli/fleet.py", "inkctl/cli/commands.py", "inkctl/cli/project.py",
        "inkctl/cli/export/app.py", "inkctl/cli/export/k8s.py", "inkctl/cli/export/prometheus.py",
        "inkctl/cli/export/slurm.py", "inkctl/cli/export/systemd.py", "inkctl/cli/validate.py",
        "inkctl/cli/plan.py", "inkctl/cli/show/fleet_plan.py")
# what a thin command module may import of inkctl (a module, or a package and all below it)
THIN_MAY_IMPORT = ("inkctl.api", "inkctl.cli", "inkctl.errors", "inkctl.execute.events")


def complexity(fn: ast.AST) -> int:
    """McCabe's number as radon counts it: 1, and one for each branch (if, a conditional
    expression, a loop and its else, an except, each further operand of and/or, each for and
    if of a comprehension, a match case). Functions defined inside count for the one holding
    them: a closure does not hide a branch."""
    n = 1
    for node in ast.walk(fn):
        if isinstance(node, (ast.If, ast.IfExp)):
            n += 1
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            n += 1 + bool(node.orelse)
        elif isinstance(node, ast.ExceptHandler):
            n += 1
        elif isinstance(node, ast.BoolOp):
            n += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            n += 1 + len(node.ifs)
        elif isinstance(node, ast.match_case):
            n += 1
    return n


def functions(path: Path) -> list[tuple[str, int, ast.AST]]:
    """(name, line, node) of every function at the top of the module and every method."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node.name, node.lineno, node))
        elif isinstance(node, ast.ClassDef):
            out += [(f"{node.name}.{m.name}", m.lineno, m) for m in node.body
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return out


def test_the_counter_counts_what_radon_counts():
    src = '''
def f(a, b):
    if a and b or a:                 # if +1, and/or +2
        pass
    elif b:                          # +1
        x = 1 if a else 2            # +1
    for i in range(3):               # +1
        pass
    else:                            # +1
        pass
    try:
        pass
    except ValueError:               # +1
        pass
    except KeyError:                 # +1
        pass
    ys = [i for i in a if i if b]    # +3
    def inner():
        while a:                     # +1: a closure counts for f
            pass
    g = lambda: 1 if a else 0        # +1
'''
    fn = ast.parse(src).body[0]
    assert complexity(fn) == 1 + 3 + 1 + 1 + 2 + 2 + 3 + 1 + 1
    assert complexity(ast.parse("def g():\n    return 1\n").body[0]) == 1


@pytest.mark.parametrize("rel", THIN)
def test_cli_command_functions_stay_simple(rel):
    path = ROOT / rel
    heavy = [f"{rel}:{line} {name}: complexity {c}" for name, line, node in functions(path)
             if (c := complexity(node)) > MAX_COMPLEXITY]
    assert not heavy, (f"more than {MAX_COMPLEXITY} branches in a command module: what it prepares or "
                       "orchestrates belongs in inkctl/api/, what it renders in smaller functions:\n"
                       + "\n".join(heavy))


@pytest.mark.parametrize("rel", THIN)
def test_cli_commands_reach_hosts_only_through_the_api(rel):
    known = modules()
    name = ".".join(Path(rel).with_suffix("").parts)
    found = imports_of(name, ROOT / rel, known)
    assert found, "the reader found no import at all: it is not reading this module"
    bad = sorted(t for t in found if not any(t == ok or t.startswith(ok + ".") for ok in THIN_MAY_IMPORT))
    assert not bad, (f"{rel} imports {bad}: a command asks inkctl.api for what it needs "
                     f"(it may import {', '.join(THIN_MAY_IMPORT)})")


def test_the_api_needs_no_command_line_library():
    bad = []
    for p in sorted((ROOT / "inkctl/api").rglob("*.py")):
        tree = ast.parse(p.read_text(), str(p))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{p.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names
                    if n.split(".")[0] in ("typer", "click", "rich")]
    assert not bad, "inkctl.api is for Python callers too:\n" + "\n".join(bad)


# -- the api, called as a Python user or a test would: no typer, no terminal ----------------

EXAMPLE = ROOT / "examples/vllm-single-docker.yaml"
ONE_HOST = ROOT / "examples/hosts-one.yaml"  # 192.0.2.20: documentation range, never contacted


def _no_display():
    raise AssertionError("the display was made before the preparation passed")


def test_api_up_fails_on_a_missing_secret_before_anything_shows_or_connects(monkeypatch):
    from inkctl.api.target import Target
    from inkctl.api.up import UpOptions, up
    from inkctl.errors import InkctlError

    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(InkctlError) as e:
        up(Target.of(EXAMPLE, ONE_HOST), UpOptions(), _no_display)
    assert e.value.exit_code == 2
    assert "HF_TOKEN" in e.value.message and "nothing was started" in e.value.message


def test_api_up_needs_hosts():
    from inkctl.api.target import Target
    from inkctl.api.up import UpOptions, up
    from inkctl.errors import UsageError

    with pytest.raises(UsageError, match="up needs hosts"):
        up(Target.of(EXAMPLE), UpOptions(), _no_display)


class _Reached(Exception):
    """The display was asked for: the preparation of that path passed, nothing connected yet."""


def _reached():
    raise _Reached


def test_api_picks_the_backend_and_the_kind_a_python_caller_names(tmp_path):
    from inkctl.api import backend
    from inkctl.api.slurm import SlurmRequest
    from inkctl.api.target import Target
    from inkctl.api.up import UpOptions, up
    from inkctl.api.watching import Watching
    from inkctl.errors import UsageError

    inv = tmp_path / "hosts.yaml"
    inv.write_text("hosts:\n  - {name: a, address: 192.0.2.31, gpus: '0,1,2,3'}\n")
    fleet = Target.of(ROOT / "tests/e2e/recipes/fleet.yaml", inv)
    assert [backend.pick(t).name for t in (fleet, Target.of(EXAMPLE, slurm=True), Target.of(EXAMPLE, backend="k8s"))] \
        == ["ssh", "slurm", "k8s"]
    # a fleet: the api dispatches it to the fleet's bring-up itself (its display made once its secrets passed)
    with pytest.raises(_Reached):
        backend.up(fleet, UpOptions(), _reached)
    with pytest.raises(UsageError, match="a fleet: run up, then inkctl watch"):
        backend.up(fleet, UpOptions(watch=Watching()), _no_display)
    with pytest.raises(UsageError, match="a fleet: its groups come up through the fleet's bring-up"):
        up(fleet, UpOptions(), _no_display)  # one group's up is not a fleet's
    with pytest.raises(UsageError, match="--partition, .* go with --slurm"):
        backend.up(Target.of(EXAMPLE, ONE_HOST), UpOptions(slurm=SlurmRequest(partition="gpu")), _no_display)
    with pytest.raises(UsageError, match="--slurm takes its nodes from the allocation"):
        backend.up(Target.of(EXAMPLE, ONE_HOST, slurm=True), UpOptions(), _no_display)
    with pytest.raises(UsageError, match="up on Kubernetes: inkctl exports the manifests") as e:
        backend.up(Target.of(EXAMPLE, backend="k8s"), UpOptions(), _no_display)
    assert e.value.hint.startswith(f"inkctl export k8s {EXAMPLE}")
    with pytest.raises(UsageError, match="no backend 'pbs': one of ssh, slurm, k8s"):
        backend.status(Target.of(EXAMPLE, backend="pbs"))


def test_api_down_result_says_what_failed():
    from inkctl.api.down import DownResult
    from inkctl.execute.deploy.takedown import TakeDown
    from inkctl.plan.deploy import build_plan
    from inkctl.recipe.reading.source import load_recipe

    loaded = load_recipe(EXAMPLE, [], ONE_HOST)
    plan = build_plan(loaded.recipe, loaded.hosts)
    ok = DownResult(plan, TakeDown(removed={"gpu-box": ["c1"]}))
    assert ok.failure() is None and ok.summary() == "qwen-small-single is down on 1 host"
    bad = DownResult(plan, TakeDown(failed={"gpu-box": "connection refused"})).failure()
    assert bad is not None and "could not clean 1 host(s)" in bad.message and "gpu-box: connection refused" in bad.message


def test_api_weights_refuses_an_unpinned_model_before_any_host(tmp_path):
    from inkctl.api.target import Target
    from inkctl.api.weights import WeightsOptions, prepare
    from inkctl.errors import InkctlError, UsageError

    recipe = tmp_path / "r.yaml"
    recipe.write_text(EXAMPLE.read_text())
    with pytest.raises(InkctlError) as e:
        prepare(Target.of(recipe, ONE_HOST), WeightsOptions())
    assert e.value.exit_code == 2 and "the model is not pinned yet: Qwen/Qwen3-0.6B" in e.value.message
    assert e.value.hint == f"run `inkctl lock {recipe} --hosts {ONE_HOST}` first"
    with pytest.raises(UsageError, match="weights needs hosts"):
        prepare(Target.of(recipe), WeightsOptions())


def test_api_build_says_what_it_did_not_build_and_lease_needs_hosts():
    from inkctl.api.build import BuildOptions, build
    from inkctl.api.observe.lease import lease
    from inkctl.api.target import Target
    from inkctl.errors import UsageError

    said = build(Target.of(EXAMPLE), BuildOptions(), _no_display)
    assert isinstance(said, dict) and said["built"] is False and "nothing to build" in said["message"]
    with pytest.raises(UsageError, match="--push: inkctl builds no image for this recipe"):
        build(Target.of(EXAMPLE), BuildOptions(push="registry.invalid:5000"), _no_display)
    with pytest.raises(UsageError, match=r"^lease status needs hosts: pass --hosts FILE or list hosts: in the recipe$"):
        lease(Target.of(EXAMPLE), "status")


def test_api_runs_names_the_newest_when_a_run_is_unknown(tmp_path, monkeypatch):
    from inkctl import runlog
    from inkctl.api.runs import run, runs
    from inkctl.errors import UsageError

    monkeypatch.setenv("INKCTL_RUNS_DIR", str(tmp_path / "runs"))  # the suite's shared one holds other tests' runs
    assert runs().runs == [] and runs().dir == runlog.runs_dir()
    runlog.start("down", ["down", "r.yaml"])
    runlog.finish(0)
    (only,) = runs().runs
    assert run("last").info["id"] == only["id"]
    with pytest.raises(UsageError) as e:
        run("nope")
    assert e.value.hint == f"inkctl runs lists them (newest: {only['id']})"


def test_api_fleet_loads_a_fleet_and_says_what_a_take_down_left(tmp_path):
    from inkctl.api.fleet import FleetDownResult, load_any, load_fleet, retire_lines
    from inkctl.api.target import Target
    from inkctl.errors import UsageError
    from inkctl.execute.deploy.takedown import TakeDown

    inv = tmp_path / "hosts.yaml"
    inv.write_text("hosts:\n  - {name: a, address: 192.0.2.31, gpus: '0,1,2,3'}\n"
                   "  - {name: b, address: 192.0.2.32, gpus: '0,1,2,3'}\n")
    loaded, fleet = load_any(Target.of(ROOT / "tests/e2e/recipes/fleet.yaml", inv), "top")
    assert loaded.recipe.fleet.replicas == len(fleet.replicas) == 2
    lines = retire_lines(fleet, f"{fleet.name}-r<k>")
    assert lines == [(h, ln) for h in ("a", "b") for ln in ("docker rm --force '<its containers>'",
                                                            f"rm -rf -- '/var/lib/inkctl/{fleet.name}-r<k>'")]
    assert retire_lines(fleet, f"{fleet.name}-r<k>", only_host="b") == lines[2:]
    with pytest.raises(UsageError, match="top works on a fleet: the recipe has no fleet: section"):
        load_fleet(Target.of(EXAMPLE, ONE_HOST), "top")
    with pytest.raises(UsageError, match="status needs hosts"):
        load_fleet(Target.of(ROOT / "tests/e2e/recipes/fleet.yaml"), "status")
    plan = fleet.replicas[0].plan
    ok = FleetDownResult(fleet, [(plan, TakeDown(removed={"a": ["c1"]}))], {})
    assert ok.failure() is None and ok.failed == {}
    bad = FleetDownResult(fleet, [(plan, TakeDown(failed={"a": "connection refused"}))], {}).failure()
    assert bad is not None and bad.message.startswith(f"fleet {fleet.name}: could not clean every host:")
    assert f"{plan.deployment} a: connection refused" in bad.message


def test_api_slurm_refuses_an_allocation_without_nodes_before_asking_slurm():
    from inkctl.api.slurm import scrubbed, slurm_target
    from inkctl.api.target import Target
    from inkctl.errors import InkctlError
    from inkctl.scrub import arm

    with pytest.raises(InkctlError, match=r"\$SLURM_JOB_NODELIST '\(null\)' names no node") as e:
        slurm_target(Target.of(ROOT / "tests/e2e/recipes/single.yaml"), "weights", nodelist="(null)")
    assert e.value.exit_code == 2
    said: list[str] = []
    arm(["s3cr3t-value"])
    try:
        scrubbed(said.append)("token s3cr3t-value here")
    finally:
        arm([])
    assert said == ["token *** here"]


def test_api_where_finds_the_server_a_plan_answers_on_without_asking_it():
    from inkctl.api.measure.serving import where
    from inkctl.api.target import Target
    from inkctl.errors import UsageError

    with pytest.raises(UsageError, match="bench needs a RECIPE"):
        where(None, None, None, "bench")
    w = where(Target.of(EXAMPLE, ONE_HOST), None, None, "bench")  # the recipe names its model: nothing asked
    assert w.base_url.startswith("http://192.0.2.20:") and not w.base_url.endswith("/v1/chat/completions")
    assert (w.model, w.plan is not None, w.fleet) == ("qwen-small", True, None)
    assert where(None, "http://127.0.0.1:9/v1/chat/completions/", "m", "smoke").base_url == "http://127.0.0.1:9"
    with pytest.raises(UsageError, match="give a base URL"):
        where(None, "127.0.0.1:9", "m", "smoke")


def test_api_smoke_checks_what_was_asked():
    from inkctl.api.measure.serving import Where
    from inkctl.api.measure.smoke import Ask, checks_for
    from inkctl.errors import UsageError

    bare = Where("http://127.0.0.1:9/", "m")
    assert bare.base_url == "http://127.0.0.1:9"
    with pytest.raises(UsageError, match="--expect goes with --prompt"):
        checks_for(bare, Ask(expect="4"))
    assert [c.kind for c in checks_for(bare, Ask(reasoning=True, tools=True))] == ["answer", "reasoning", "tools"]
    assert [(c.prompt, c.contains) for c in checks_for(bare, Ask(prompts=("2+2?",), expect="4"))] == [("2+2?", "4")]


def test_api_logs_names_the_ranks_there_are_when_none_matches():
    from inkctl.api.observe.logs import LogsOptions, ranks
    from inkctl.api.target import Target
    from inkctl.errors import UsageError

    target = Target.of(EXAMPLE, ONE_HOST)
    assert [(s.host, s.rank) for s in ranks(target, LogsOptions()).sources] == [("gpu-box", 0)]
    with pytest.raises(UsageError, match="no rank matches --rank 7") as e:
        ranks(target, LogsOptions(rank=7))
    assert e.value.hint == "this deployment has gpu-box/0"


def test_api_results_compares_only_points_in_common(tmp_path):
    from inkctl.api.measure.results import Run, compare_runs
    from inkctl.errors import InkctlError

    a = Run(tmp_path / "a", {}, [{"max_concurrency": 1, "request_rate": "inf"}])
    b = Run(tmp_path / "b", {}, [{"max_concurrency": 2, "request_rate": "inf"}])
    with pytest.raises(InkctlError, match="a and b have no point in common"):
        compare_runs(a, b)


def test_api_plan_on_paper_builds_what_up_would_run_and_names_the_next_command():
    from inkctl.api.paper.plan import check_host, on_paper, up_command
    from inkctl.api.target import Target
    from inkctl.errors import UsageError

    bare = Target.of(EXAMPLE)
    paper = on_paper(bare)
    assert paper.plan is not None and paper.fleet is None and not paper.gateway
    assert up_command(paper, bare) == (f"inkctl up {EXAMPLE} --hosts FILE"
                                       "    (an inventory: inkctl init writes one to edit)")
    with pytest.raises(UsageError, match="--host nope: no such host in this plan") as e:
        check_host(on_paper(Target.of(EXAMPLE, ONE_HOST)), "nope")
    assert e.value.hint == "its hosts are gpu-box"
    fleet = on_paper(Target.of(ROOT / "tests/e2e/recipes/fleet.yaml"))
    assert fleet.plan is None and fleet.fleet is not None and len(fleet.fleet.replicas) == 2


def test_api_recipes_lists_a_directory_and_refuses_two_sources(tmp_path):
    from inkctl.api.paper.recipes import listing, schema
    from inkctl.errors import InkctlError

    (tmp_path / "broken.yaml").write_text("name: x\n")
    found = listing(ROOT / "examples")
    assert found.checkout is None and found.as_json() == found.rows
    assert {r["name"] for r in found.rows if "name" in r} >= {"qwen-small-single"}
    assert listing(tmp_path).rows == [{"recipe": str(tmp_path / "broken.yaml"), "path": str(tmp_path / "broken.yaml"),
                                       "error": "invalid (run inkctl validate)"}]
    with pytest.raises(InkctlError, match="give a directory or --from, not both"):
        listing(tmp_path, from_=str(tmp_path))
    with pytest.raises(InkctlError, match="--format must be json or markdown, not 'yaml'") as e:
        schema("yaml")
    assert e.value.exit_code == 2 and schema("json").endswith("}\n")


def test_api_init_writes_nothing_when_one_of_its_files_is_there(tmp_path):
    from inkctl.api.paper.init import init
    from inkctl.errors import UsageError

    wrote: list = []
    project = init(None, tmp_path, wrote.append)
    assert (project.recipe_file, project.inventory) == ("vllm-single-docker.yaml", "hosts.yaml")
    assert [str(p) for p in wrote] == ["vllm-single-docker.yaml", "hosts.yaml"]
    second = init("vllm-ray-2node", tmp_path, wrote.append)  # hosts.yaml is kept: its own inventory beside it
    assert second.inventory == "hosts-vllm-ray-2node.yaml" and len(wrote) == 4
    with pytest.raises(UsageError, match="vllm-single-docker.yaml already exists here; init overwrites nothing"):
        init("vllm-single-docker", tmp_path, wrote.append)
    assert len(wrote) == 4
    with pytest.raises(UsageError, match="no bundled recipe or recipe file named 'nope'"):
        init("nope", tmp_path, wrote.append)


def test_api_export_reads_key_value_flags_and_refuses_a_gateway_file():
    from inkctl.api.export import K8sFlags, k8s, pairs, var_pairs
    from inkctl.api.target import Target
    from inkctl.errors import InkctlError, UsageError

    assert pairs(["a=b=c"], "--x") == [("a", "b=c")]
    with pytest.raises(UsageError, match="--network-annotation 'ab': expected KEY=VALUE"):
        pairs(["ab"], "--network-annotation")
    with pytest.raises(UsageError, match="'1x' is not a variable name"):
        var_pairs(["1x=2"])
    with pytest.raises(InkctlError, match="export k8s of a gateway file is not supported yet"):
        k8s(Target.of(ROOT / "tests/e2e/recipes/gateway.yaml"), K8sFlags())
    done = k8s(Target.of(EXAMPLE), K8sFlags(namespace="ns"))
    assert done.failure() is None and done.findings == []
    assert all(d["metadata"].get("namespace") == "ns" for d in done.documents)


def test_api_validate_gives_a_verdict_per_file(tmp_path, monkeypatch):
    from inkctl.api.paper.validate import verdicts

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the verdicts kept here, not in the user's cache

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    (ok_path, ok, problems, _), (bad_path, bad_ok, bad_problems, _) = verdicts([str(EXAMPLE), str(bad)])
    assert (ok_path, ok, problems) == (EXAMPLE, True, [])
    assert bad_path == bad and not bad_ok and bad_problems


# -- the api takes a cancel token; only the command line listens to signals ---------------------

HOST_PROGRAMS = ("inkctl/weights/onhost.py",)  # a program of its own on a host (hosts/program.py)


def test_signal_handlers_are_installed_only_by_the_command_line():
    bad = []
    for p in sorted((ROOT / "inkctl").rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith("inkctl/cli/") or rel in HOST_PROGRAMS:
            continue
        for node in ast.walk(ast.parse(p.read_text(), rel)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("signal.signal", "signal"):
                bad.append(f"{rel}:{node.lineno}")
    assert not bad, "take a cancel token (threading.Event) instead; cli/common/signals.py sets it:\n" + "\n".join(bad)


def test_a_backend_is_one_class_registered_in_one_place(monkeypatch):
    """A toy backend named in ``BACKENDS`` alone is what every command reaches for a target that
    names it: no command line flag, no other module knows it."""
    from inkctl.api import backend
    from inkctl.api.observe.logs import LogsOptions
    from inkctl.api.target import Target
    from inkctl.api.up import UpOptions
    from inkctl.api.watching import Watching
    from inkctl.execute.events import Collect

    calls: list[tuple] = []

    class Toy:
        name = "toy"

        def up(self, target, opts, display, *, on_up, watch_events, cancel):
            calls.append(("up", target.recipe.name, cancel.is_set()))
            return "up!"

        def down(self, target, *, accept_new, events):
            calls.append(("down", accept_new))
            return "down!"

        def status(self, target, *, accept_new, on_accept):
            return "status!"

        def logs(self, target, opts, view, *, on_accept, cancel):
            calls.append(("logs", opts.follow, cancel))

        def watch(self, target, how, events, *, cancel):
            calls.append(("watch", how.restart))

    monkeypatch.setitem(backend.BACKENDS, "toy", Toy)
    t = Target.of(EXAMPLE, backend="toy")
    assert backend.up(t, UpOptions(), _no_display) == "up!"
    assert backend.down(t, accept_new=True) == "down!" and backend.status(t) == "status!"
    stop = threading.Event()
    backend.logs(t, LogsOptions(follow=True), view=None, cancel=stop)  # type: ignore[arg-type]
    backend.watch(t, Watching(restart=True), Collect())
    assert calls == [("up", EXAMPLE.name, False), ("down", True), ("logs", True, stop), ("watch", True)]
