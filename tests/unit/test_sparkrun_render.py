"""sparkrun's template rendering and runtime resolution, reproduced (recipe/foreign/sparkrun.py), and the
shell reading of the rendered command (recipe/foreign/shell.py).

The expected renderings were produced by sparkrun's own substitution (vpd 0.9.13's
``legacy.arguments.arg_substitute``, repeated to a fixed point over defaults + model, as
``Recipe.render_command`` does); every recipe of the corpus in tests/data/import/sparkrun renders
to the same text with it and with inkctl (checked when the corpus was built)."""

from __future__ import annotations

import pytest

from inkctl.errors import InkctlError
from inkctl.recipe.foreign import shell as foreign_shell, sparkrun
from inkctl.recipe.foreign.flags import unbrace


def test_render_matches_sparkrun():
    doc = {"model": "m/x", "defaults": {"a": True, "b": 0.90, "c": "{d}", "d": 7, "model": "o/y", "port": 8000},
           "command": "  vllm serve {model} --a {a} --b {b} --c {c} --j '{\"k\": {d}}' --s '{{\"n\":{d}}}' "
                      "--p {port} ${HOME} ${X:-{d}}\n"}
    want = ("vllm serve o/y --a True --b 0.9 --c 7 --j '{\"k\": {d}}' --s '{{\"n\":{d}}}' --p 8000 ${HOME} "
            "${X:-{d}}")  # vpd: str() of each value, defaults.model before model:, nested {c}, JSON left
    assert sparkrun.render(doc).text == want


def test_model_comes_from_model_and_a_backslash_with_spaces_continues():
    doc = {"model": "Qwen/Qwen3-1.7B", "command": "vllm serve {model} \\  \n  --port 8000"}
    assert sparkrun.render(doc).text == "vllm serve Qwen/Qwen3-1.7B \\\n  --port 8000"


def test_a_placeholder_nothing_fills_is_refused_where_it_is():
    with pytest.raises(sparkrun.Refused) as e:
        sparkrun.render({"model": "m", "command": "vllm serve {model} --max-model-len {ctx}"})
    assert e.value.key == "command" and e.value.text == "{ctx}" and "add ctx under defaults" in (e.value.hint or "")


def test_a_self_referring_default_is_refused_not_a_hang():
    with pytest.raises(sparkrun.Refused, match="without end"):
        sparkrun.render({"model": "m", "defaults": {"a": "x{a}"}, "command": "vllm serve {model} --a {a}"})


@pytest.mark.parametrize("doc,want", [
    ({"command": "sglang serve --model-path m"}, "sglang"),
    ({"command": "python3 -m sglang.launch_server --model-path m"}, "sglang"),
    ({"command": "llama-server -m x.gguf"}, "llama-cpp"),
    ({"command": "trtllm-serve m"}, "trtllm"),
    ({"command": "vllm serve m"}, "vllm-distributed"),
    ({"runtime": "vllm", "command": "vllm serve m --distributed-executor-backend ray"}, "vllm-ray"),
    ({"runtime": "vllm", "defaults": {"distributed_executor_backend": "Ray"}, "command": "vllm serve m"}, "vllm-ray"),
    ({"runtime": "sglang", "command": "vllm serve m"}, "sglang"),  # runtime wins; import then refuses the mismatch
    ({"runtime": "eugr-vllm", "command": "vllm serve m"}, "eugr-vllm"),
])
def test_runtime_resolves_as_sparkrun_does(doc, want):
    assert sparkrun.runtime(doc) == want


def test_str_format_escapes_fill_a_value_inside_json():
    raw = '{{"method":"mtp","num_speculative_tokens":{n}}}'
    assert unbrace(raw, {"n": 2}) == '{"method":"mtp","num_speculative_tokens":2}'
    assert unbrace('{"a": 1}', {}) is None  # JSON already: left alone
    assert unbrace("{{not json}}", {}) is None


def test_the_shell_reading_of_a_command():
    c = foreign_shell.read("# a comment line\nexport A=1; B='x y' taskset -c 5-9 vllm serve m \\\n --j '{\"a\": 1}' # why\n")
    assert c.argv == ["vllm", "serve", "m", "--j", '{"a": 1}']
    assert c.env == {"B": "x y"} and c.wrappers == ["taskset", "-c", "5-9"] and c.others == ["export A=1"]
    assert foreign_shell.read("env X=1 exec sglang serve --tp 2 \\").notes  # the trailing backslash, said
    with pytest.raises(InkctlError, match="starts no server"):
        foreign_shell.read("llama-cli -m x")
    with pytest.raises(foreign_shell.Expanded) as e:
        foreign_shell.read("vllm serve m --download-dir \"$HF_HOME\" --x '$literal'")
    assert e.value.text == "$HF_HOME"


def _mapped(argv: list[str], values: dict | None = None):
    from inkctl.recipe.foreign import flags as foreign_flags

    out = {"model": {}, "engine": {"args": {}}}
    _, opts = foreign_flags.options(argv)
    return out, foreign_flags.apply(out, opts, "vllm", ray=False, values=values)


def test_a_placeholder_sparkrun_leaves_inside_single_braces_is_refused():
    with pytest.raises(sparkrun.Refused, match="leaves {n} unfilled"):
        _mapped(["--compilation-config", '{"level": {n}}'], {"n": 3})


def test_vllm_reads_underscores_as_dashes_up_to_a_dot():
    out, m = _mapped(["--max_num_batched_tokens", "8192", "--default-chat-template-kwargs.reasoning_effort=high",
                      "--max_model_len", "auto"])
    assert m.extra == ["--max-num-batched-tokens", "8192", "--default-chat-template-kwargs.reasoning_effort=high",
                       "--max-model-len", "auto"]
    assert "max_model_len" not in out["engine"]["args"]  # 'auto' fits no typed field: passed as written


def test_python_module_entrypoints_and_dp_attention(tmp_path):
    from inkctl.recipe.foreign.convert import Options, convert

    doc = {"model": "Qwen/Qwen3-1.7B", "container": "vllm/vllm-openai:v0.14.1",
           "command": "python3 -m vllm.entrypoints.openai.api_server --model {model} --port 8000"}
    imp = convert(doc, Options(name="x"))
    assert "launcher" not in imp.doc["engine"] and imp.doc["model"]["repo"] == "Qwen/Qwen3-1.7B"
    assert any("runs as vllm serve" in n for n in imp.notes)
    doc = {"model": "m/x", "container": "lmsysorg/sglang:v0.5.9", "runtime": "sglang",
           "command": "python3 -m sglang.launch_server --model-path {model} --tp 2 --dp 2 --enable-dp-attention"}
    assert convert(doc, Options(name="x")).doc["hardware"]["nodes"] == 2  # DP attention runs inside TP
