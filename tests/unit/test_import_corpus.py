"""`inkctl import` on recipes people actually have: every public recipe in tests/data/import (sparkrun's
own repository and spark-arena/recipe-registry, vllm-project/recipes model files; each folder keeps
its LICENSE and the SOURCE commit) either imports, validates and plans with every flag of its command
in the planned engine argv, value included, or is refused with one message that names the file and
line. Never an internal error.

The expected flags are read here from the rendered command with a reader of this test's own (an
option starts with a dash and a letter; the words after it are its values), so a flag the import
loses or changes fails the test even when the import's own reader agrees with itself.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inkctl.errors import InkctlError
from inkctl.recipe.foreign import shell as foreign_shell, sparkrun
from tests.unit.import_helpers import imported, same_value, values_after

DATA = Path(__file__).resolve().parents[1] / "data" / "import"
SPARKRUN = sorted((DATA / "sparkrun").rglob("*.yaml"))
VLLM_RECIPES = sorted((DATA / "vllm-recipes").rglob("*.yaml"))
# spelled otherwise in the plan: the typed field's own flag
ALIASES = {
    "vllm": {"-tp": "--tensor-parallel-size", "--tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size",
             "-dp": "--data-parallel-size"},
    "sglang": {"--tp": "--tp-size", "--speculative-algo": "--speculative-algorithm"},
}
# refused, and why (the whole corpus is counted in test_corpus_counts)
REFUSED = {"llama-cpp": "runtime 'llama-cpp'", "omni": "a vLLM-Omni model file"}
# left out of the plan at the engine's own default (the plan passes them only above 1)
DEFAULTS = {"--pipeline-parallel-size": "1", "--data-parallel-size": "1", "--pp-size": "1", "--dp-size": "1"}
_OPTION = re.compile(r"^--?[A-Za-z]")


def _options(argv: list[str]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for a in argv:
        if _OPTION.match(a):
            flag, eq, value = a.partition("=")
            out.append((flag, [value] if eq else []))
        elif out:
            out[-1][1].append(a)
    return out


def _json_meant(value: str, values: dict) -> str:
    """A doubled-brace value as str.format reads it (Python's own str.format here)."""
    if value.startswith("{{") and value.endswith("}}"):
        try:
            return value.format_map(values)
        except (KeyError, ValueError, IndexError):
            return value
    return value


def _assert_flags_intact(options, kind: str, argv: list[str], result, repo: str, values: dict | None = None) -> None:
    dropped = " ".join(result.unmapped)
    last = {flag: i for i, (flag, _) in enumerate(options)}  # given twice, the engine takes the last
    for i, (flag, vals) in enumerate(options):
        if last[flag] != i:
            continue
        if kind == "vllm" and flag.startswith("--"):  # vLLM reads --a_b as --a-b (up to a '.')
            name, dot, keys = flag[2:].partition(".")
            flag = "--" + name.replace("_", "-") + dot + keys
        if flag in ("--model", "--model-path"):
            assert repo in argv, (flag, repo, argv)
            continue
        planned = ALIASES[kind].get(flag, flag)
        if planned not in argv and not any(a.startswith(planned + "=") for a in argv):
            if vals and DEFAULTS.get(planned) == vals[0]:
                continue
            assert flag in dropped, f"{flag} is neither in the planned argv nor reported: {argv}"
            continue
        if vals:
            want = [_json_meant(v, values or {}) for v in vals]
            seen = values_after(argv, planned, len(want))
            assert any(len(s) == len(want) and all(same_value(w, g) for w, g in zip(want, s)) for s in seen), \
                (flag, want, seen)


def _refused(e: InkctlError, src: Path) -> None:
    text = str(e)
    assert text.startswith(f"{src}:"), text
    assert "internal error" not in text.lower()


@pytest.mark.parametrize("src", SPARKRUN, ids=lambda p: str(p.relative_to(DATA)))
def test_sparkrun_recipe_imports_with_its_flags_or_is_refused_where_it_says(src, tmp_path):
    doc = yaml.safe_load(src.read_text())
    try:
        result, loaded, argv = imported(src, tmp_path / "out.yaml")
    except InkctlError as e:
        _refused(e, src)
        assert sparkrun.runtime(doc) not in sparkrun.RUNTIMES, f"a runtime inkctl runs was refused: {e}"
        assert re.match(rf"{re.escape(str(src))}:\d+: ", str(e)), str(e)
        return
    kind = loaded.recipe.engine.kind
    rendered = foreign_shell.read(sparkrun.render(doc).text).argv
    words = 3 if rendered[0].startswith("python") else 2
    assert argv[:words] == rendered[:words] or kind == "sglang"
    _assert_flags_intact(_options(rendered[words:]), kind, argv, result, loaded.recipe.model.repo,
                         sparkrun.values(doc))
    if not rendered[words].startswith("-"):  # vllm serve MODEL
        assert argv[2] == rendered[words]


HOPPER = ("hopper", "nvidia")  # the H200's blocks in a model file's hardware_overrides


def _block(overrides) -> dict:
    return next((overrides[k] for k in HOPPER if isinstance(overrides, dict) and k in overrides), {})


def _model_file_argv(doc: dict) -> list[str]:
    """The recipes site's single-node command for the default variant on an H200, read here."""
    argv = [str(a) for a in doc["model"].get("base_args") or []]
    default = (doc.get("variants") or {}).get("default") or {}
    for overrides in (doc.get("hardware_overrides"), default.get("hardware_overrides")):
        argv += [str(a) for a in _block(overrides).get("extra_args") or []]
    for name, feat in (doc.get("features") or {}).items():
        if name in (doc.get("opt_in_features") or []):
            continue
        if feat.get("strategies") and "single_node_tp" not in feat["strategies"]:
            continue
        if feat.get("modes"):
            feat = feat["modes"][feat["default_mode"]]
        block = _block(feat.get("hardware_overrides"))
        argv += [str(a) for a in (block["args"] if "args" in block else feat.get("args")) or []]
    return argv


# imported as the model file says, refused by validate only because inkctl's newest vLLM flag table
# is older than the release the file targets (issue 28: the tables lag the engines). None since the
# 0.29-0.34 tables: NVIDIA-Nemotron-3.5-Lightning's --mamba-ssu-algorithm is in them.
TABLES_LAG: dict[str, str] = {}


@pytest.mark.parametrize("src", VLLM_RECIPES, ids=lambda p: str(p.relative_to(DATA)))
def test_vllm_recipes_model_file_imports_without_its_prose_or_is_refused(src, tmp_path):
    doc = yaml.safe_load(src.read_text())
    if src.name in TABLES_LAG:
        with pytest.raises(AssertionError, match=TABLES_LAG[src.name]):
            imported(src, tmp_path / "out.yaml", accelerator="h200", gpus_per_host=8)
        return
    try:
        result, loaded, argv = imported(src, tmp_path / "out.yaml", accelerator="h200", gpus_per_host=8)
    except InkctlError as e:
        _refused(e, src)
        assert doc.get("omni"), f"a text model file was refused: {e}"
        return
    default = (doc.get("variants") or {}).get("default") or {}
    assert loaded.recipe.model.repo == default.get("model_id", doc["model"]["model_id"])
    _assert_flags_intact(_options(_model_file_argv(doc)), "vllm", argv, result, loaded.recipe.model.repo)
    guide = str(doc.get("guide", ""))[:40]
    assert guide not in " ".join(argv)
    for name in doc.get("opt_in_features") or []:  # off, as on the recipes site
        for a in (doc["features"].get(name) or {}).get("args") or []:
            if str(a).startswith("--") and str(a) not in _model_file_argv(doc):
                assert str(a) not in argv, (name, a)


def test_corpus_counts():
    """What the corpus holds and what it comes to (the figures of the report)."""
    from inkctl.api.paper.importing import import_recipe

    counts: dict[str, int] = {}
    for src in SPARKRUN + VLLM_RECIPES:
        kw = {"accelerator": "h200", "gpus_per_host": 8} if src in VLLM_RECIPES else {}
        try:
            r = import_recipe(src, **kw)
            key = "imported" if not any(p.severity == "error" for p in r.problems) else "invalid: " + src.name
        except InkctlError as e:
            key = next((k for k, v in REFUSED.items() if v in str(e)), "refused: " + str(e))
        counts[key] = counts.get(key, 0) + 1
    assert len(SPARKRUN) >= 30
    assert counts == {"imported": 83, "llama-cpp": 3, "omni": 11}, counts


def test_no_internal_error_from_the_command_line(tmp_path):
    """Through the CLI: one refused, one imported; neither prints a traceback."""
    llama = next(p for p in SPARKRUN if "llama-cpp" in p.name)
    ok = next(p for p in SPARKRUN if p.name == "qwen3.6-27b-fp8-mtp-vllm.yaml")
    for src, rc in ((llama, 2), (ok, 0)):
        p = subprocess.run([sys.executable, "-m", "inkctl", "import", str(src), "--out", str(tmp_path / "x.yaml")],
                           capture_output=True, text=True)
        assert p.returncode == rc, p.stderr
        assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    spec = json.loads(json.dumps(yaml.safe_load((tmp_path / "x.yaml").read_text())["speculative"]))
    assert spec == {"method": "mtp", "num_speculative_tokens": 2}
