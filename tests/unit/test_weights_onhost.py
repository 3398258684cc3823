"""onhost.py, the program inkctl runs on each host, run here against the Hub stand-in on
loopback: fetch from the Hub (resuming a partial file), serve to a peer with a token, scan and
re-hash, and refuse what does not match the pin."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inkctl.recipe.manifest import repo_folder
from tests.cluster.hub import Hub, make_model

ONHOST = Path(__file__).resolve().parents[2] / "inkctl" / "weights" / "onhost.py"
REPO = "test/onhost-model"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = Hub("127.0.0.1")
    h.add(make_model(str(tmp_path_factory.mktemp("hub")), REPO, shards=2, shard_mib=1))
    with h:
        yield h


def job(hub, cache, **extra):
    repo = hub.repos[REPO]
    files = [{"path": f.path, "size": f.size, "blob_id": f.blob_id, **({"sha256": f.sha256} if f.lfs else {})}
             for f in repo.files.values() if "/" not in f.path and not f.path.endswith((".bin", ".gguf"))]
    return {"repo": REPO, "revision": repo.commit, "ref": "main", "folder": repo_folder(REPO), "cache": str(cache),
            "files": files, **extra}


def run(tmp_path, what, doc, env=None, **kw):
    path = tmp_path / f"{what}-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(doc))
    return subprocess.run([sys.executable, str(ONHOST), what, str(path), *kw.get("args", [])], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **(env or {})})


def answers(p):
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def test_fetch_resume_serve_scan(hub, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    j = job(hub, a)
    shard = next(f for f in j["files"] if f["path"].endswith("00001-of-00002.safetensors"))
    # a partial download is already there: fetch resumes it with a Range request
    blobs = a / repo_folder(REPO) / "blobs"
    blobs.mkdir(parents=True)
    src = hub.repos[REPO].files[shard["path"]].disk
    (blobs / (shard["sha256"] + ".incomplete")).write_bytes(Path(src).read_bytes()[:300_000])
    ranges = hub.stats["ranges"]
    got = run(tmp_path, "fetch", {**j, "want": [f["path"] for f in j["files"]], "source": {"kind": "hub", "url": hub.url}})
    assert got.returncode == 0, got.stderr + got.stdout
    assert hub.stats["ranges"] == ranges + 1
    assert answers(got)[-1] == {"ev": "done", "bytes": sum(f["size"] for f in j["files"]) - 300_000}
    scan = answers(run(tmp_path, "scan", j, args=["--hash"]))[0]
    assert {v["state"] for v in scan["files"].values()} == {"ok"} and scan["free"] > 0

    # a peer serves it: the right token gets the bytes, a wrong one nothing
    (tmp_path / "serve.json").write_text(json.dumps({**j, "bind": "127.0.0.1", "port": 0, "idle_s": 30}))
    serve = subprocess.Popen([sys.executable, str(ONHOST), "serve", str(tmp_path / "serve.json")], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "INKCTL_WEIGHTS_TOKEN": "t0k"})
    try:
        port = json.loads(serve.stdout.readline())["port"]
        peer = {"kind": "peer", "url": f"http://127.0.0.1:{port}"}
        want = {**job(hub, b), "want": [f["path"] for f in j["files"]], "source": peer}
        bad = run(tmp_path, "fetch", want, env={"INKCTL_WEIGHTS_TOKEN": "nope"})
        assert bad.returncode == 1 and "no or wrong token" in bad.stdout
        good = run(tmp_path, "fetch", want, env={"INKCTL_WEIGHTS_TOKEN": "t0k"})
        assert good.returncode == 0, good.stdout
        # the source's shard is altered: the receiver refuses it and keeps nothing
        os.remove(b / repo_folder(REPO) / "blobs" / shard["sha256"])
        blob = a / repo_folder(REPO) / "blobs" / shard["sha256"]
        data = bytearray(blob.read_bytes())
        data[1000] ^= 0xFF
        blob.write_bytes(bytes(data))
        again = run(tmp_path, "fetch", {**want, "want": [shard["path"]]}, env={"INKCTL_WEIGHTS_TOKEN": "t0k"})
        assert again.returncode == 1 and "altered on the way or at the source" in again.stdout
        assert not list((b / repo_folder(REPO) / "blobs").glob("*.incomplete"))
    finally:
        serve.kill()
        serve.wait()
    scan = answers(run(tmp_path, "scan", job(hub, b)))[0]["files"]
    assert scan[shard["path"]]["state"] == "missing"
    assert {v["state"] for k, v in scan.items() if k != shard["path"]} == {"ok"}
    scan = answers(run(tmp_path, "scan", j, args=["--hash"]))[0]["files"]
    assert scan[shard["path"]]["state"] == "altered"
