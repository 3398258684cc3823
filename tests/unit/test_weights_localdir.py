"""A local model directory (not on the Hub), pinned by hashing its files where they live."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from inkctl.errors import InkctlError
from inkctl.recipe.model import Recipe
from inkctl.weights.localdir import pin_local

ROOT = Path(__file__).resolve().parents[2]
SHARDS = {"model-00001-of-00003.safetensors": b"\x01" * 4096 + b"first",
          "model-00002-of-00003.safetensors": os.urandom(3000),
          "model-00003-of-00003.safetensors": b"third" * 777}
SMALL = {"config.json": b'{"model_type": "llama"}', "tokenizer.json": b'{"version": "1.0"}',
         "tokenizer_config.json": b"{}", "generation_config.json": b'{"temperature": 0.6}'}
JUNK = {"original/consolidated.00.pth": b"never", "original/params.json": b"{}", "pytorch_model.bin": b"old",
        "model.gguf": b"GGUF", "model-00099-of-00099.safetensors": b"stray shard the index does not name",
        "onnx/model.onnx": b"onnx"}


def _model_dir(root: Path) -> Path:
    index = {"metadata": {"total_size": sum(map(len, SHARDS.values()))},
             "weight_map": {f"layer.{i}": name for i, name in enumerate(sorted(SHARDS) * 2)}}
    files = {**SHARDS, **SMALL, **JUNK, "model.safetensors.index.json": json.dumps(index).encode()}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def _recipe_doc(model_dir: Path) -> dict:
    return {"name": "local-model", "model": {"repo": str(model_dir)},
            "hardware": {"accelerator": "h200", "compute_capability": "9.0", "gpus_per_host": 1},
            "engine": {"kind": "vllm", "version": "0.28.0", "image": {"ref": "vllm/vllm-openai:v0.28.0"}}}


def _pin(model_dir: Path):
    return pin_local(Recipe.model_validate(_recipe_doc(model_dir)))


def test_the_manifest_lists_exactly_the_needed_files_with_their_sizes_and_sha256(tmp_path):
    d = _model_dir(tmp_path / "m")
    m = _pin(d)
    want = {**SHARDS, **SMALL, "model.safetensors.index.json": (d / "model.safetensors.index.json").read_bytes()}
    assert [f.path for f in m.files] == sorted(want)
    for f in m.files:
        assert f.size == len(want[f.path]), f.path
        assert f.sha256 == hashlib.sha256(want[f.path]).hexdigest(), f.path
        assert f.blob_id is None
    assert m.repo == str(d) and m.ref == "local"
    assert m.revision.startswith("local-sha256:") and len(m.revision) == len("local-sha256:") + 64
    assert m.total_bytes == sum(map(len, want.values()))
    assert m.as_dict()["files"][0] == {"path": m.files[0].path, "size": m.files[0].size, "sha256": m.files[0].sha256}


def test_the_revision_changes_with_one_byte_and_not_with_skipped_files(tmp_path):
    d = _model_dir(tmp_path / "m")
    first = _pin(d)
    assert _pin(d).revision == first.revision  # the same bytes, the same pin
    (d / "model.gguf").write_bytes(b"another gguf")  # not needed: the pin does not see it
    (d / "original" / "params.json").write_bytes(b'{"dim": 1}')
    assert _pin(d).revision == first.revision
    shard = d / "model-00002-of-00003.safetensors"
    data = bytearray(shard.read_bytes())
    data[1234] ^= 0x01
    shard.write_bytes(bytes(data))
    second = _pin(d)
    assert second.revision != first.revision
    changed = [f.path for f, g in zip(first.files, second.files) if f != g]
    assert changed == ["model-00002-of-00003.safetensors"]


def test_a_missing_directory_is_one_clear_error(tmp_path):
    with pytest.raises(InkctlError) as e:
        _pin(tmp_path / "nowhere")
    assert e.value.message == f"model.repo: local model directory {tmp_path / 'nowhere'} does not exist on this machine"
    assert "set model.repo to the model directory" in e.value.hint and e.value.exit_code == 2


def test_a_directory_without_safetensors_is_refused(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "config.json").write_text("{}")
    (d / "pytorch_model.bin").write_bytes(b"x")
    with pytest.raises(InkctlError) as e:
        _pin(d)
    assert e.value.message == f"model.repo: {d} has no model.safetensors.index.json and no *.safetensors file at its top level"
    assert "convert" in e.value.hint


def test_an_index_naming_a_missing_shard_is_refused(tmp_path):
    d = _model_dir(tmp_path / "m")
    (d / "model-00003-of-00003.safetensors").unlink()
    with pytest.raises(InkctlError, match="names shards the repository does not have: model-00003-of-00003.safetensors"):
        _pin(d)


def test_a_local_model_is_not_put_in_the_hub_cache(tmp_path):
    from inkctl.recipe.manifest import managed

    doc = _recipe_doc(tmp_path)
    doc["container"] = {"mounts": [{"source": "/data/hf", "target": "/root/.cache/huggingface"}]}
    assert not managed(Recipe.model_validate(doc))
    doc["model"]["repo"] = "org/name"
    assert managed(Recipe.model_validate(doc))


class _FakeDockerd(http.server.BaseHTTPRequestHandler):
    """The Docker Engine API at the process boundary: a version and one image's inspect."""

    def do_GET(self):
        if self.path.endswith("/_ping"):
            body = "OK"
        elif self.path.endswith("/version"):
            body = {"ApiVersion": "1.43", "Version": "24.0.0"}
        elif self.path.endswith("/images/vllm/vllm-openai:v0.28.0/json"):
            body = {"Id": "sha256:" + "ab" * 32, "RepoDigests": ["vllm/vllm-openai@sha256:" + "cd" * 32],
                    "Config": {"Labels": {}}, "Architecture": "amd64"}
        else:
            self.send_response(404)
            self.end_headers()
            return
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_lock_pins_a_local_model_in_the_lock_file(tmp_path):
    d = _model_dir(tmp_path / "m")
    recipe = tmp_path / "local.yaml"
    recipe.write_text(yaml.safe_dump(_recipe_doc(d)))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeDockerd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")}
        env["DOCKER_HOST"] = f"tcp://127.0.0.1:{server.server_port}"
        r = subprocess.run([sys.executable, "-m", "inkctl", "lock", "--local", str(recipe), "-o", "json"], cwd=ROOT,
                           capture_output=True, text=True, env=env, timeout=120)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    lock = json.loads(Path(out["lock"]).read_text())
    want = _pin(d)
    assert lock["model"] == want.as_dict()
    assert out["pins"][f"model:{d}"] == want.revision


def test_lock_names_a_missing_local_model_before_touching_any_host(tmp_path):
    recipe = tmp_path / "local.yaml"
    recipe.write_text(yaml.safe_dump(_recipe_doc(tmp_path / "gone")))
    env = dict(os.environ, DOCKER_HOST="tcp://127.0.0.1:9")  # never reached: the model fails first
    r = subprocess.run([sys.executable, "-m", "inkctl", "lock", "--local", str(recipe)], cwd=ROOT,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2
    assert f"model.repo: local model directory {tmp_path / 'gone'} does not exist on this machine" in r.stderr
    assert "Traceback" not in r.stderr and not list(tmp_path.glob("*.lock.json"))
