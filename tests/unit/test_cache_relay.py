"""The relay's plain layout (a compile cache) between two real ``onhost.py`` processes on
loopback: files land at their own paths under ``incoming``, each hashed as it arrives; a file
whose bytes are not the manifest's is refused and never takes its place. And ``up --slurm``'s
reading of a job's output (``slurm.bootlog``): each rank's lines by their ``R: `` label."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from inkctl.weights import onhost

TOKEN = "0" * 64


def _manifest(root: Path) -> list[dict]:
    return [{"path": p.relative_to(root).as_posix(), "size": p.stat().st_size,
             "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in sorted(root.rglob("*")) if p.is_file()]


def _relay(mode: str, job: dict, tmp: Path, name: str) -> subprocess.Popen:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(job))
    return subprocess.Popen([sys.executable, onhost.__file__, mode, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, onhost.TOKEN_ENV: TOKEN})


def _copy(tmp: Path, files: list[dict], src: Path, dst: Path) -> tuple[int, list[dict]]:
    base = {"repo": "inkctl-compile-cache/k", "revision": "r", "ref": "", "folder": "k", "cache": str(tmp),
            "files": files, "layout": "plain", "bind": "127.0.0.1", "port": 0, "idle_s": 30, "streams": 2}
    server = _relay("serve", {**base, "dir": str(src), "incoming": str(tmp / "unused")}, tmp, "serve")
    try:
        assert server.stdout is not None
        port = json.loads(server.stdout.readline())["port"]
        want = [f["path"] for f in files]
        fetch = _relay("fetch", {**base, "dir": str(dst), "incoming": str(tmp / "incoming"), "want": want,
                                 "sources": {"sources": [{"name": "h1", "kind": "peer",
                                                          "url": f"http://127.0.0.1:{port}"}]}}, tmp, "fetch")
        out, err = fetch.communicate(timeout=60)
        return fetch.returncode, [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    finally:
        server.kill()
        server.wait()


def test_plain_layout_files_arrive_at_their_paths_hashed_and_a_wrong_one_is_refused(tmp_path):
    src = tmp_path / "h1" / "vllm-sm90-k"
    (src / "vllm" / "rank_0_0").mkdir(parents=True)
    (src / "triton").mkdir()
    (src / "vllm" / "rank_0_0" / "graph.bin").write_bytes(os.urandom(300_000))
    (src / "triton" / "k.cubin").write_bytes(os.urandom(5_000))
    (src / "triton" / "same.cubin").write_bytes((src / "triton" / "k.cubin").read_bytes())  # one content, two paths
    files = _manifest(src)
    code, events = _copy(tmp_path, files, src, tmp_path / "h2" / "vllm-sm90-k")
    assert code == 0 and events[-1]["ev"] == "done", events
    got = _manifest(tmp_path / "incoming")
    assert got == files  # every path, every byte; nothing under the cache directory itself yet
    assert not (tmp_path / "h2").exists()

    # the source's bytes are not the manifest's (corrupted after it was read): refused, not placed
    (tmp_path / "incoming").rename(tmp_path / "first")
    (src / "triton" / "k.cubin").write_bytes(bytes(5_000))
    code, events = _copy(tmp_path, files, src, tmp_path / "h2" / "vllm-sm90-k")
    assert code == 1, events
    why = " ".join(e["why"] for e in events if e["ev"] == "error")
    assert "altered on the way or at the source" in why, events
    assert not (tmp_path / "incoming" / "triton" / "k.cubin").exists()


def test_a_jobs_output_gives_each_ranks_phases_by_its_label():
    from inkctl.slurm.bootlog import JobLog

    log = JobLog("/nonexistent/job.out", ("n1", "n2"), "vllm", t0=0.0)
    for line in ["0: inkctl: rank 0 started inkctl-x-r0 on node-a (192.0.2.1)",
                 "1: inkctl: rank 1 started inkctl-x-r1 on node-b (192.0.2.2)",
                 "0: INFO 12-01 10:00:00 [default_loader.py:262] Loading weights took 1.50 seconds",
                 "1: INFO 12-01 10:00:00 [default_loader.py:262] Loading weights took 2.25 seconds",
                 "1: INFO 12-01 10:00:03 [gpu_model_runner.py:3480] Graph capturing finished in 4 secs, took 0.5 GiB",
                 "Loading weights took 9.00 seconds",  # not a rank's line: not counted
                 "inkctl: ready: http://192.0.2.1:8000/health"]:
        log.line(line)
    rec = log.stop()
    assert [(r["host"], r["rank"], r["seconds"]) for r in rec["ranks"]] == [
        ("node-a", 0, {"weights": 1.5}), ("node-b", 1, {"weights": 2.25, "graphs": 4.0})]
    assert rec["inkctl"]["container"] > 0
