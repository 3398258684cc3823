"""Cross-field rules: each bad recipe gives its exact message at its field path."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from inkctl.recipe.model import Recipe
from inkctl.recipe.checks.rules import recipe_findings

BASE = {
    "name": "t",
    "model": {"repo": "org/m"},
    "hardware": {"accelerator": "h200", "compute_capability": "9.0", "gpus_per_host": 2},
    "engine": {"kind": "vllm", "version": "v1", "image": {"ref": "img:1", "digest": "sha256:" + "a" * 64},
               "args": {"tensor_parallel": 2}},
}


def recipe(**patch) -> Recipe:
    data = copy.deepcopy(BASE)
    for dotted, value in patch.items():
        cur = data
        keys = dotted.split("__")
        for k in keys[:-1]:
            cur = cur.setdefault(k, {})
        cur[keys[-1]] = value
    return Recipe.model_validate(data)


def findings(r: Recipe, severity: str | None = None) -> dict[str, str]:
    return {p.path: p.message for p in recipe_findings(r) if severity in (None, p.severity)}


def test_base_is_clean():
    assert findings(recipe()) == {}


def test_parallelism_must_match_gpus():
    f = findings(recipe(engine__args={"tensor_parallel": 4}))
    assert f["engine.args.tensor_parallel"] == (
        "tensor_parallel 4 x pipeline_parallel 1 = 4 GPUs, but the hosts provide 1 x 2 = 2")


def test_compute_capability_must_match_accelerator():
    f = findings(recipe(hardware__compute_capability="12.1"))
    assert f["hardware.compute_capability"] == "h200 has compute capability 9.0, not 12.1"


def test_gb10_needs_unified_memory():
    r = recipe(hardware={"accelerator": "dgx-spark-gb10", "compute_capability": "12.1", "gpus_per_host": 2,
                         "unified_memory": False})
    assert findings(r)["hardware.unified_memory"] == "dgx-spark-gb10 has unified memory"
    # left out, the table says it
    r = recipe(hardware={"accelerator": "GB10", "gpus_per_host": 2})
    assert r.hardware.unified_memory is True and "hardware.unified_memory" not in findings(r)


def test_multinode_needs_host_network():
    r = recipe(hardware__nodes=2, hardware__gpus_per_host=1, container={"network": "bridge", "ports": [{"host": 8000, "container": 8000}]})
    assert findings(r)["container.network"] == "a 2-node deployment needs host networking, not 'bridge'"


def test_bridge_must_publish_engine_port():
    r = recipe(container={"network": "bridge"})
    assert findings(r)["container.ports"] == "the engine listens on 8000 but no port publishes it"


def test_podman_needs_cdi():
    r = recipe(container={"runtime": "podman", "gpus": "all"})
    assert findings(r)["container.gpus"] == "podman exposes GPUs through CDI, not --gpus"


def test_literal_secret_in_env_is_refused():
    r = recipe(container={"env": {"HF_TOKEN": "hf_abc"}})
    assert findings(r)["container.env.HF_TOKEN"] == "HF_TOKEN looks like a secret but has a literal value in the recipe"


def test_secret_needs_exactly_one_source():
    r = recipe(secrets={"HF_TOKEN": {}})
    assert findings(r)["secrets.HF_TOKEN"] == "give exactly one of env or file"


def test_typed_flags_cannot_hide_in_extra():
    r = recipe(engine__args={"tensor_parallel": 2, "extra": ["--port=9000"]})
    assert findings(r)["engine.args.extra[0]"] == ("--port is already in the planned argv: given again, vLLM keeps the last "
                                                   "one without a word")


def test_unpinned_image_is_a_warning():
    r = recipe(engine__image={"ref": "img:1"})
    assert findings(r, "warning")["engine.image.digest"] == "image img:1 is not pinned by digest"
    assert findings(r, "error") == {}


def test_prefix_must_agree_with_full_hash():
    r = recipe(engine__image={"ref": "img:1"}, patches={"mode": "build", "base": "b@sha256:" + "b" * 64, "files": [
        {"kind": "replace", "source": "x.py", "path": "/x.py", "sha256_before": "c" * 64, "sha256_before_prefix": "f23a3775",
         "sha256_after": "d" * 64}]})
    assert findings(r, "error")["patches.files[0].sha256_before"] == f"{'c' * 64} does not start with the stated prefix f23a3775"


def test_hotfixes_need_at_start_mode():
    r = recipe(patches={"hotfixes": [{"name": "h.py", "source": "h.py"}]})
    assert findings(r)["patches.hotfixes"] == "hotfixes need mode 'at_start', not 'none'"


def test_duplicate_mount_targets():
    r = recipe(container={"mounts": [{"source": "/a", "target": "/x"}], "volumes": [{"name": "v", "target": "/x/"}]})
    assert findings(r)["container.volumes[0].target"] == "/x/ is already mounted by container.mounts[0].target"


def test_weights_that_cannot_fit():
    r = recipe(model={"repo": "o/m", "weights_gb": 400}, hardware__memory_gib=140)
    assert findings(r)["model.weights_gb"] == "186.3 GiB of weights per rank does not fit 140.0 GiB per GPU"


@pytest.mark.parametrize("field,value", [
    ("name", "Bad Name"), ("name", "../etc"), ("name", "a;rm -rf /"),
    ("engine__image", {"ref": "i", "digest": "sha256:xyz"}),
    ("engine__args", {"port": 70000}),
    ("container", {"mounts": [{"source": "relative/path", "target": "/x"}]}),
    ("container", {"mounts": [{"source": "/a:b", "target": "/x"}]}),
    ("container", {"env": {"BAD NAME": "x"}}),
    ("container", {"ulimits": {"bogus": {"soft": 1, "hard": 1}}}),
])
def test_unsafe_values_are_rejected(field, value):
    with pytest.raises(ValidationError):
        recipe(**{field: value})


def test_unknown_engine_kind_is_rejected():
    with pytest.raises(ValidationError):
        recipe(engine={"kind": "tgi", "version": "1", "image": {"ref": "x"}})
