"""Which repository files a pin keeps, where the Hub cache is on a host, and the lock's model."""

import json

import pytest
import yaml

from inkctl.errors import InkctlError
from inkctl.recipe.model import Recipe
from inkctl.recipe.manifest import (FileEntry, Manifest, container_hub_cache, host_cache_template, managed,
                                     needed_files, repo_folder)

REPO_FILES = [
    "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "chat_template.jinja", "README.md", "model.safetensors.index.json",
    "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model-00099-of-00099.safetensors",
    "pytorch_model.bin", "pytorch_model.bin.index.json", "model.gguf", "original/consolidated.00.pth",
    "original/params.json", "onnx/model.onnx",
]
INDEX = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}


def test_needed_files_are_top_level_files_and_the_shards_the_index_names():
    got = needed_files(REPO_FILES, INDEX)
    assert got == sorted(["README.md", "chat_template.jinja", "config.json", "generation_config.json",
                          "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                          "model.safetensors.index.json", "pytorch_model.bin.index.json", "special_tokens_map.json",
                          "tokenizer.json", "tokenizer_config.json"])
    assert "model-00099-of-00099.safetensors" not in got  # a stray shard the index does not name
    assert not any(p.startswith("original/") or p.endswith((".gguf", ".bin")) for p in got)


def test_include_and_exclude_patterns():
    got = needed_files(REPO_FILES, INDEX, include=["original/params.json"], exclude=["*.md", "pytorch_model*"])
    assert "original/params.json" in got and "README.md" not in got and "pytorch_model.bin.index.json" not in got


def test_without_safetensors_the_pytorch_files_are_needed():
    got = needed_files(["config.json", "pytorch_model.bin", "model.gguf"], None)
    assert got == ["config.json", "pytorch_model.bin"]
    assert needed_files(["config.json", "model.safetensors", "pytorch_model.bin"], None) == ["config.json", "model.safetensors"]


def test_an_index_naming_a_missing_shard_is_an_error():
    with pytest.raises(InkctlError, match="model-00009"):
        needed_files(["config.json", "model.safetensors.index.json"], {"weight_map": {"x": "model-00009.safetensors"}})


def _recipe(**container):
    doc = yaml.safe_load(open("tests/e2e/recipes/single.yaml"))
    doc["container"].update(container)
    return Recipe.model_validate(doc)


def test_the_hub_cache_on_the_host_follows_the_containers_env_and_mounts():
    assert container_hub_cache({}) == "/root/.cache/huggingface/hub"
    assert container_hub_cache({"HF_HOME": "/data/hf/"}) == "/data/hf/hub"
    assert container_hub_cache({"HF_HOME": "/data/hf", "HF_HUB_CACHE": "/hf"}) == "/hf"
    assert host_cache_template(_recipe()) is None and not managed(_recipe())
    r = _recipe(mounts=[{"source": "${HF_HOME}", "target": "/root/.cache/huggingface"}])
    assert host_cache_template(r) == "${HF_HOME}/hub" and managed(r)
    r = _recipe(env={"HF_HUB_CACHE": "/hf"}, mounts=[{"source": "${HOME}/.cache/huggingface/hub", "target": "/hf"},
                                                     {"source": "/x", "target": "/"}])
    assert host_cache_template(r) == "${HOME}/.cache/huggingface/hub"  # the deepest mount wins
    r.model.weights.cache = "/big/hub"
    assert host_cache_template(r) == "/big/hub"
    r.model.weights.manage = False
    assert not managed(r)


def test_manifest_round_trip_and_cache_names():
    m = Manifest("org/name", "a" * 40, "main", (FileEntry("config.json", 10, None, "b" * 40),
                                                 FileEntry("model.safetensors", 5, "c" * 64, "d" * 40)))
    assert Manifest.from_dict(json.loads(json.dumps(m.as_dict()))) == m
    assert m.total_bytes == 15 and m.files[0].etag == "b" * 40 and m.files[1].etag == "c" * 64
    assert repo_folder("org/name") == "models--org--name"


def test_the_bundled_recipes_manage_their_weights():
    from pathlib import Path

    for path in Path("recipes").glob("*.yaml"):
        r = Recipe.model_validate(yaml.safe_load(path.read_text()))
        assert managed(r), path
