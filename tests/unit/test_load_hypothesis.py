"""Fuzzing the loader: whatever the input, ``load_model`` returns or raises RecipeInvalid whose
problems are all located (a file, and a line unless an override caused it). Any other
exception, a hang or an unlocated problem is a bug.

Inputs: random text, random bytes (through a real file), and a valid document mutated the
way people break YAML (deleted, duplicated, retyped or renamed keys, tags, anchors, bad
indentation, garbage lines), with random ``--set`` overrides on top.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Optional, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, model_validator

from inkctl.errors import Problem, RecipeInvalid
from inkctl.recipe.reading.load import load_model

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Vllm(Strict):
    kind: Literal["vllm"]
    image: str
    args: dict[str, Union[int, str, list[str]]] = {}


class Sglang(Strict):
    kind: Literal["sglang"]
    image: str


class Host(Strict):
    name: str
    address: str = Field(min_length=1)
    gpus: Union[int, Literal["all"], list[int]] = "all"


class Recipe(Strict):
    name: str
    engine: Annotated[Union[Vllm, Sglang], Field(discriminator="kind")]
    hosts: list[Host] = []
    env: dict[str, str] = {}
    ratio: float = Field(0.5, gt=0, le=1)
    served_name: Optional[str] = Field(None, alias="served-name")

    @model_validator(mode="after")
    def _check(self):
        if len({h.name for h in self.hosts}) != len(self.hosts):
            raise ValueError("host names must be unique")
        return self

    def findings(self) -> list[Problem]:
        out = [Problem("no hosts", path="hosts", severity="warning")] if not self.hosts else []
        out += [Problem("loopback", path=f"hosts[{i}].address") for i, h in enumerate(self.hosts)
                if h.address.startswith("127.")]
        if self.env.get("X") == "warn":
            out.append(Problem("deep warning", path="env.X.not.there", severity="warning"))
        return out


VALID = """\
name: demo
engine:
  kind: vllm
  image: repo/img:1
  args:
    tensor_parallel: 2
    extra: [--a, "--b=1"]
hosts:
  - &d
    name: a
    address: 10.0.0.1
    gpus: all
  - {name: b, address: 10.0.0.2, gpus: [0, 1]}
  - <<: *d
    name: c
    address: 127.0.0.1
env:
  HF_HOME: /cache
  TOKEN: 'x y'
ratio: 0.3
served-name: demo
"""

VALUES = ["two", "[1, 2]", "{a: 1}", "~", "''", "1.5", "-3", "true", "0x1F", "!!python/object:os.system x",
          "!!python/object/apply:os.system [ls]", "!env X", "!!int q", "*nope", "&a", "*d", "'unterminated",
          "[a, b", "{a: ", "@x", "`x", "|\n  block", "- a", "a: b", "? x", "%x", "!", "&a [*a]", "\t", ".inf",
          "127.0.0.1", "warn", "vlm", "sglang", "-", "---", "...", "#", "\"\\x\"", "\ufeff", "\x85"]
PATHS = ["name", "engine.image", "engine.kind", "engine.args.tensor_parallel", "hosts[0].address", "hosts.1.gpus",
         "hosts[9].name", "env.X", "env", "ratio", "served-name", "new.deep.key", "name.sub", "hosts.x", "engine[0]"]


def line_limit(text: str) -> int:
    return sum(text.count(c) for c in "\n\r\x85\u2028\u2029") + 1


def check(call, max_line: int) -> None:
    try:
        _, found = call()
    except RecipeInvalid as e:
        assert e.exit_code == 2
        found = e.problems
        assert any(p.severity == "error" for p in found)
    else:
        assert all(p.severity == "warning" for p in found)
    for p in found:
        assert p.message and p.file, p
        if p.file == "--set":
            assert p.line is None, p
        else:
            assert p.line is not None and 1 <= p.line <= max_line, (p, max_line)
            assert p.col is not None and p.col >= 1, p


@st.composite
def mutated(draw) -> str:
    lines = VALID.splitlines()
    for _ in range(draw(st.integers(1, 5))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        op = draw(st.sampled_from(["delete", "duplicate", "retype", "tag", "garbage", "rename", "indent", "anchor"]))
        key, sep, _ = line.partition(": ")
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, line)
        elif op == "retype" and sep:
            lines[i] = key + sep + draw(st.sampled_from(VALUES) | st.text(max_size=12))
        elif op == "tag" and sep:
            tag = draw(st.sampled_from(["!!str ", "!!map ", "!x ", "!!seq ", "!!float "]))
            lines[i] = line.replace(": ", ": " + tag, 1)
        elif op == "garbage":
            lines.insert(i, draw(st.text(max_size=20)))
        elif op == "rename" and line.strip():
            j = draw(st.integers(0, len(line) - 1))
            lines[i] = line[:j] + draw(st.sampled_from("xX_-:#&*!'\"{}[]? 0")) + line[j + 1:]
        elif op == "indent":
            lines[i] = draw(st.sampled_from(["", " ", "   ", "\t", "      "])) + line.lstrip()
        elif op == "anchor" and sep:
            lines[i] = key + sep + draw(st.sampled_from(["*d", "&z 1", "*z", "<<: *d"]))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n---\n", "\n...\n"]))


overrides = st.lists(
    st.builds(lambda p, v: f"{p}={v}", st.sampled_from(PATHS), st.sampled_from(VALUES) | st.text(max_size=8))
    | st.text(max_size=12),
    max_size=3,
)


def test_the_valid_document_is_valid():
    recipe, warnings = load_model(Recipe, "r.yaml", text=VALID.replace("127.0.0.1", "10.0.0.3"))
    assert warnings == [] and recipe.hosts[2].gpus == "all"


@FUZZ
@given(st.text(max_size=300))
def test_random_text(text: str):
    check(lambda: load_model(Recipe, "fuzz.yaml", text=text), line_limit(text))


@FUZZ
@given(st.text(alphabet=st.sampled_from(list(":-[]{},&*!|>'\"#?%@ \n\t\r~.0123456789abxyz<")), max_size=200))
def test_random_yaml_punctuation(text: str):
    check(lambda: load_model(Recipe, "fuzz.yaml", text=text), line_limit(text))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "fuzz.yaml"


@FUZZ
@given(data=st.binary(max_size=300) | st.builds(lambda b, i, x: b[:i] + x + b[i:], st.just(VALID.encode()),
                                                 st.integers(0, len(VALID)), st.binary(min_size=1, max_size=4)))
def test_random_bytes(scratch: Path, data: bytes):
    scratch.write_bytes(data)
    check(lambda: load_model(Recipe, scratch), line_limit(data.decode("utf-8", "replace")))


@FUZZ
@given(text=mutated(), sets=overrides)
def test_mutated_documents_with_overrides(text: str, sets: list[str]):
    check(lambda: load_model(Recipe, "fuzz.yaml", sets, text=text), line_limit(text))
