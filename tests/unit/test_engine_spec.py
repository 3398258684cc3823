"""An engine is one module: every registered kind fills every slot of its spec, and a toy kind
that only this test registers validates, plans and renders like the bundled ones."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inkctl.errors import RecipeInvalid
from inkctl.recipe import engine_registry
from inkctl.recipe.engine import EngineBase
from inkctl.recipe.engine_registry import BootPhases, EngineSpec, Metrics, kinds, spec_of

ROOT = Path(__file__).resolve().parents[2]
TOY = Path(__file__).resolve().parent / "engines"


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.syspath_prepend(str(TOY))
    engine_registry.register("toy", "toy_engine")
    yield spec_of("toy")
    engine_registry.unregister("toy")


def _filled(spec: EngineSpec) -> list[str]:
    """The slots left empty or of the wrong kind."""
    bad = []
    for f in dataclasses.fields(spec):
        v = getattr(spec, f.name)
        if v is None or (isinstance(v, str) and not v):
            bad.append(f.name)
        elif f.name == "config" and not (isinstance(v, type) and issubclass(v, EngineBase)):
            bad.append(f.name)
        elif f.name == "boot" and not (isinstance(v, BootPhases) and v.phases and v.keywords and callable(v.feed)):
            bad.append(f.name)
        elif f.name == "metrics" and not (isinstance(v, Metrics) and all(getattr(v, m.name) for m in dataclasses.fields(v))):
            bad.append(f.name)
        elif f.type.startswith("Callable") and not callable(v):
            bad.append(f.name)
    return bad


def test_the_bundled_engines_are_known_in_order():
    assert kinds()[:2] == ("vllm", "sglang")


@pytest.mark.parametrize("kind", ["vllm", "sglang", "toy"])
def test_every_kind_fills_every_slot(kind, toy):
    spec = spec_of(kind)
    assert spec.kind == kind
    assert _filled(spec) == []
    kind_field = spec.config.model_fields["kind"]
    assert kind_field.is_required() and kind in str(kind_field.annotation)


def test_every_registered_kind_is_checked(toy):
    """The parametrized list above holds every kind the registry knows (a new engine is tested too)."""
    assert set(kinds()) <= {"vllm", "sglang", "toy"} | set(engine_registry._found())
    for kind in kinds():
        assert _filled(spec_of(kind)) == [], kind


TOY_RECIPE = """\
name: toy-two
model: {repo: org/toy-model}
hardware: {accelerator: h100, gpus_per_host: 1, nodes: 2}
engine:
  kind: toy
  version: "1.0"
  image: {ref: "toy/toyserve:1.0", digest: "sha256:%s"}
  args: {tensor_parallel: 2, extra: [--verbose]}
container: {runtime: docker, gpus: all, network: host}
network: {socket_ifname: eth0}
hosts:
  - {name: a, address: 192.0.2.1}
  - {name: b, address: 192.0.2.2}
""" % ("0" * 64)


def test_a_toy_engine_validates_plans_and_renders(toy, tmp_path):
    from inkctl.cli.show.plan_json import plan_json
    from inkctl.plan.deploy import build_plan
    from inkctl.recipe.reading.source import load_recipe

    f = tmp_path / "toy.yaml"
    f.write_text(TOY_RECIPE)
    loaded = load_recipe(f)
    assert type(loaded.recipe.engine).__name__ == "Toy" and loaded.recipe.engine.peer_port == 7000
    assert loaded.recipe.world_gpus == 2
    plan = build_plan(loaded.recipe)
    argvs = [s.argv for st in plan.stages for s in st.steps if getattr(s, "container", None) is not None]
    assert len(argvs) == 2
    head = list(argvs[0])
    assert "toyserve" in head  # the container's entrypoint
    assert head[head.index("org/toy-model"):] == ["org/toy-model", "--port", "8000", "--shards", "2",
                                                  "--config", "/inkctl/engine/toy.yaml",
                                             "--peer", "<host0.cluster_address>:7000", "--rank", "0", "--verbose"]
    puts = [p for st in plan.stages for s in st.steps for p in getattr(s, "files", ()) if p.path.endswith("/engine/toy.yaml")]
    assert [p.content for p in puts] == ["shards: 2\n", "shards: 2\n"] and all(p.sha256 for p in puts)
    assert any(a.endswith(":/inkctl/engine:ro") or "/inkctl/engine" in a for a in head)
    rendered = json.dumps(plan_json(plan))
    assert "toyserve" in rendered and "TOY_LOG" in rendered


def test_a_toy_engines_errors_are_located(toy, tmp_path):
    from inkctl.recipe.reading.source import load_recipe

    f = tmp_path / "toy.yaml"
    f.write_text(TOY_RECIPE.replace("tensor_parallel: 2,", "tensor_parallel: 2, bogus: 1,")
                 .replace('version: "1.0"', 'version: "1.0"\n  peer_port: 0'))
    with pytest.raises(RecipeInvalid) as e:
        load_recipe(f)
    got = [(p.path, p.line) for p in e.value.problems]
    assert ("engine.peer_port", 7) in got and ("engine.args.bogus", 9) in got
    f.write_text(TOY_RECIPE.replace("tensor_parallel: 2,", "tensor_parallel: 2, extra: [--shards, '4'],"))
    with pytest.raises(RecipeInvalid) as e:
        load_recipe(f)
    assert any(p.path == "engine.args.extra" or "set by inkctl" in p.message for p in e.value.problems)


def test_an_unknown_kind_names_every_registered_one(toy, tmp_path):
    from inkctl.recipe.reading.source import load_recipe

    f = tmp_path / "x.yaml"
    f.write_text(TOY_RECIPE.replace("kind: toy", "kind: tyo"))
    with pytest.raises(RecipeInvalid) as e:
        load_recipe(f)
    [p] = [p for p in e.value.problems if p.path == "engine.kind"]
    listed = ", ".join(repr(k) for k in kinds())  # vllm, sglang first, then the others (toy among them)
    assert listed.startswith("'vllm', 'sglang', ") and "'toy'" in listed
    assert f"expected one of {listed}, got 'tyo'" in p.message and "did you mean 'toy'" in (p.hint or "")


def test_validating_one_recipe_imports_only_its_engine():
    code = textwrap.dedent("""
        import sys
        from inkctl.recipe.reading.source import load_recipe
        load_recipe("examples/vllm-single-docker.yaml")
        print(sorted(m for m in sys.modules if m.startswith("inkctl.engines.")))
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['inkctl.engines._common', 'inkctl.engines.vllm']"


def test_help_imports_no_engine():
    err = subprocess.run([sys.executable, "-X", "importtime", "-m", "inkctl", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stderr
    assert "inkctl.recipe" in err or "inkctl.cli" in err  # the trace is there
    assert "inkctl.engines" not in err


def test_the_toy_engines_boot_lines_metrics_and_ports_reach_the_readers(toy, tmp_path):
    """The modules that read an engine's habits (boot phases, dashboard, compile cache, preflight
    ports, top) find the toy's through its spec."""
    from inkctl.api.measure.top import top_rows
    from inkctl.client.prometheus import parse
    from inkctl.execute.deploy.preflight import planned_ports
    from inkctl.execute.supervise.bootphases import read_log
    from inkctl.export.prometheus import dashboard
    from inkctl.plan import compilecache
    from inkctl.recipe.reading.source import load_recipe

    assert read_log(["x", "toy weights in 3.5 s"], "toy").seconds == {"weights": 3.5}
    panels = [p for row in dashboard("d", "toy", False)["panels"] for p in [row]]
    assert any("toy_running" in json.dumps(p) for p in panels)
    f = tmp_path / "toy.yaml"
    f.write_text(TOY_RECIPE + "compile_cache: {enabled: true}\n")
    r = load_recipe(f).recipe
    assert compilecache.env(r) == [("TOY_CACHE", "/root/.cache/inkctl-compile/toy")]
    assert planned_ports(r, 0)[1:] == [(7000, "peer")]
    now = parse("toy_running 2\ntoy_waiting 1\n")
    [row] = top_rows([("g", "toy", "u")], {}, {"u": (now, "")}, 0.0)
    assert row["running"] == 2 and row["waiting"] == 1
