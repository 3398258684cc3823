"""Messages that point the right way (issue "a first hour that goes right"): each mistake a new user
makes gets its exact text and its exact location, on the real recipe model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inkctl.codes import BY_CODE, CODES, markdown
from inkctl.errors import RecipeInvalid
from inkctl.recipe.reading.load import load_model
from inkctl.recipe.model import Recipe
from inkctl.recipe.reading.source import load_inventory, load_recipe

ROOT = Path(__file__).resolve().parents[2]
SPARK = ROOT / "recipes/inkling-small-2x-dgx-spark-vllm.yaml"
HOSTS = ROOT / "examples/hosts.yaml"


def rendered(text: str, overrides: list[str] = ()) -> list[str]:
    with pytest.raises(RecipeInvalid) as info:
        load_model(Recipe, "r.yaml", list(overrides), text=text)
    return [p.render() for p in info.value.problems if p.severity == "error"]


def spark(old: str, new: str) -> str:
    text = SPARK.read_text()
    assert text.count(old) == 1, old
    return text.replace(old, new)


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_a_field_indented_out_of_its_section_says_where_it_belongs():
    text = spark("    tensor_parallel: 2\n    port: 8000\n", "    tensor_parallel: 2\n  port: 8000\n")
    n = line_of(text, "  port: 8000")
    assert rendered(text) == [f"r.yaml:{n}:3: error: engine.port: unknown field 'port' here: it belongs under "
                              f"'engine.args' (hint: check the indentation)"]


def test_a_field_indented_into_a_section_says_where_it_belongs():
    text = spark("    port: 8000\n", "    port: 8000\n    multinode: ray\n").replace("  multinode: native ", "  # ", 1)
    n = line_of(text, "    multinode: ray")
    assert rendered(text) == [f"r.yaml:{n}:5: error: engine.args.multinode: unknown field 'multinode' here: it belongs "
                              f"under 'engine' (hint: check the indentation)"]


def test_a_field_written_at_the_top_level_says_which_section_it_belongs_to():
    text = spark("engine:\n", "tensor_parallel: 2\nengine:\n")
    n = line_of(text, "tensor_parallel: 2\nengine:")
    assert rendered(text) == [f"r.yaml:{n}:1: error: tensor_parallel: unknown field 'tensor_parallel' here: it belongs "
                              f"under 'engine.args' (hint: check the indentation)"]


def test_a_typo_still_gets_did_you_mean():
    text = spark("    port: 8000\n", "    prot: 8000\n")
    n = line_of(text, "    prot: 8000")
    assert rendered(text) == [f"r.yaml:{n}:5: error: engine.args.prot: unknown field 'prot' (hint: did you mean 'port'?)"]


def test_a_tab_is_named_as_indentation():
    text = spark("    port: 8000\n", "\tport: 8000\n")
    n = line_of(text, "\tport: 8000")
    assert rendered(text) == [f"r.yaml:{n}:1: error: tab character used for indentation; YAML indents with spaces "
                              "(hint: replace the tab with spaces)"]


def test_an_inventory_given_as_the_recipe_is_named(tmp_path):
    with pytest.raises(RecipeInvalid) as info:
        load_recipe(HOSTS)
    assert [p.render() for p in info.value.problems] == [
        f"{HOSTS}:1:1: error: this looks like an inventory (its only field is 'hosts'), not a recipe "
        f"(hint: pass the recipe as the argument and this file with --hosts {HOSTS})"]
    assert info.value.problems[0].code == "INK013"


def test_a_recipe_given_as_the_inventory_is_named():
    with pytest.raises(RecipeInvalid) as info:
        load_inventory(SPARK)
    assert [p.render() for p in info.value.problems] == [
        f"{SPARK}:1:1: error: this looks like a recipe, not an inventory (an inventory has only 'hosts:') "
        "(hint: pass the recipe as the argument and the inventory with --hosts FILE)"]


def test_an_inventory_with_a_mistake_keeps_its_own_message(tmp_path):
    inv = tmp_path / "hosts.yaml"
    inv.write_text("hosts:\n  - name: a\n    adress: 127.0.0.1\n")
    with pytest.raises(RecipeInvalid) as info:
        load_inventory(inv)
    assert [p.render() for p in info.value.problems][0].startswith(f"{inv}:3:5: error: hosts[0].adress: unknown field 'adress'")


def test_counts_agree_with_their_nouns():
    from inkctl.errors import InkctlError
    from inkctl.plan.deploy import build_plan

    loaded = load_recipe(SPARK)
    one = load_inventory(ROOT / "examples/hosts-one.yaml")
    with pytest.raises(InkctlError) as info:
        build_plan(loaded.recipe, one)
    assert info.value.message == "the recipe needs 2 hosts (hardware.nodes) but 1 was given"
    text = spark("  nodes: 2", "  nodes: 2") + "hosts:\n  - {name: a, address: 127.0.0.1}\n"
    assert any("hosts: 1 host listed but hardware.nodes is 2" in r for r in rendered(text))


def test_recipe_values_are_not_coerced_silently():
    port = spark("    port: 8000\n", "    port: '8000'\n")
    n = line_of(port, "    port: '8000'")
    assert rendered(port) == [f"r.yaml:{n}:11: error: engine.args.port: expected an integer, got '8000'"]
    eager = spark("    port: 8000\n", "    port: 8000\n    enforce_eager: yes\n")
    n = line_of(eager, "    enforce_eager: yes")
    assert rendered(eager) == [f"r.yaml:{n}:20: error: engine.args.enforce_eager: expected true or false, got 'yes'"]


def test_a_date_is_still_read_from_its_text():
    text = ROOT / "recipes/inkling-small-2x-rtxpro6000-sglang.yaml"
    assert str(load_recipe(text).recipe.provenance.captured) == "2026-08-27"


# ---------------------------------------------------------------- --set typing


def test_set_env_accepts_numbers_and_booleans_as_their_text():
    loaded = load_recipe(SPARK, ["container.env.X=1", "container.env.Y=true", "container.env.Z=1.5"])
    env = loaded.recipe.container.env
    assert (env["X"], env["Y"], env["Z"]) == ("1", "true", "1.5")


def test_env_numbers_in_the_file_are_their_text():
    text = spark("container:\n", "container:\n  env: {OMP_NUM_THREADS: 8, DEBUG: false}\n")
    r, _ = load_model(Recipe, "r.yaml", text=text)
    assert r.container.env == {"OMP_NUM_THREADS": "8", "DEBUG": "false"}


def test_set_brackets_stay_text_where_the_field_is_a_string():
    loaded = load_recipe(SPARK, ["container.env.FLAGS=[a, b]", "container.env.JSON={\"k\": 1}",
                                 "model.revision=[fp8]"])
    assert loaded.recipe.container.env["FLAGS"] == "[a, b]"
    assert loaded.recipe.container.env["JSON"] == '{"k": 1}'
    assert loaded.recipe.model.revision == "[fp8]"


def test_set_reads_yaml_where_the_field_is_not_a_string():
    loaded = load_recipe(SPARK, ["engine.args.extra=[--disable-log-stats, '--seed=1']", "engine.args.port=8001",
                                 "engine.args.enforce_eager=true"])
    a = loaded.recipe.engine.args
    assert (a.extra, a.port, a.enforce_eager) == (["--disable-log-stats", "--seed=1"], 8001, True)


def test_set_a_string_where_a_number_belongs_is_located_at_the_flag():
    assert rendered(SPARK.read_text(), ["engine.args.port=eighty"]) == [
        "--set: error: engine.args.port: expected an integer, got 'eighty'"]


# ---------------------------------------------------------------- codes


def test_codes_are_unique_and_documented():
    assert len({c.code for c in CODES}) == len(CODES)
    assert len({c.name for c in CODES}) == len(CODES)
    assert all(c.code.startswith("INK") and len(c.code) == 6 and c.fix and c.meaning for c in CODES)
    assert (ROOT / "docs/problem-codes.md").read_text() == markdown(), "run: python3 -m inkctl.codes > docs/problem-codes.md"


def test_every_problem_of_the_ten_mistakes_carries_a_documented_code():
    with pytest.raises(RecipeInvalid) as info:
        load_recipe(ROOT / "tests/data/ten-mistakes.yaml")
    assert info.value.problems and all(p.code in BY_CODE for p in info.value.problems)
    assert [p.code for p in info.value.problems if p.path == "engine.args.tensor_paralel"] == ["INK101"]


def test_validate_json_lists_what_strict_fails_on_with_codes_and_fixes():
    r = subprocess.run([sys.executable, "-m", "inkctl", "validate", "--strict", "-o", "json", str(SPARK)],
                       cwd=ROOT, capture_output=True, text=True)
    doc = json.loads(r.stdout)
    assert r.returncode == 2 and doc["ok"] is False
    result = doc["recipes"][0]
    assert result["errors"] and result["warnings"] == []
    digest = [e for e in result["errors"] if e["path"] == "engine.image.digest"]
    assert digest == [{**digest[0], "code": "INK208", "name": "unpinned", "severity": "warning", "fails": True,
                       "strict": True, "fix": digest[0]["hint"]}]
    assert digest[0]["fix"].startswith("set digest: sha256:<64 hex>")
    lax = json.loads(subprocess.run([sys.executable, "-m", "inkctl", "validate", "-o", "json", str(SPARK)],
                                    cwd=ROOT, capture_output=True, text=True).stdout)["recipes"][0]
    assert lax["errors"] == [] and lax["warnings"] and not any(w["fails"] for w in lax["warnings"])


def test_escape_keeps_markup_looking_text_literal():
    import io

    from inkctl.cli.show.terminal import Plain, escape

    out = io.StringIO()
    Plain(out).print(f"[bold]{escape('v1 [red] [/] [x]')}[/]")
    assert out.getvalue() == "v1 [red] [/] [x]\n"
    assert escape("plain text") == "plain text"


@pytest.mark.parametrize("text,overrides,want", [
    ("a: [\n", [], "INK003"),
    ("engine:\n\tkind: vllm\n", [], "INK004"),
    ("a: *nowhere\n", [], "INK005"),
    ("", [], "INK008"),
    ("name: a\nname: b\n", [], "INK009"),
    ("a: !!python/object/apply:os.system ['id']\n", [], "INK011"),
    ("name: demo\n", ["bad"], "INK050"),
    ("name: demo\n", [], "INK102"),
])
def test_reading_problems_carry_their_code(text, overrides, want):
    with pytest.raises(RecipeInvalid) as info:
        load_model(Recipe, "r.yaml", overrides, text=text)
    assert want in [p.code for p in info.value.problems]
    assert all(p.code in BY_CODE for p in info.value.problems)


def test_the_deploy_lease_has_its_own_command():
    def inkctl(*args):
        return subprocess.run([sys.executable, "-m", "inkctl", *args], cwd=ROOT, capture_output=True, text=True)

    r = inkctl("lease", "status", str(SPARK))  # the recipe lists no hosts: nothing to connect to
    assert r.returncode == 2
    assert r.stderr == ("error: lease status needs hosts: pass --hosts FILE or list hosts: in the recipe\n")
    assert inkctl("lock", "status", str(SPARK)).returncode == 2  # `lock` pins hashes of one recipe, nothing else
    assert "inkctl lease" in " ".join(inkctl("lock", "--help").stdout.split())


def test_a_hosts_gpu_selection_must_match_gpus_per_host(tmp_path):
    from inkctl.errors import InkctlError
    from inkctl.plan.deploy import build_plan

    one = load_inventory(ROOT / "examples/hosts-one.yaml")  # gpus: "0"
    eight = load_recipe(ROOT / "recipes/inkling-8x-h200-podman-vllm.yaml")
    with pytest.raises(InkctlError) as info:
        build_plan(eight.recipe, one)
    assert info.value.message == "host gpu-box: gpus '0' selects 1 GPU but hardware.gpus_per_host is 8"
    assert info.value.exit_code == 2 and "8 GPU indices" in info.value.hint
    # the CLI says it at validate time too, in one line, without a traceback
    r = subprocess.run([sys.executable, "-m", "inkctl", "validate", str(ROOT / "recipes/inkling-8x-h200-podman-vllm.yaml"),
                        "--hosts", str(ROOT / "examples/hosts-one.yaml")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "selects 1 GPU but hardware.gpus_per_host is 8" in r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    # hosts listed in the recipe itself: located at the field
    text = spark("  nodes: 2", "  nodes: 2") + ("hosts:\n  - {name: a, address: 10.231.7.11, gpus: '0,1'}\n"
                                              "  - {name: b, address: 10.231.7.12}\n")
    assert any("hosts[0].gpus" in r and "selects 2 GPUs but hardware.gpus_per_host is 1" in r for r in rendered(text))


@pytest.mark.parametrize("recipe,inventory", [
    ("recipes/inkling-small-2x-dgx-spark-vllm.yaml", "examples/hosts.yaml"),  # the README's pair
    ("examples/vllm-single-docker.yaml", "examples/hosts-one.yaml"),
])
def test_bundled_inventories_validate_with_their_recipes(recipe, inventory):
    r = subprocess.run([sys.executable, "-m", "inkctl", "validate", recipe, "--hosts", inventory],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
