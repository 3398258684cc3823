"""The engine-version tables (inkctl/recipe/engine_releases/, dumped from the releases' own parsers by
tools/engine_flags.py): every release a bundled recipe or example targets has its table; every
planned engine command of those recipes parses against it (each flag the release has, a value
where it takes one, none where it does not, a value among its choices); validate names gone,
deprecated (since when) and cross-engine flags. CI reads the dumped tables; it installs no wheel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from inkctl.plan.deploy import build_plan
from inkctl.recipe.checks.engine_versions import check_argv, flag_of, table_for, tables, targeted_release
from inkctl.recipe.reading.source import load_recipe

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
        if release and table_for(r.engine.kind, release)[1]:
            yield p


# the releases dumped (tools/engine_flags.py): every one a bundled recipe or example targets, and
# SGLang's 0.5.13.post1-0.5.19 besides (consecutive releases), so that validate can say in which
# release a flag was deprecated and in which it was removed
# and every release since: vLLM 0.29-0.34 (the newest on PyPI), SGLang 0.5.21-0.5.23 (the newest);
# TensorRT-LLM from the serve.py of one commit (its wheel is on NVIDIA's index only)
DUMPED = {"vllm": ("0.11.2", "0.14.1", "0.25.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0"),
          "sglang": ("0.5.13.post1", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21",
                     "0.5.22", "0.5.23"),
          "trtllm": ("git-00209af1",)}
# targeted but not dumpable: none (PyPI has SGLang 0.5.0 only as 0.5.0rc0..rc2: the example that
# targeted it moved to 0.5.23)
# targeted, and no table of its own: TensorRT-LLM's wheel is on NVIDIA's index only; its table is of
# serve.py at a commit (trtllm-git-00209af1), which checks the bundled recipe's argv in test_trtllm.py
NO_WHEEL: set[tuple[str, str]] = {("trtllm", "1.2.0")}


def test_every_targeted_release_has_its_table():
    assert {e: tuple(t.version for t in tables(e)) for e in DUMPED} == DUMPED
    missing = []
    for p in RECIPES:
        r = load_recipe(p).recipe
        release = targeted_release(r)
        if release and not table_for(r.engine.kind, release)[1] and (r.engine.kind, release) not in NO_WHEEL:
            missing.append((p.name, r.engine.kind, release))
    assert missing == [], "dump them: python tools/engine_flags.py ENGINE VERSION"


def parse_with_table(table, argv: list[str]) -> list[str]:
    """argv (from the engine's first option on) read the way argparse reads it, with the release's
    table for its parser: each option known; its values as its nargs says (one by default, none,
    '?' at most one, '*' any, '+' at least one); none glued to an option that takes none; each
    value among the choices. Returns what argparse would refuse."""
    def is_value(tok: str) -> bool:
        return not tok.startswith("--")

    refused, i = [], 0
    while i < len(argv):
        flag, eq, glued = argv[i].partition("=")
        i += 1
        if not flag.startswith("--"):
            refused.append(f"{flag}: a stray value")
            continue
        info = table.flags.get(flag)
        if info is None:
            refused.append(f"{flag}: unrecognized arguments")
            continue
        nargs = info.get("nargs") or ("0" if not info["takes_value"] else None)
        if nargs == "0":
            if eq:
                refused.append(f"{flag}: ignored explicit argument {glued!r}")
            continue
        values = [glued] if eq else []
        if not eq:
            most = {None: 1, "?": 1, "*": len(argv), "+": len(argv)}.get(nargs, int(nargs) if (nargs or "").isdigit() else 1)
            while len(values) < most and i < len(argv) and is_value(argv[i]):
                values.append(argv[i])
                i += 1
        least = {None: 1, "?": 0, "*": 0, "+": 1}.get(nargs, int(nargs) if (nargs or "").isdigit() else 1)
        if len(values) < least:
            refused.append(f"{flag}: expected {'one argument' if least == 1 else f'{least} arguments'}")
            continue
        for v in values:
            if info["choices"] and v not in info["choices"]:
                refused.append(f"{flag}: invalid choice: {v!r}")
    return refused


def test_parse_with_table_refuses_what_argparse_refuses():
    t = {x.version: x for x in tables("sglang")}["0.5.20"]
    assert parse_with_table(t, ["--tp-size", "2", "--disable-custom-all-reduce", "--moe-runner-backend=marlin"]) == []
    assert parse_with_table(t, ["--tp-size", "--disable-custom-all-reduce=1", "--moe-runner-backend", "x", "--nope"]) == [
        "--tp-size: expected one argument", "--disable-custom-all-reduce: ignored explicit argument '1'",
        "--moe-runner-backend: invalid choice: 'x'", "--nope: unrecognized arguments"]


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
    table, exact = table_for(r.engine.kind, targeted_release(r) or "")
    assert exact and table is not None
    for argv in commands:
        problems = [p for p in check_argv(r, argv, lambda i: f"argv[{i}]") if p.severity == "error"]
        assert problems == [], [p.message for p in problems]
        first = next(i for i, a in enumerate(argv) if a.startswith("--"))  # after `vllm serve MODEL`
        assert parse_with_table(table, argv[first:]) == [], (table.version, argv)


def _validate(*args):
    return subprocess.run([sys.executable, "-m", "inkctl", "validate", *args], capture_output=True, text=True)


def test_bundled_sglang_recipe_is_told_since_when_its_flags_are_deprecated_and_where_they_went():
    """The issue's case: --disable-piecewise-cuda-graph and --cuda-graph-max-bs. The issue says
    deprecated from 0.5.16; SGLang's own parsers say 0.5.14 (DeprecatedStoreConstAction /
    DeprecatedAliasStoreAction, "Deprecated alias for ..."; 0.5.13.post1 has them plain), and both
    flags are gone from 0.5.20's parser."""
    recipe = str(ROOT / "recipes" / "inkling-small-2x-rtxpro6000-sglang.yaml")

    def validate(release):
        # the seed's dev image has SGLang's inkling parsers; the releases forced here (before 0.5.20) do not, and
        # validate says so (tests/unit/test_argv_flags.py): parsers every one of them has keep this about deprecations
        p = _validate(recipe, "--set", f"engine.version={release}", "--set", "engine.args.reasoning_parser=qwen3",
                      "--set", "engine.args.tool_call_parser=qwen25")
        return p.returncode, " ".join((p.stdout + p.stderr).split())

    rc, out = validate("0.5.13.post1")
    assert rc == 0 and "piecewise" not in out and "cuda-graph-max-bs" not in out, out
    rc, out = validate("0.5.14")
    assert rc == 0, out
    assert "warning INK209 " in out, out
    assert "engine.args.extra[2]: --disable-piecewise-cuda-graph is deprecated in SGLang 0.5.14 (since 0.5.14)" in out, out
    assert "engine.args.extra[3]: --cuda-graph-max-bs is deprecated in SGLang 0.5.14 (since 0.5.14)" in out, out
    assert "hint: Deprecated alias for --cuda-graph-max-bs-decode." in out, out  # the release's own help line
    rc, out = validate("0.5.16")
    assert rc == 0 and "--cuda-graph-max-bs is deprecated in SGLang 0.5.16 (since 0.5.14)" in out, out
    rc, out = validate("0.5.20")
    assert rc != 0, out
    assert ("engine.args.extra[2]: --disable-piecewise-cuda-graph is gone in SGLang 0.5.20: removed in 0.5.20 "
            "(0.5.19 has it, deprecated since 0.5.14)") in out, out
    assert ("engine.args.extra[3]: --cuda-graph-max-bs is gone in SGLang 0.5.20: removed in 0.5.20 "
            "(0.5.19 has it, deprecated since 0.5.14)") in out, out
    assert "hint: use --cuda-graph-backend-prefill=disabled, or target SGLang 0.5.19" in out, out
    # a later release is judged by its own table, and told what replaced the flags (sglang#38375)
    rc, out = validate("0.5.23")
    assert rc != 0, out
    assert ("engine.args.extra[3]: --cuda-graph-max-bs is gone in SGLang 0.5.23: removed in 0.5.20 (0.5.19 has it, "
            "deprecated since 0.5.14); --cuda-graph-max-bs-decode replaces it") in out, out
    assert "hint: use --cuda-graph-max-bs-decode, or target SGLang 0.5.19" in out, out
    assert ("--disable-piecewise-cuda-graph is gone in SGLang 0.5.23: removed in 0.5.20 (0.5.19 has it, deprecated "
            "since 0.5.14); --cuda-graph-backend-prefill=disabled replaces it") in out, out
    assert "closest" not in out, out


def test_vllm_deprecations_are_in_the_tables_and_validate_warns():
    """vLLM marks deprecated arguments with add_argument(..., deprecated=True) (its
    FlexibleArgumentParser below Python 3.13): the dumps carry them; validate warns, and fails once
    the release has dropped the flag."""
    v = {t.version: t.flags for t in tables("vllm")}
    assert v["0.14.1"]["--disable-log-requests"]["deprecated"]
    assert v["0.11.2"]["--task"]["deprecated"] and v["0.11.2"]["--disable-log-requests"]["deprecated"]
    assert not any(v["0.28.0"][f]["deprecated"] for f in ("--tensor-parallel-size", "--data-parallel-size", "--headless"))
    # the bundled MI300X recipe (vLLM 0.14.1, its source's flags) passes one
    mi300x = str(ROOT / "recipes" / "qwen3-235b-a22b-fp8-4x-mi300x-vllm.yaml")
    p = _validate(mi300x)
    out = " ".join((p.stdout + p.stderr).split())
    assert p.returncode == 0, out
    assert "engine.args.extra[0]: --disable-log-requests is deprecated in vLLM 0.14.1 (since " in out, out
    p = _validate(mi300x, "--set", "engine.version=v0.28.0", "--set", "engine.image.ref=vllm/vllm-openai-rocm:v0.28.0")
    out = " ".join((p.stdout + p.stderr).split())
    assert p.returncode != 0 and "engine.args.extra[0]: --disable-log-requests is gone in vLLM 0.28.0: removed " in out, out


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


def test_the_dump_finds_flags_vllm_deprecates_through_its_own_parser(tmp_path):
    """tools/engine_flags.py's parser dump, on a parser built the way vLLM's FlexibleArgumentParser
    builds one below Python 3.13 (it pops ``deprecated=True`` and keeps the action in a class-level
    ``_deprecated`` set): those actions, and help text marked "[DEPRECATED]", come out deprecated.
    The real releases' answers are in the tables (test_vllm_deprecations_are_in_the_tables)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("engine_flags_tool", ROOT / "tools" / "engine_flags.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    pkg = tmp_path / "vllm"
    for d in ("", "utils", "entrypoints", "entrypoints/openai", "platforms"):
        (pkg / d).mkdir(parents=True, exist_ok=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "platforms" / "cpu.py").write_text("class CpuPlatform:\n    pass\n")
    (pkg / "utils" / "argparse_utils.py").write_text(
        "from argparse import ArgumentParser\n"
        "class FlexibleArgumentParser(ArgumentParser):\n"
        "    _deprecated = set()\n"
        "    def add_argument(self, *args, **kwargs):\n"
        "        deprecated = kwargs.pop('deprecated', False)\n"
        "        action = super().add_argument(*args, **kwargs)\n"
        "        if deprecated:\n"
        "            FlexibleArgumentParser._deprecated.add(action)\n"
        "        return action\n")
    (pkg / "entrypoints" / "openai" / "cli_args.py").write_text(
        "def make_arg_parser(p):\n"
        "    p.add_argument('--task', default='auto', deprecated=True, help='The task to use the model for.')\n"
        "    p.add_argument('--disable-log-requests', action='store_true', help='[DEPRECATED] Disable logging requests.')\n"
        "    p.add_argument('--port', type=int, default=8000, help='Port number.')\n"
        "    return p\n")
    p = subprocess.run([sys.executable, "-c", tool.DUMP, "vllm"], capture_output=True, text=True,
                       env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("@@FLAGS "))
    import json

    flags = json.loads(line[len("@@FLAGS "):])
    assert {f: flags[f]["deprecated"] for f in flags} == {"--task": True, "--disable-log-requests": True, "--port": False}
    assert flags["--port"]["nargs"] is None and flags["--disable-log-requests"]["nargs"] == "0"


def test_the_index_validate_reads_is_current_with_the_tables():
    """validate reads the flag names from one small index, not every release's table: the index
    must say what the tables say (tools/engine_flags.py rewrites it with each dump)."""
    import json

    from inkctl.recipe.checks.engine_versions import INDEX, TABLES, index_of

    assert json.loads((TABLES / INDEX).read_text()) == index_of(p for p in TABLES.glob("*.json") if p.name != INDEX), \
        "run: python -c 'import sys; sys.path.insert(0, \"tools\"); import engine_flags; engine_flags.write_index()'"


def _with_extra(tmp_path, example: str, version: str, extra: list[str], image: str | None = None) -> tuple[int, str]:
    import yaml

    d = yaml.safe_load((ROOT / "examples" / example).read_text())
    d["engine"]["version"] = version
    if image:
        d["engine"]["image"]["ref"] = image
    d["engine"]["args"]["extra"] = extra
    doc = tmp_path / "r.yaml"
    doc.write_text(yaml.safe_dump(d))
    p = _validate(str(doc))
    return p.returncode, " ".join((p.stdout + p.stderr).split())


def test_a_release_without_a_table_is_told_what_was_not_checked(tmp_path):
    """No table of its own: a flag an older table shows removed is still gone, one no table knows
    is a warning that names it (not an error from the closest table, not silence)."""
    rc, out = _with_extra(tmp_path, "sglang-2node-podman.yaml", "0.5.24", ["--foo-bar", "--chunked-prefill-size=4096"])
    assert rc == 0, out
    assert "warning INK209" in out and "engine.args.extra[0]: not checked: --foo-bar: inkctl has no flag table " \
        "for SGLang 0.5.24; the closest older one (0.5.23) cannot say whether it has them" in out, out
    rc, out = _with_extra(tmp_path, "sglang-2node-podman.yaml", "0.5.24", ["--cuda-graph-max-bs", "8"])
    assert rc != 0 and "--cuda-graph-max-bs is gone in SGLang 0.5.24: removed in 0.5.20" in out, out
    # older than every table (the old example's v0.5.0): named, not silent
    rc, out = _with_extra(tmp_path, "sglang-2node-podman.yaml", "v0.5.0", ["--foo-bar"], "lmsysorg/sglang:v0.5.0")
    assert rc == 0 and "not checked: --foo-bar: inkctl has no flag table for SGLang 0.5.0 (the oldest is 0.5.13.post1)" \
        in out, out
    # no release at all (an import's placeholder)
    rc, out = _with_extra(tmp_path, "sglang-2node-podman.yaml", "unknown", ["--foo-bar"], "local/sglang:mine")
    assert rc == 0 and "not checked: --foo-bar: no release found in engine.version or the image tag" in out, out
    # the release's own table: an unknown flag is an error
    rc, out = _with_extra(tmp_path, "sglang-2node-podman.yaml", "0.5.23", ["--foo-bar"])
    assert rc != 0 and "--foo-bar is not a flag of SGLang 0.5.23" in out, out


def test_the_replacement_is_taken_from_the_releases_own_words():
    """Where no entry of RENAMED says, the last table with the flag may: SGLang's help of a
    deprecated alias ("Deprecated alias for --x") and vLLM's negations."""
    from inkctl.recipe.checks.engine_versions import replacement

    sg = {t.version: t for t in tables("sglang")}
    assert replacement("sglang", "--cuda-graph-max-bs", sg["0.5.23"]) == "--cuda-graph-max-bs-decode"
    assert replacement("sglang", "--stream-output", sg["0.5.23"]) == "--incremental-streaming-output"
    assert replacement("sglang", "--enable-piecewise-cuda-graph", sg["0.5.23"]) == "--cuda-graph-backend-prefill=tc_piecewise"
    assert replacement("sglang", "--no-such-flag", sg["0.5.23"]) is None


def test_vllm_033_is_judged_by_its_own_parser(tmp_path):
    """vLLM 0.33's parser (vllm.entrypoints.common.cli_args) spells the negation of a boolean
    --enable-X as --disable-X where 0.32 had --no-enable-X: the old spelling is refused, named with
    the release that dropped it and its replacement; the new ones, and --max-num-queued-reqs
    (from 0.31), pass. Before the 0.29+ tables, 0.33 was judged by 0.28's: the other way round."""
    v = {t.version: t for t in tables("vllm")}
    assert "vllm.entrypoints.common.cli_args" in json_source(v["0.33.0"])
    assert "vllm.entrypoints.launchers.cli_args" in json_source(v["0.29.0"])
    rc, out = _with_extra(tmp_path, "vllm-single-docker.yaml", "v0.33.0", ["--no-enable-prefix-caching"],
                          "vllm/vllm-openai:v0.33.0")
    assert rc != 0, out
    # (0.32.0 and 0.33.0 are not said to be consecutive: a 0.32.x the tables lack could lie between)
    assert ("engine.args.extra[0]: --no-enable-prefix-caching is gone in vLLM 0.33.0: removed after 0.32.0, by 0.33.0; "
            "--disable-prefix-caching replaces it") in out, out
    assert "hint: use --disable-prefix-caching, or target vLLM 0.32.0" in out, out
    rc, out = _with_extra(tmp_path, "vllm-single-docker.yaml", "v0.33.0",
                          ["--disable-prefix-caching", "--max-num-queued-reqs", "64"], "vllm/vllm-openai:v0.33.0")
    assert rc == 0 and "INK209" not in out, out
    # the same on 0.28: the new spelling is not a flag there, the old one is
    rc, out = _with_extra(tmp_path, "vllm-single-docker.yaml", "v0.28.0", ["--disable-prefix-caching"])
    assert rc != 0 and "--disable-prefix-caching is not a flag of vLLM 0.28.0" in out, out


def json_source(table) -> str:
    import json

    from inkctl.recipe.checks.engine_versions import TABLES

    return json.loads((TABLES / table.file).read_text())["source"]
