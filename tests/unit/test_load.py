"""The YAML loader: every problem at once, each with file:line:col, a dotted path and plain words.

A toy model set stands in for the recipe, so these tests pin the loader's behaviour and not
the recipe schema: extra='forbid', a discriminated union, a plain union, nested lists and
dicts, an alias, model validators at two levels and a findings() method.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Literal, Optional, Union

import pytest
from pydantic import BaseModel, ConfigDict, Field, model_validator

from inkctl.errors import EXIT_INVALID, Problem, RecipeInvalid
from inkctl.recipe.reading.document import LIBYAML
from inkctl.recipe.reading.load import MAX_DEPTH, MAX_NODES, load_model, parse_document, parse_override



class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class VllmArgs(Strict):
    tensor_parallel: int = 1
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    extra: list[str] = []


class Vllm(Strict):
    kind: Literal["vllm"]
    image: str
    args: VllmArgs = VllmArgs()


class Sglang(Strict):
    kind: Literal["sglang"]
    image: str
    mem_fraction: float = 0.8


class Host(Strict):
    name: str
    address: str
    gpus: Union[int, Literal["all"], list[int]] = "all"

    @model_validator(mode="after")
    def _some_gpus(self):
        if self.gpus == []:
            raise ValueError("gpus cannot be an empty list")
        return self


class Recipe(Strict):
    name: str
    engine: Annotated[Union[Vllm, Sglang], Field(discriminator="kind")]
    hosts: list[Host] = []
    env: dict[str, str] = {}
    labels: dict[str, dict[str, str]] = {}
    mode: Literal["fast", "safe"] = "safe"
    served_name: Optional[str] = Field(None, alias="served-name")

    @model_validator(mode="after")
    def _unique_hosts(self):
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError("host names must be unique")
        return self

    def findings(self) -> list[Problem]:
        out = []
        if self.engine.image.endswith(":latest"):
            out.append(Problem("the 'latest' tag is not reproducible", path="engine.image", severity="warning",
                               hint="pin a version"))
        for i, h in enumerate(self.hosts):
            if h.address.startswith("127."):
                out.append(Problem("a loopback address cannot be reached from other hosts", path=f"hosts[{i}].address"))
        return out


GOOD = """\
name: demo
engine:
  kind: vllm
  image: vllm/vllm-openai:v1
  args:
    tensor_parallel: 2
    extra: [--enforce-eager]
hosts:
  - name: a
    address: 10.0.0.1
  - name: b
    address: 10.0.0.2
    gpus: [0, 1]
env:
  HF_HOME: /cache
mode: fast
"""


def problems(text: str, overrides: list[str] = (), model: type = Recipe) -> list[str]:
    """Load and return every problem rendered (the loader must fail)."""
    with pytest.raises(RecipeInvalid) as info:
        load_model(model, "r.yaml", overrides, text=text)
    assert info.value.exit_code == EXIT_INVALID == 2
    return [p.render() for p in info.value.problems]


def edit(old: str, new: str, text: str = GOOD) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


# ---------------------------------------------------------------- success, findings


def test_valid_document_loads():
    recipe, warnings = load_model(Recipe, "r.yaml", text=GOOD)
    assert warnings == []
    assert recipe.engine.args.tensor_parallel == 2 and recipe.hosts[1].gpus == [0, 1] and recipe.mode == "fast"


def test_reads_the_file(tmp_path: Path):
    path = tmp_path / "r.yaml"
    path.write_text(GOOD)
    recipe, _ = load_model(Recipe, path)
    assert recipe.name == "demo"
    recipe, _ = load_model(Recipe, str(path))
    assert recipe.name == "demo"


def test_findings_warnings_are_returned_located():
    recipe, warnings = load_model(Recipe, "r.yaml", text=edit("openai:v1", "openai:latest"))
    assert [w.render() for w in warnings] == [
        "r.yaml:4:10: warning: engine.image: the 'latest' tag is not reproducible (hint: pin a version)"]
    assert recipe.engine.image.endswith(":latest")


def test_findings_errors_raise_with_the_warnings():
    text = edit("openai:v1", "openai:latest", edit("address: 10.0.0.2", "address: 127.0.0.1"))
    assert problems(text) == [
        "r.yaml:12:14: error: hosts[1].address: a loopback address cannot be reached from other hosts",
        "r.yaml:4:10: warning: engine.image: the 'latest' tag is not reproducible (hint: pin a version)",
    ]


def test_findings_error_alone_still_raises():
    assert problems(edit("address: 10.0.0.1", "address: 127.0.0.1")) == [
        "r.yaml:10:14: error: hosts[0].address: a loopback address cannot be reached from other hosts"]


# ---------------------------------------------------------------- validation errors


def test_unknown_field_did_you_mean():
    assert problems(edit("tensor_parallel: 2", "tensor_paralel: 2")) == [
        "r.yaml:6:5: error: engine.args.tensor_paralel: unknown field 'tensor_paralel' "
        "(hint: did you mean 'tensor_parallel'?)"]


def test_unknown_field_suggests_aliases_too():
    assert problems(GOOD + "served-nme: x\n") == [
        "r.yaml:17:1: error: served-nme: unknown field 'served-nme' (hint: did you mean 'served-name'?)"]


def test_unknown_field_without_a_close_match_lists_the_fields():
    assert problems(GOOD + "colour: red\n") == [
        "r.yaml:17:1: error: colour: unknown field 'colour' "
        "(hint: valid fields here: name, engine, hosts, env, labels, mode, served_name, served-name)"]


def test_wrong_type_points_at_the_value():
    assert problems(edit("tensor_parallel: 2", "tensor_parallel: two")) == [
        "r.yaml:6:22: error: engine.args.tensor_parallel: expected an integer, got 'two'"]


def test_string_expected_hints_quotes_with_the_source_text():
    assert problems(edit("name: demo", "name: 1.10")) == [
        'r.yaml:1:7: error: name: expected a string, got 1.1 (hint: put it in quotes: "1.10")']


def test_missing_field_points_at_the_mapping():
    assert problems(edit("  image: vllm/vllm-openai:v1\n", "")) == [
        "r.yaml:2:1: error: engine.image: missing required field 'image'"]
    assert problems(edit("name: demo\n", "")) == ["r.yaml:1:1: error: name: missing required field 'name'"]
    assert problems(edit("    address: 10.0.0.1\n", "")) == [
        "r.yaml:9:5: error: hosts[0].address: missing required field 'address'"]


def test_discriminated_union_paths_drop_the_tag():
    assert problems(edit("tensor_parallel: 2", "tensor_parallel: [2]")) == [
        "r.yaml:6:22: error: engine.args.tensor_parallel: expected an integer, got a list"]
    sglang = edit("kind: vllm", "kind: sglang", edit("    tensor_parallel: 2\n    extra: [--enforce-eager]\n", ""))
    assert problems(sglang) == [
        "r.yaml:5:3: error: engine.args: unknown field 'args' (hint: valid fields here: kind, image, mem_fraction)"]


def test_discriminator_value_wrong_or_missing():
    assert problems(edit("kind: vllm", "kind: vlm")) == [
        "r.yaml:3:9: error: engine.kind: expected one of 'vllm', 'sglang', got 'vlm' (hint: did you mean 'vllm'?)"]
    assert problems(edit("  kind: vllm\n", "")) == [
        "r.yaml:2:1: error: engine.kind: missing required field 'kind' "
        "(hint: 'kind' selects the variant: one of 'vllm', 'sglang')"]
    assert problems(edit("name: demo", "name: demo\nengine: 5", edit("engine:", "old:"))) == [
        "r.yaml:2:9: error: engine: expected a mapping, got 5",
        "r.yaml:3:1: error: old: unknown field 'old' "
        "(hint: valid fields here: name, engine, hosts, env, labels, mode, served_name, served-name)",
    ]


def test_plain_union_reports_the_member_that_fits():
    assert problems(edit("gpus: [0, 1]", "gpus: [0, x]")) == [
        "r.yaml:13:15: error: hosts[1].gpus[1]: expected an integer, got 'x'"]
    assert problems(edit("gpus: [0, 1]", "gpus: two")) == [
        "r.yaml:13:11: error: hosts[1].gpus: expected an integer, 'all' or a list, got 'two'"]


def test_literal_and_bounds():
    assert problems(edit("mode: fast", "mode: fsat")) == [
        "r.yaml:16:7: error: mode: expected one of 'fast', 'safe', got 'fsat' (hint: did you mean 'fast'?)"]
    assert problems(edit("extra: [--enforce-eager]", "gpu_memory_utilization: 1.5")) == [
        "r.yaml:7:29: error: engine.args.gpu_memory_utilization: must be at most 1.0, got 1.5"]


def test_model_validator_errors_at_root_and_nested():
    assert problems(edit("name: b", "name: a")) == ["r.yaml:1:1: error: host names must be unique"]
    assert problems(edit("gpus: [0, 1]", "gpus: []")) == ["r.yaml:11:5: error: hosts[1]: gpus cannot be an empty list"]


def test_dict_values_and_nested_dicts():
    assert problems(edit("HF_HOME: /cache", "HF_HOME: [a]")) == [
        "r.yaml:15:12: error: env.HF_HOME: expected a string, got a list"]
    assert problems(GOOD + "labels: {gpu: {vendor: 3}}\n") == [
        'r.yaml:17:24: error: labels.gpu.vendor: expected a string, got 3 (hint: put it in quotes: "3")']


def test_ten_mistakes_all_reported_each_with_its_line():
    text = """\
name: 7
engine:
  kind: vllm
  image: repo/x:1
  args:
    tensor_paralel: 2
    gpu_memory_utilization: 1.5
    extra: --foo
hosts:
  - name: a
  - name: b
    address: 10.0.0.2
    gpus: two
    address: 10.0.0.3
env:
  HF_HOME: [a]
  TOKEN: !vault secret/x
mode: fsat
"""
    got = problems(text)
    assert got == [
        'r.yaml:1:7: error: name: expected a string, got 7 (hint: put it in quotes: "7")',
        "r.yaml:6:5: error: engine.args.tensor_paralel: unknown field 'tensor_paralel' "
        "(hint: did you mean 'tensor_parallel'?)",
        "r.yaml:7:29: error: engine.args.gpu_memory_utilization: must be at most 1.0, got 1.5",
        "r.yaml:8:12: error: engine.args.extra: expected a list, got '--foo'",
        "r.yaml:10:5: error: hosts[0].address: missing required field 'address'",
        "r.yaml:13:11: error: hosts[1].gpus: expected an integer, 'all' or a list, got 'two'",
        "r.yaml:14:5: error: hosts[1].address: duplicate key 'address' (first defined at line 12) "
        "(hint: YAML keeps only the last one; remove the other)",
        "r.yaml:16:12: error: env.HF_HOME: expected a string, got a list",
        "r.yaml:17:10: error: env.TOKEN: unsupported tag '!vault' (hint: only plain YAML values are allowed: "
        "strings, numbers, true/false, null, lists and mappings)",
        "r.yaml:18:7: error: mode: expected one of 'fast', 'safe', got 'fsat' (hint: did you mean 'fast'?)",
    ]
    with pytest.raises(RecipeInvalid) as info:
        load_model(Recipe, "r.yaml", text=text)
    assert str(info.value).startswith("10 problems found:\n  r.yaml:1:7: error: name:")


# ---------------------------------------------------------------- the YAML itself


def test_malformed_yaml_uses_the_parser_mark():
    problem = "did not find expected ',' or ']'" if LIBYAML else "expected ',' or ']', but got '<stream end>'"
    assert problems("name: demo\nengine: [a, b\n") == [
        f"r.yaml:3:1: error: invalid YAML: {problem} (hint: while parsing a flow sequence that starts at line 2)"]
    assert problems("name: demo\nengine:\n\tkind: vllm\n") == [
        "r.yaml:3:1: error: tab character used for indentation; YAML indents with spaces "
        "(hint: replace the tab with spaces)"]
    assert problems("name: @demo\n") == [
        "r.yaml:1:7: error: invalid YAML: found character '@' that cannot start any token "
        "(hint: put the value in quotes ('@' is reserved))"]


def test_duplicate_keys_at_every_level():
    text = GOOD + "name: again\n"
    assert problems(text) == [
        "r.yaml:17:1: error: name: duplicate key 'name' (first defined at line 1) "
        "(hint: YAML keeps only the last one; remove the other)"]
    assert problems(edit("    extra:", "    tensor_parallel: 3\n    extra:")) == [
        "r.yaml:7:5: error: engine.args.tensor_parallel: duplicate key 'tensor_parallel' (first defined at line 6) "
        "(hint: YAML keeps only the last one; remove the other)"]
    assert problems("name: a\nengine: {kind: vllm, image: x, image: y}\n") == [
        "r.yaml:2:32: error: engine.image: duplicate key 'image' (first defined at line 2) "
        "(hint: YAML keeps only the last one; remove the other)"]


@pytest.mark.parametrize("text", ["", "\n\n", "# just a comment\n", "---\n", "~\n"])
def test_empty_document(text: str):
    assert problems(text) == [
        "r.yaml:1:1: error: the document is empty (hint: a recipe is a YAML mapping of fields, e.g. 'engine: ...')"]


@pytest.mark.parametrize("text,got", [("- a\n- b\n", "a list"), ("hello\n", "'hello'"), ("42\n", "42")])
def test_document_not_a_mapping(text: str, got: str):
    assert problems(text) == [f"r.yaml:1:1: error: the document must be a mapping of fields, got {got}"]


def test_several_documents():
    assert problems(GOOD + "---\nname: other\n") == [
        "r.yaml:17:1: error: the file holds more than one YAML document "
        "(hint: remove the second '---' and everything after it, or split the file)"]


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system", "!!python/name:os.system", "!env", "!!binary"])
def test_unsafe_and_unknown_tags_are_refused(tag: str):
    text = edit("name: demo", f'name: {tag} "echo pwned"')
    assert problems(text) == [  # and no second "missing required field 'name'" for the refused value
        f"r.yaml:1:7: error: name: unsupported tag '{tag}' (hint: only plain YAML values are allowed: "
        "strings, numbers, true/false, null, lists and mappings)"]


def test_core_tags_are_allowed_and_checked():
    doc = parse_document("a: !!str 4\nb: !!int '7'\nc: !!float 1\nd: !!null ''\ne: !!bool true\n")
    assert doc.data == {"a": "4", "b": 7, "c": 1.0, "d": None, "e": True}
    with pytest.raises(RecipeInvalid) as info:
        parse_document("a: !!int abc\n", filename="t.yaml")
    assert [p.render() for p in info.value.problems] == ["t.yaml:1:4: error: a: 'abc' is not a valid !!int"]


def test_alias_bomb_is_stopped_early():
    lol = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi"):
        lol.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    start = time.perf_counter()
    got = problems("\n".join(lol) + "\n")
    assert time.perf_counter() - start < 1.0
    assert got == [f"r.yaml:6:8: error: the document expands to more than {MAX_NODES} values through aliases "
                   "(hint: this looks like an alias bomb; remove the nested '*' references)"]


def test_recursive_and_undefined_aliases():
    assert problems("name: &a [x, *a]\n") == [
        "r.yaml:1:14: error: alias '*a' refers to a node that contains it (recursive alias)"]
    assert problems("name: &a\n  x: *a\n") == [
        "r.yaml:2:6: error: alias '*a' refers to a node that contains it (recursive alias)"]
    assert problems("name: *nope\n") == [
        "r.yaml:1:7: error: alias '*nope' is not defined (hint: define '&nope' before using it)"]


def test_aliases_and_merge_keys_work_and_keep_positions():
    text = "base: &b {kind: vllm, image: x}\nengine:\n  <<: *b\n  image: y\nlist: [*b]\n"
    doc = parse_document(text, filename="t.yaml")
    assert doc.data["engine"] == {"kind": "vllm", "image": "y"}
    assert doc.data["list"] == [{"kind": "vllm", "image": "x"}]
    assert doc.position("engine.image") == (4, 10)
    assert doc.position("engine.kind") == (1, 17)  # merged in: points where it is written
    assert doc.position("list[0].image") == (1, 30)


@pytest.mark.parametrize("text,line,col", [
    ("name: " + "[" * 500 + "]" * 500 + "\n", 1, 7 + MAX_DEPTH - 1),
    ("".join("  " * i + "a:\n" for i in range(3 * MAX_DEPTH)), MAX_DEPTH + 1, 2 * MAX_DEPTH + 1),
], ids=["flow", "block"])
def test_deep_nesting_is_refused_fast(text: str, line: int, col: int):
    start = time.perf_counter()
    assert problems(text) == [f"r.yaml:{line}:{col}: error: nesting deeper than {MAX_DEPTH} levels"]
    assert time.perf_counter() - start < 1.0


def test_very_deep_nesting_does_not_crash():
    """The C composer would recurse 100k levels (a segfault); libyaml >= 0.2.6 stops at 1000 itself."""
    start = time.perf_counter()
    got = problems("name: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert time.perf_counter() - start < 1.0
    assert len(got) == 1 and got[0] in (
        f"r.yaml:1:{7 + MAX_DEPTH - 1}: error: nesting deeper than {MAX_DEPTH} levels",
        "r.yaml:1:1006: error: invalid YAML: exceeded maximum nesting depth "
        "(hint: while increasing flow level that starts at line 1)",
    )


def test_deep_nesting_through_aliases_is_refused():
    deep = "[" * 60 + "]" * 60
    text = f"a: &a {deep}\nb: {'[' * 50}*a{']' * 50}\n"
    assert problems(text) == [
        f"r.yaml:2:54: error: nesting deeper than {MAX_DEPTH} levels after expanding alias '*a'"]


def test_non_utf8_and_control_characters(tmp_path: Path):
    path = tmp_path / "r.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(RecipeInvalid) as info:
        load_model(Recipe, path)
    assert [p.render() for p in info.value.problems] == [
        f"{path}:1:10: error: not valid UTF-8: byte 0xe9 cannot be decoded (hint: save the file as UTF-8)"]
    assert problems("name: demo\nmode: a\x00b\n") == [
        "r.yaml:2:8: error: character U+0000 is not allowed in YAML "
        "(hint: remove it, or write it as an escape in a double-quoted string)"]
    assert problems("name: demo\r\nmode: \ud800\n") == [  # a lone surrogate cannot even be encoded
        "r.yaml:2:7: error: character U+D800 is not allowed in YAML "
        "(hint: remove it, or write it as an escape in a double-quoted string)"]
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())  # a UTF-8 byte order mark is fine
    assert load_model(Recipe, path)[0].name == "demo"


def test_missing_file_and_directory(tmp_path: Path):
    for path, message in [(tmp_path / "nope.yaml", "file not found (hint: check the path)"),
                          (tmp_path, "is a directory, not a file")]:
        with pytest.raises(RecipeInvalid) as info:
            load_model(Recipe, path)
        assert info.value.exit_code == 2
        assert [p.render() for p in info.value.problems] == [f"{path}: error: {message}"]


def test_non_string_keys():
    assert problems(GOOD + "1: a\ntrue: b\n~: c\n? [x]\n: d\n") == [
        'r.yaml:17:1: error: mapping keys must be strings, got 1 (hint: put it in quotes: "1")',
        'r.yaml:18:1: error: mapping keys must be strings, got true (hint: put it in quotes: "true")',
        'r.yaml:19:1: error: mapping keys must be strings, got null (hint: put it in quotes: "~")',
        "r.yaml:20:3: error: mapping keys must be strings, got a list",
    ]


def test_yaml_12_core_scalars():
    doc = parse_document("a: NO\nb: on\nc: 1:30\nd: 0x1F\ne: 1e3\nf: 2024-01-01\ng: ~\nh: .inf\ni: '12'\nj: 012\n")
    assert doc.data == {"a": "NO", "b": "on", "c": "1:30", "d": 31, "e": 1000.0, "f": "2024-01-01", "g": None,
                        "h": float("inf"), "i": "12", "j": 12}


def test_document_positions():
    doc = parse_document(GOOD, filename="r.yaml")
    assert doc.file == "r.yaml"
    for path in ["hosts[1].name", "hosts.1.name", ("hosts", 1, "name")]:
        assert doc.position(path) == (11, 11)
    assert doc.located("hosts[1].name").key == (11, 5)
    assert doc.located("hosts[1]").key is None
    assert doc.position("engine.args.extra[0]") == (7, 13)
    assert doc.position(()) == (1, 1)
    assert doc.position("nope") is None and doc.position("a..b") is None
    assert parse_document(GOOD.encode()).position("mode") == (16, 7)  # bytes are text too


def test_parse_document_reads_a_path_and_raises_on_any_problem(tmp_path: Path):
    path = tmp_path / "r.yaml"
    path.write_text("a: 1\nb: 2\na: 3\n")
    with pytest.raises(RecipeInvalid) as info:
        parse_document(path)
    assert [p.render() for p in info.value.problems] == [
        f"{path}:3:1: error: a: duplicate key 'a' (first defined at line 1) "
        "(hint: YAML keeps only the last one; remove the other)"]


# ---------------------------------------------------------------- overrides


def test_overrides_are_parsed_as_yaml_values():
    recipe, _ = load_model(Recipe, "r.yaml", [
        "engine.args.tensor_parallel=4",
        "engine.args.extra=[--foo, bar]",
        "engine.image=a;b $(c)",
        "served-name=",
        "hosts[0].address=10.9.9.9",
        "hosts.1.gpus=3",
        "labels.gpu.vendor=nvidia",  # creates labels and labels.gpu
    ], text=GOOD)
    assert recipe.engine.args.tensor_parallel == 4
    assert recipe.engine.args.extra == ["--foo", "bar"]
    assert recipe.engine.image == "a;b $(c)"
    assert recipe.served_name == ""
    assert recipe.hosts[0].address == "10.9.9.9" and recipe.hosts[1].gpus == 3
    assert recipe.labels == {"gpu": {"vendor": "nvidia"}}


@pytest.mark.parametrize("text,path,value", [
    ("a.b=4", ("a", "b"), 4),
    ("a=", ("a",), ""),
    ("a=  ", ("a",), ""),
    ("a='4'", ("a",), "4"),
    ("a=true", ("a",), True),
    ("a=~", ("a",), None),
    ("a=1.5", ("a",), 1.5),
    ("a=[--foo, bar]", ("a",), ["--foo", "bar"]),
    ("a={x: 1}", ("a",), {"x": 1}),
    ("a=a;b $(c)", ("a",), "a;b $(c)"),
    ("a=x: y", ("a",), "x: y"),
    ("a=- x", ("a",), "- x"),
    ("a=v #not a comment", ("a",), "v #not a comment"),
    ("a=@x", ("a",), "@x"),
    ("a=*x", ("a",), "*x"),
    ("a=&x y", ("a",), "&x y"),
    ("a=!!python/object:os.system", ("a",), "!!python/object:os.system"),
    ("a=x=y", ("a",), "x=y"),
    ("hosts[0].address=h", ("hosts", 0, "address"), "h"),
    ("hosts.0.address=h", ("hosts", "0", "address"), "h"),
    ("m[1][2]=h", ("m", 1, 2), "h"),
])
def test_parse_override(text: str, path: tuple, value):
    assert parse_override(text) == (path, value)


@pytest.mark.parametrize("text,message", [
    ("engine.image", "invalid override 'engine.image': expected PATH=VALUE"
                     " (hint: e.g. --set engine.args.tensor_parallel=4)"),
    ("=4", "invalid override '=4': the path before '=' is empty (hint: e.g. --set engine.args.tensor_parallel=4)"),
    ("a..b=1", "invalid override 'a..b=1': invalid path 'a..b': empty part"),
    ("hosts[x]=1", "invalid override 'hosts[x]=1': invalid path 'hosts[x]' at 'hosts[x]'"),
    ("a=[1, 2", "invalid value in 'a=[1, 2': invalid YAML: "
                + ("did not find expected ',' or ']'" if LIBYAML else "expected ',' or ']', but got '<stream end>'")),
])
def test_malformed_override(text: str, message: str):
    with pytest.raises(RecipeInvalid) as info:
        parse_override(text)
    got = info.value.problems[0]
    assert (got.file, got.line) == ("--set", None)
    assert got.render() == f"--set: error: {message}"


def test_override_problems_are_located_at_the_flag():
    assert problems(GOOD, ["engine.args.tensor_parallel=four", "mode=slow"]) == [
        "--set: error: engine.args.tensor_parallel: expected an integer, got 'four'",
        "--set: error: mode: expected one of 'fast', 'safe', got 'slow'",
    ]
    assert problems(GOOD, ["engine={kind: sglang}"]) == ["--set: error: engine.image: missing required field 'image'"]
    assert problems(GOOD, ["colour.x=1"]) == [
        "--set: error: colour: unknown field 'colour' "
        "(hint: valid fields here: name, engine, hosts, env, labels, mode, served_name, served-name)"]


def test_override_that_cannot_be_applied():
    assert problems(GOOD, ["name.first=x", "hosts[5].name=x", "hosts.x=1", "mode[0]=x", "engine[0]=x", "bad",
                           "new.sub[0]=x"]) == [  # a failed override leaves no half-made 'new' behind
        "--set: error: name.first: cannot apply 'name.first=x': 'name' is 'demo', not a mapping or list",
        "--set: error: hosts[5].name: cannot apply 'hosts[5].name=x': index 5 is out of range ('hosts' has 2 items)",
        "--set: error: hosts.x: cannot apply 'hosts.x=1': 'hosts' is a list, so 'x' must be an index",
        "--set: error: mode[0]: cannot apply 'mode[0]=x': 'mode' is 'fast', not a mapping or list",
        "--set: error: engine[0]: cannot apply 'engine[0]=x': 'engine' is not a list, so it has no item [0]",
        "--set: error: invalid override 'bad': expected PATH=VALUE (hint: e.g. --set engine.args.tensor_parallel=4)",
        "--set: error: new.sub[0]: cannot apply 'new.sub[0]=x': 'new.sub' is not a list, so it has no item [0]",
    ]


def test_override_fixes_a_file_error_and_file_errors_stay_located():
    broken = edit("tensor_parallel: 2", "tensor_parallel: two")
    recipe, _ = load_model(Recipe, "r.yaml", ["engine.args.tensor_parallel=2"], text=broken)
    assert recipe.engine.args.tensor_parallel == 2
    assert problems(edit("mode: fast", "mode: fsat", broken), ["engine.args.tensor_parallel=2"]) == [
        "r.yaml:16:7: error: mode: expected one of 'fast', 'safe', got 'fsat' (hint: did you mean 'fast'?)"]


def test_override_appends_to_a_list():
    recipe, _ = load_model(Recipe, "r.yaml", ["hosts[2].name=c", "hosts[2].address=10.0.0.3"], text=GOOD)
    assert [h.name for h in recipe.hosts] == ["a", "b", "c"]


# ---------------------------------------------------------------- speed


def test_a_300_line_recipe_loads_whole():
    """Size is no problem (its speed is measured in benchmarks/load.py, not timed here)."""
    lines = ["name: big", "engine:", "  kind: vllm", "  image: repo/x:1", "  args:", "    extra:"]
    lines += [f"      - --flag-{i}=value-{i}" for i in range(100)]
    lines += ["hosts:"]
    for i in range(40):
        lines += [f"  - name: host{i}", f"    address: 10.0.0.{i}", "    gpus: [0, 1, 2, 3]"]
    lines += ["env:"] + [f"  VAR_{i}: 'value {i}'" for i in range(70)]
    text = "\n".join(lines) + "\n"
    assert len(lines) >= 290
    r, warnings = load_model(Recipe, "r.yaml", text=text)
    assert len(r.engine.args.extra) == 100 and r.engine.args.extra[99] == "--flag-99=value-99"
    assert len(r.hosts) == 40 and r.hosts[39].gpus == [0, 1, 2, 3] and len(r.env) == 70
