"""The engine-version tables (inkctl/recipe/engine_releases/, dumped from the releases' own parsers by
tools/engine_flags.py): every planned engine command of every bundled recipe that targets a release
is accepted by that release's table; validate names gone, deprecated and cross-engine flags."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from inkctl.plan.deploy import build_plan
from inkctl.recipe.engine_versions import check_argv, flag_of, table_for, tables, targeted_release
from inkctl.recipe.source import load_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml")) + sorted(p for p in (ROOT / "examples").glob("*.yaml")
                                                           if not p.name.startswith("hosts"))


def engine_commands(path: Path) -> list[list[str]]:
    """Every engine command line the plan runs (a container's command, or an exec step's argv),
    from ``vllm serve`` or SGLang's launcher on; ``ray start`` and the like are not the engine's."""
    loaded = load_recipe(path)
    plan = build_plan(loaded.recipe, loaded.hosts)
    out = []
    for st in plan.stages:
        for s in st.steps:
            spec = getattr(s, "container", None)
            words = [spec.entrypoint, *spec.command] if spec is not None else list(getattr(s, "argv", None) or [])
            for i in range(len(words)):
                if words[i:i + 2] == ["vllm", "serve"] or words[i:i + 2] == ["-m", "sglang.launch_server"]:
                    out.append(words[i:])
                    break
    return out


def targeted(paths):
    for p in paths:
        r = load_recipe(p).recipe
        release = targeted_release(r)
        if release and table_for(r.engine.kind, release)[0] is not None:
            yield p


def test_the_tables_are_the_parsers_dumps():
    sg = {t.version: t for t in tables("sglang")}
    assert "0.5.20" in sg
    flags = sg["0.5.20"].flags
    assert len(flags) > 400  # the real parser's options, not a hand-written list
    for f in ("--tp-size", "--dp-size", "--enable-dp-attention", "--ep-size", "--moe-a2a-backend",
              "--speculative-algorithm", "--speculative-draft-model-path", "--mem-fraction-static"):
        assert f in flags and not flags[f]["deprecated"], f
    assert flags["--disable-cuda-graph"]["deprecated"]
    assert "--disable-piecewise-cuda-graph" not in flags and "--cuda-graph-max-bs" not in flags


@pytest.mark.parametrize("path", list(targeted(RECIPES)), ids=lambda p: p.stem)
def test_every_planned_argv_is_accepted_by_the_targeted_release(path):
    r = load_recipe(path).recipe
    commands = engine_commands(path)
    assert commands, "no engine command planned"
    for argv in commands:
        problems = [p for p in check_argv(r, argv, lambda i: f"argv[{i}]") if p.severity == "error"]
        assert problems == [], [p.message for p in problems]


# releases bundled recipes target whose wheels were not dumped yet (tools/engine_flags.py can):
# their recipes are not checked by test_every_planned_argv_is_accepted_by_the_targeted_release
NOT_DUMPED = {("vllm", "0.11.2"), ("vllm", "0.14.1"), ("vllm", "0.25.0"), ("vllm", "0.28.0")} - {(t.engine, t.version) for e in ("vllm", "sglang") for t in tables(e)}


def test_the_catalog_targets_releases_with_tables():
    """Each bundled recipe that names a release has its table, or is listed in NOT_DUMPED."""
    missing = []
    for p in (ROOT / "recipes").glob("*.yaml"):
        r = load_recipe(p).recipe
        release = targeted_release(r)
        if release and not table_for(r.engine.kind, release)[1] and (r.engine.kind, release) not in NOT_DUMPED:
            missing.append((p.name, release))
    assert missing == []


def _validate(*args):
    return subprocess.run([sys.executable, "-m", "inkctl", "validate", *args], capture_output=True, text=True)


def test_bundled_sglang_recipe_fails_for_release_0_5_20():
    p = _validate(str(ROOT / "recipes" / "inkling-small-2x-rtxpro6000-sglang.yaml"), "--set", "engine.version=0.5.20")
    out = " ".join((p.stdout + p.stderr).split())
    assert p.returncode != 0
    assert "engine.args.extra[2]: --disable-piecewise-cuda-graph is not a flag of SGLang 0.5.20" in out
    assert "engine.args.extra[3]: --cuda-graph-max-bs is not a flag of SGLang 0.5.20" in out
    # a later release is checked against the closest older table, said so
    p = _validate(str(ROOT / "recipes" / "inkling-small-2x-rtxpro6000-sglang.yaml"), "--set", "engine.version=0.5.23")
    assert "(the closest table to 0.5.23)" in " ".join(p.stdout.split())


def test_deprecated_warns_and_cross_engine_fails(tmp_path):
    src = (ROOT / "examples" / "sglang-2node-podman.yaml").read_text()
    doc = tmp_path / "r.yaml"
    import yaml

    d = yaml.safe_load(src)
    d["engine"]["version"] = "0.5.20"
    d["engine"]["args"]["extra"] = ["--disable-cuda-graph"]
    doc.write_text(yaml.safe_dump(d))
    p = _validate(str(doc))
    out = " ".join((p.stdout + p.stderr).split())
    assert "warning" in out and "--disable-cuda-graph is deprecated in SGLang 0.5.20" in out, out
    if not tables("vllm"):
        pytest.skip("no vLLM table: the cross-engine check needs both engines' tables")
    v = yaml.safe_load((ROOT / "examples" / "vllm-single-docker.yaml").read_text())
    v["engine"]["args"]["extra"] = ["--mem-fraction-static=0.8"]
    doc.write_text(yaml.safe_dump(v))
    p = _validate(str(doc))
    out = " ".join((p.stdout + p.stderr).split())
    assert p.returncode != 0
    assert "--mem-fraction-static is an SGLang flag: vLLM refuses it at start" in out  # rules' hand list
    assert "use engine.args.memory_fraction" in out
    assert out.count("--mem-fraction-static") == 1, out  # reported once, not by both checks
    # a flag only the dumped tables know as SGLang's (not in the hand list) is found by them
    v["engine"]["args"]["extra"] = ["--moe-a2a-backend=deepep"]
    doc.write_text(yaml.safe_dump(v))
    out = " ".join((_validate(str(doc)).stdout).split())
    assert "--moe-a2a-backend is an SGLang flag, not a vLLM one" in out, out


def test_flag_of():
    assert flag_of("--a=1") == "--a" and flag_of("value") is None and flag_of("--") is None
