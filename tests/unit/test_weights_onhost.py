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

from inkctl.execute.hosts.program import program
from inkctl.recipe.manifest import repo_folder
from tests.cluster.hub import Hub, make_model

SOURCE = Path(__file__).resolve().parents[2] / "inkctl" / "weights" / "onhost.py"
ONHOST = SOURCE  # the file a host gets (``sent``)
REPO = "test/onhost-model"


@pytest.fixture(scope="module", autouse=True)
def sent(tmp_path_factory):
    """These tests run what a host runs: the one file inkctl sends (hostside.py inlined)."""
    global ONHOST
    ONHOST = tmp_path_factory.mktemp("sent") / "onhost.py"
    ONHOST.write_bytes(program(SOURCE))
    yield
    ONHOST = SOURCE


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
    last = answers(got)[-1]
    assert (last["ev"], last["bytes"]) == ("done", sum(f["size"] for f in j["files"]) - 300_000)
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
        assert bad.returncode == 1 and "wrong copy token" in bad.stdout
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


def test_the_hub_token_does_not_follow_a_redirect_to_another_host(tmp_path):
    """The Hub sends weight files to its CDN, another host: the token must stay with the Hub."""
    hub = Hub("127.0.0.1", cdn="127.0.0.2")
    hub.add(make_model(str(tmp_path / "hub"), REPO, shards=1, shard_mib=1))
    with hub:
        j = job(hub, tmp_path / "c")
        got = run(tmp_path, "fetch", {**j, "want": [f["path"] for f in j["files"]],
                                      "source": {"kind": "hub", "url": hub.url}}, env={"HF_TOKEN": "hf_secret-t0ken"})
    assert got.returncode == 0, got.stdout + got.stderr
    assert len(hub.cdn_seen) == 1, hub.cdn_seen  # the shard came from the CDN host
    assert not any(k.lower() == "authorization" for k in hub.cdn_seen[0]), hub.cdn_seen[0]
    assert "hf_secret-t0ken" not in json.dumps(hub.cdn_seen)


def test_two_needed_files_with_one_content_share_one_blob(tmp_path):
    """Two paths, one blob (same etag): fetched once, both linked, no shared .incomplete."""
    import dataclasses

    hub = Hub("127.0.0.1")
    repo = hub.add(make_model(str(tmp_path / "hub"), REPO, shards=2, shard_mib=1))
    with hub:
        j = job(hub, tmp_path / "c")
        shard = max(j["files"], key=lambda f: f["size"])
        twin = {**shard, "path": "consolidated.safetensors"}
        repo.files[twin["path"]] = dataclasses.replace(repo.files[shard["path"]], path=twin["path"])
        # the twins are the two largest files, so they are fetched at the same time
        j["files"] = [f for f in j["files"] if f["size"] < shard["size"] or f is shard] + [twin]
        _twins(hub, tmp_path, j, shard, twin)


def _twins(hub, tmp_path, j, shard, twin):
    got = run(tmp_path, "fetch", {**j, "want": [f["path"] for f in j["files"]],
                                  "source": {"kind": "hub", "url": hub.url}})
    assert got.returncode == 0, got.stdout + got.stderr
    snap = tmp_path / "c" / repo_folder(REPO) / "snapshots" / j["revision"]
    assert (snap / twin["path"]).resolve() == (snap / shard["path"]).resolve()
    assert (snap / twin["path"]).stat().st_size == shard["size"]
    assert answers(got)[-1]["bytes"] == sum(f["size"] for f in j["files"]) - shard["size"]


def test_a_dropped_hub_download_is_resumed(tmp_path):
    hub = Hub("127.0.0.1")
    hub.add(make_model(str(tmp_path / "hub"), REPO, shards=2, shard_mib=1))
    with hub:
        j = job(hub, tmp_path / "c")
        shard = next(f for f in j["files"] if f["path"].endswith("00001-of-00002.safetensors"))
        hub.drop = {shard["path"]: 2}  # cut twice, then whole
        got = run(tmp_path, "fetch", {**j, "want": [f["path"] for f in j["files"]],
                                      "source": {"kind": "hub", "url": hub.url}})
        assert got.returncode == 0, got.stdout + got.stderr
        assert hub.stats["dropped"] == 2 and hub.stats["ranges"] == 2
        assert [e["path"] for e in answers(got) if e["ev"] == "retry"] == [shard["path"]] * 2
        # cut every time: that file fails with the reason, every other file is there
        (tmp_path / "c2").mkdir()
        hub.drop = {shard["path"]: 100}
        j2 = job(hub, tmp_path / "c2")
        bad = run(tmp_path, "fetch", {**j2, "want": [f["path"] for f in j2["files"]],
                                      "source": {"kind": "hub", "url": hub.url}})
    assert bad.returncode == 1
    errs = [e["why"] for e in answers(bad) if e["ev"] == "error"]
    assert len(errs) == 1 and shard["path"] in errs[0] and "connection ended" in errs[0], errs
    files = answers(run(tmp_path, "scan", j2))[0]["files"]
    assert {p for p, st in files.items() if st["state"] != "ok"} == {shard["path"]}


def test_no_token_for_a_gated_model_is_one_line(tmp_path):
    hub = Hub("127.0.0.1")
    hub.add(make_model(str(tmp_path / "hub"), REPO, shards=3, shard_mib=1, gated_token="hf_right"))
    with hub:
        j = job(hub, tmp_path / "c")
        got = run(tmp_path, "fetch", {**j, "want": [f["path"] for f in j["files"]],
                                      "source": {"kind": "hub", "url": hub.url}})
    assert got.returncode == 1
    errs = [e for e in answers(got) if e["ev"] == "error"]
    assert len(errs) == 1 and errs[0]["hub_refused"] and "no token was sent" in errs[0]["why"], errs


class Relay:
    """One ``onhost.py relay`` process on loopback: its events as they come."""

    def __init__(self, tmp_path, name, j, token="t0k"):
        self.name = name
        path = tmp_path / f"relay-{name}.json"
        path.write_text(json.dumps({**j, "bind": "127.0.0.1", "port": 0, "idle_s": 60,
                                    "sources_file": str(tmp_path / f"sources-{name}.json")}))
        self.sources_file = tmp_path / f"sources-{name}.json"
        self.sources_file.unlink(missing_ok=True)  # one of an earlier chain
        self.p = subprocess.Popen([sys.executable, str(ONHOST), "relay", str(path)], stdout=subprocess.PIPE, text=True,
                                  env={**os.environ, "INKCTL_WEIGHTS_TOKEN": token})
        self.events = []
        first = json.loads(self.p.stdout.readline())
        assert first["ev"] == "listening", first
        self.url = f"http://127.0.0.1:{first['port']}"
        import threading

        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            if line.startswith("{"):
                self.events.append({**json.loads(line), "t": time.monotonic()})

    def point(self, *sources):
        self.sources_file.write_text(json.dumps({"sources": list(sources)}))

    def peer(self):
        return {"name": self.name, "kind": "peer", "url": self.url}

    def wait(self, what, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events:
                if e["ev"] == what:
                    return e
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: no {what} within {timeout} s: {self.events[-5:]}")

    def stop(self):
        self.p.kill()
        self.p.wait()


def test_a_chain_relays_the_hub_download_as_it_arrives_and_heals_around_a_dead_host(tmp_path):
    hub = Hub("127.0.0.1", rate=1 << 19)  # 512 KiB/s per connection: the 4 MiB model takes ~4 s
    hub.add(make_model(str(tmp_path / "hub"), REPO, shards=2, shard_mib=2))
    relays = []
    with hub:
        try:
            def chain():
                head = Relay(tmp_path, "h1", {**job(hub, tmp_path / "h1"), "want": wanted})
                mid = Relay(tmp_path, "h2", {**job(hub, tmp_path / "h2"), "want": wanted})
                tail = Relay(tmp_path, "h3", {**job(hub, tmp_path / "h3"), "want": wanted})
                relays.extend((head, mid, tail))
                head.point({"name": "hub", "kind": "hub", "url": hub.url})
                mid.point(head.peer())
                tail.point(mid.peer(), head.peer())
                return head, mid, tail

            j = job(hub, tmp_path / "x")
            total = sum(f["size"] for f in j["files"])
            wanted = [f["path"] for f in j["files"]]
            head, mid, tail = chain()
            t0 = time.monotonic()
            done = [r.wait("done") for r in (head, mid, tail)]
            # one Hub download; the last host had bytes while the head was still downloading:
            # they were forwarded as they arrived, not after
            assert hub.stats["bytes"] == total
            assert all(d["bytes"] == total for d in done), done
            first = next(e["t"] for e in tail.events if e["ev"] == "progress" and e["bytes"] > 0)
            assert first < done[0]["t"] - 1.0, (first - t0, done[0]["t"] - t0)  # while the head still downloaded
            for r in (head, mid, tail):
                scan = answers(run(tmp_path, "scan", job(hub, tmp_path / r.name), args=["--hash"]))[0]
                assert {v["state"] for v in scan["files"].values()} == {"ok"}, (r.name, scan)
                r.stop()
            relays.clear()

            # again from nothing; the middle host dies mid-copy: the last one names it and
            # resumes from the head, keeping what it had
            for r in ("h1", "h2", "h3"):
                import shutil

                shutil.rmtree(tmp_path / r)
            hub.stats["bytes"] = 0
            head, mid, tail = chain()
            deadline = time.monotonic() + 30
            while not any(e["ev"] == "progress" and e["bytes"] > 1 << 19 for e in list(tail.events)):
                assert time.monotonic() < deadline, tail.events
                time.sleep(0.05)
            mid.stop()
            dead = tail.wait("dead", timeout=40)
            assert dead["host"] == "h2"
            assert tail.wait("done", timeout=60)["bytes"] == total
            assert head.wait("done")["bytes"] == total
            assert hub.stats["bytes"] == total  # still one Hub download
            scan = answers(run(tmp_path, "scan", job(hub, tmp_path / "h3"), args=["--hash"]))[0]
            assert {v["state"] for v in scan["files"].values()} == {"ok"}
        finally:
            for r in relays:
                r.stop()


def test_a_host_process_relay_takes_its_secrets_from_the_job_ends_a_leftover_and_ends_on_hangup(hub, tmp_path):
    """Run by the host's python3 (no container): the job file carries the token and is gone once
    read; the relay of an earlier run (its pid file beside) is ended first, a process that is no
    relay is spared; SIGHUP (the SSH session's end) ends it and its pid file."""
    import signal
    import urllib.error
    import urllib.request

    work = tmp_path / "work"
    work.mkdir()
    leftover = subprocess.Popen(["sh", "-c", "sleep 60", "onhost.py"])  # its argv names onhost.py
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        (work / "relay-old.pid").write_text(str(leftover.pid))
        (work / "relay-old.sources").write_text("{}")
        (work / "relay-other.pid").write_text(str(stranger.pid))
        path = work / "relay-new.json"
        sources = work / "relay-new.sources"
        sources.write_text("{}")
        path.write_text(json.dumps({**job(hub, tmp_path / "cache"), "want": [], "bind": "127.0.0.1", "port": 0,
                                    "env": {"INKCTL_WEIGHTS_TOKEN": "t0k"}, "sources_file": str(sources)}))
        p = subprocess.Popen([sys.executable, str(ONHOST), "serve", str(path), "--pid-dir", str(work)],
                             stdout=subprocess.PIPE, text=True)
        seen = []
        while not seen or seen[-1].get("ev") != "listening":
            seen.append(json.loads(p.stdout.readline()))
        assert {"ev": "ended_leftover", "pid": leftover.pid} in seen
        assert leftover.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None
        assert not path.exists() and not (work / "relay-old.sources").exists()
        assert (work / "relay-new.pid").read_text() == str(p.pid)
        url = f"http://127.0.0.1:{seen[-1]['port']}/blob/none"
        for token, code in (("t0k", 404), ("wrong", 401)):  # the token from the job file is the one it wants
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}))
            assert e.value.code == code
        p.send_signal(signal.SIGHUP)
        assert p.wait(timeout=10) == 0
        assert not (work / "relay-new.pid").exists() and not sources.exists(), "its files go with it"
    finally:
        stranger.kill()
        leftover.kill()
