"""The pure build context (the RTX PRO 6000 registry record): golden Dockerfile, content-addressed tag, strict pins, and
the two scripts it ships (verify.sh run here with /bin/sh, the Python applier imported).

Regenerate the golden file on purpose with INKCTL_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import subprocess
import tarfile
from pathlib import Path

import pytest

from inkctl.errors import InkctlError
from inkctl.plan.image.build import build_context, image_tag, repository
from inkctl.plan.image.build_files import VERIFY_SH
from inkctl.plan.image.patch_apply import PatchError, apply_diff, apply_edits, diff_targets
from inkctl.recipe.model import Recipe
from inkctl.recipe.reading.source import Loaded

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "build-three-kinds.Dockerfile"
ORIGINAL = b"def gemm():\n    num_stages = 4\n    return num_stages\n"
DIFF = b"""--- a/opt/app/conf.py
+++ b/opt/app/conf.py
@@ -1,2 +1,2 @@
 A = 1
-B = 2
+B = 3
"""


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def make(tmp_path: Path, files=None, base="example/engine:1.0@sha256:" + "ab" * 32, extra=None) -> Loaded:
    (tmp_path / "recipes").mkdir(exist_ok=True)
    (tmp_path / "patches").mkdir(exist_ok=True)
    (tmp_path / "patches" / "moe.py").write_bytes(ORIGINAL.replace(b"4", b"3"))
    (tmp_path / "patches" / "conf.diff").write_bytes(DIFF)
    doc = {
        "name": "golden", "model": {"repo": "x/y"},
        "hardware": {"accelerator": "h200", "compute_capability": "9.0", "gpus_per_host": 1},
        "engine": {"kind": "sglang", "version": "dev", "image": {"ref": "local/sglang-inkling:sm120"}},
        "patches": {"mode": "build", "base": base, "files": files if files is not None else [
            {"kind": "replace", "source": "moe.py", "path": "/opt/app/moe.py", "sha256_before": sha(ORIGINAL)},
            {"kind": "edit", "path": "/opt/app/gate.py", "sha256_before": "1" * 64, "sha256_after": "2" * 64,
             "edits": [{"old": "major in (10, 11)", "new": "major in (10, 11, 12)"}]},
            {"kind": "diff", "source": "conf.diff", "files": [
                {"path": "/opt/app/conf.py", "sha256_before": "3" * 64, "sha256_after": "4" * 64}]},
        ]},
    }
    if extra:
        extra(doc)
    return Loaded(recipe=Recipe.model_validate(doc), path=tmp_path / "recipes" / "golden.yaml", hosts=None)


def test_golden_dockerfile(tmp_path):
    ctx = build_context(make(tmp_path), pins={})
    if os.environ.get("INKCTL_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(ctx.dockerfile)
    assert ctx.dockerfile == GOLDEN.read_text()


def test_context_files_and_labels(tmp_path):
    ctx = build_context(make(tmp_path), pins={})
    names = [n for n, _, _ in ctx.files]
    assert names == ["Dockerfile", "inkctl/verify.sh", "inkctl/patch_apply.py", "patches/0/replacement",
                     "patches/1/edits.json", "patches/2/patch.diff"]
    assert json.loads(ctx.file("patches/1/edits.json")) == [{"old": "major in (10, 11)", "new": "major in (10, 11, 12)"}]
    labels = dict(ctx.labels)
    assert labels["inkctl.recipe"] == "golden"
    assert labels["inkctl.base"] == "example/engine:1.0@sha256:" + "ab" * 32
    assert json.loads(labels["inkctl.patches"])[0] == ["/opt/app/moe.py", sha(ORIGINAL), sha(ORIGINAL.replace(b"4", b"3"))]
    assert labels["inkctl.content"] == ctx.content_hash


def test_tar_is_reproducible(tmp_path):
    a, b = build_context(make(tmp_path), pins={}).tar(), build_context(make(tmp_path), pins={}).tar()
    assert a == b
    with tarfile.open(fileobj=io.BytesIO(a)) as t:
        assert {m.mtime for m in t.getmembers()} == {0}
        assert t.getmember("inkctl/verify.sh").mode == 0o755


def test_tag_is_content_addressed(tmp_path):
    loaded = make(tmp_path)
    tag = image_tag(loaded, pins={})
    assert tag.startswith("local/sglang-inkling:inkctl-") and len(tag.split(":inkctl-")[1]) == 12
    assert tag == build_context(loaded, pins={}).tag
    assert image_tag(make(tmp_path), pins={}) == tag  # same inputs, same tag
    (tmp_path / "patches" / "moe.py").write_bytes(b"changed\n")  # content of a patch
    assert image_tag(loaded, pins={}) != tag
    other_base = make(tmp_path, base="example/engine:1.0@sha256:" + "cd" * 32)
    (tmp_path / "patches" / "moe.py").write_bytes(ORIGINAL.replace(b"4", b"3"))
    assert image_tag(other_base, pins={}) != tag
    assert image_tag(make(tmp_path), pins={}) == tag  # restored


def test_description_does_not_change_the_tag(tmp_path):
    tag = image_tag(make(tmp_path), pins={})
    assert image_tag(make(tmp_path, extra=lambda d: d.update(description="words")), pins={}) == tag


@pytest.mark.parametrize("ref,repo", [
    ("vllm/vllm-openai:v0.28.0", "vllm/vllm-openai"),
    ("reg.example:5000/ns/img:tag@sha256:" + "a" * 64, "reg.example:5000/ns/img"),
    ("reg.example:5000/img", "reg.example:5000/img"),
    ("img", "img"),
])
def test_repository(ref, repo):
    assert repository(ref) == repo


def test_unpinned_refused_but_pins_from_lock_accepted(tmp_path):
    files = [{"kind": "replace", "source": "moe.py", "path": "/opt/app/moe.py", "sha256_before_prefix": "f23a3775"}]
    loaded = make(tmp_path, files=files)
    with pytest.raises(InkctlError) as e:
        build_context(loaded, pins={})
    assert "patch:0:before (/opt/app/moe.py)" in e.value.message and "inkctl lock" in e.value.hint
    ctx = build_context(loaded, pins={"patch:0:before": "9" * 64})
    assert "9" * 64 in ctx.dockerfile
    assert ctx.tag != image_tag(loaded, pins={})  # pinning changes what is verified, hence the tag


def test_base_without_digest_takes_the_lock_pin(tmp_path):
    loaded = make(tmp_path, base="inkctl-fake-engine:latest")
    ctx = build_context(loaded, pins={"base:inkctl-fake-engine:latest": "sha256:" + "e" * 64})
    assert ctx.base_pin == "sha256:" + "e" * 64
    assert "pinned by golden.lock.json" in ctx.dockerfile
    assert dict(ctx.labels)["inkctl.base"] == "inkctl-fake-engine:latest@sha256:" + "e" * 64


def test_replacement_that_changed_is_refused_locally(tmp_path):
    files = [{"kind": "replace", "source": "moe.py", "path": "/opt/app/moe.py", "sha256_before": "1" * 64,
              "sha256_after": "2" * 64}]
    with pytest.raises(InkctlError, match=r"moe.py has sha256 [0-9a-f]{64}, but sha256_after pins 2{64}"):
        build_context(make(tmp_path, files=files), pins={})


def test_diff_must_list_every_file_it_touches(tmp_path):
    files = [{"kind": "diff", "source": "conf.diff", "files": [
        {"path": "/opt/app/other.py", "sha256_before": "3" * 64, "sha256_after": "4" * 64}]}]
    with pytest.raises(InkctlError, match="conf.diff changes /opt/app/conf.py, but files lists /opt/app/other.py"):
        build_context(make(tmp_path, files=files), pins={})


def test_missing_source_is_named(tmp_path):
    loaded = make(tmp_path)
    (tmp_path / "patches" / "moe.py").unlink()
    with pytest.raises(InkctlError, match=r"patches.files\[0\].source: .*moe.py is not there"):
        build_context(loaded, pins={})


def test_not_build_mode(tmp_path):
    loaded = make(tmp_path, files=[], extra=lambda d: d["patches"].update(mode="none", base=None))
    with pytest.raises(InkctlError, match="nothing to build"):
        build_context(loaded, pins={})


# --- the applier --------------------------------------------------------------------------

def test_edit_exactly_once():
    assert apply_edits("/f", b"a = 1\nb = 2\n", [("b = 2", "b = 3")]) == b"a = 1\nb = 3\n"
    with pytest.raises(PatchError) as e:
        apply_edits("/f", b"x = 1\nx = 1\n", [("a", "b"), ("x = 1", "y")][1:])
    assert str(e.value) == "/f: edit 0 (old begins 'x = 1') matched 2 times; it must match exactly once"
    with pytest.raises(PatchError, match=r"edit 1 \(old begins 'zzz'\) matched 0 times"):
        apply_edits("/f", b"abc", [("abc", "abd"), ("zzz\nmore", "q")])
    with pytest.raises(PatchError, match="matched 2 times"):  # overlapping matches count
        apply_edits("/f", b"aaa", [("aa", "b")])


def test_diff_applies_strictly():
    files = {"/opt/app/conf.py": b"A = 1\nB = 2\n"}
    apply_diff("/", DIFF, files.__getitem__, files.__setitem__, files.pop)
    assert files == {"/opt/app/conf.py": b"A = 1\nB = 3\n"}
    with pytest.raises(PatchError, match=r"/opt/app/conf.py: hunk 1 \(at line 1\) does not apply"):
        files = {"/opt/app/conf.py": b"A = 1\nB = 9\n"}
        apply_diff("/", DIFF, files.__getitem__, files.__setitem__, files.pop)
    assert diff_targets(DIFF, "/") == ["/opt/app/conf.py"]


def test_diff_new_file_and_no_newline():
    diff = (b"--- /dev/null\n+++ b/etc/new.conf\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n"
            b"--- a/etc/old.conf\n+++ b/etc/old.conf\n@@ -1 +1 @@\n-old\n\\ No newline at end of file\n+new\n")
    files = {"/etc/old.conf": b"old"}
    apply_diff("/", diff, files.__getitem__, files.__setitem__, files.pop)
    assert files == {"/etc/new.conf": b"x\ny", "/etc/old.conf": b"new\n"}


# --- verify.sh, run here with /bin/sh against real files ---------------------------------

def _verify(tmp_path: Path, *args: str) -> subprocess.CompletedProcess | None:
    script = tmp_path / "inkctl" / "verify.sh"
    script.parent.mkdir(exist_ok=True)
    script.write_text(VERIFY_SH)
    (script.parent / "patch_apply.py").write_bytes((Path(__file__).resolve().parents[2] / "inkctl/plan/image/patch_apply.py").read_bytes())
    if not args:
        return None
    return subprocess.run(["/bin/sh", str(script), *args], capture_output=True, text=True)


def test_verify_replace_and_mismatch(tmp_path):
    target, new = tmp_path / "moe.py", tmp_path / "replacement"
    target.write_bytes(ORIGINAL)
    new.write_bytes(b"patched\n")
    bad = _verify(tmp_path, "0", "replace", str(target), "0" * 64, sha(b"patched\n"), str(new))
    assert bad.returncode == 1
    assert f"inkctl-build: patch 0 (replace): {target}: sha256 mismatch before patching: expected {'0' * 64}, actual {sha(ORIGINAL)}" in bad.stderr
    assert target.read_bytes() == ORIGINAL  # nothing applied
    ok = _verify(tmp_path, "0", "replace", str(target), sha(ORIGINAL), sha(b"patched\n"), str(new))
    assert ok.returncode == 0, ok.stderr
    assert target.read_bytes() == b"patched\n"


def test_verify_edit_matching_twice_fails_naming_it(tmp_path):
    target, edits = tmp_path / "gate.py", tmp_path / "edits.json"
    target.write_bytes(b"if major in (10, 11):\n    pass\nif major in (10, 11):\n    pass\n")
    edits.write_text(json.dumps([{"old": "major in (10, 11)", "new": "major in (10, 11, 12)"}]))
    res = _verify(tmp_path, "1", "edit", str(target), sha(target.read_bytes()), "5" * 64, str(edits))
    assert res.returncode == 1
    assert f"{target}: edit 0 (old begins 'major in (10, 11)') matched 2 times; it must match exactly once" in res.stderr


def _bin_without_patch(tmp_path: Path) -> str:
    """A PATH with what verify.sh needs but no `patch`: the Python applier must be used."""
    import shutil

    d = tmp_path / "bin"
    d.mkdir()
    for tool in ("sh", "sha256sum", "cut", "cp", "dirname", "grep"):
        (d / tool).symlink_to(shutil.which(tool))
    # this very interpreter: `python3` on PATH may be a shim script (pyenv) needing tools left out here
    (d / "python3").symlink_to(os.path.realpath(sys.executable))
    return str(d)


@pytest.mark.parametrize("applier", ["gnu-patch", "python"])
def test_verify_diff(tmp_path, applier):
    import shutil

    if applier == "gnu-patch" and not shutil.which("patch"):
        pytest.skip("no GNU patch here")
    root = tmp_path / "root"
    (root / "opt" / "app").mkdir(parents=True)
    conf = root / "opt" / "app" / "conf.py"
    conf.write_bytes(b"A = 1\nB = 2\n")
    diff = tmp_path / "patch.diff"
    diff.write_bytes(DIFF)
    _verify(tmp_path)  # writes the scripts
    env = dict(os.environ, PATH=_bin_without_patch(tmp_path) if applier == "python" else os.environ["PATH"])
    args = ["/bin/sh", str(tmp_path / "inkctl" / "verify.sh"), "2", "diff", str(root), str(diff), str(conf)]
    bad = subprocess.run(args + [sha(b"A = 1\nB = 2\n"), "0" * 64], capture_output=True, text=True, env=env)
    assert bad.returncode == 1
    assert f"{conf}: sha256 mismatch after patching: expected {'0' * 64}, actual {sha(b'A = 1' + chr(10).encode() + b'B = 3' + chr(10).encode())}" in bad.stderr
    conf.write_bytes(b"A = 1\nB = 2\n")
    ok = subprocess.run(args + [sha(b"A = 1\nB = 2\n"), sha(b"A = 1\nB = 3\n")], capture_output=True, text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert conf.read_bytes() == b"A = 1\nB = 3\n"
    assert ("patch.diff" in ok.stderr or "patching file" in ok.stderr) == (applier == "gnu-patch")


# --- what the executor reads back from docker/podman ---------------------------------------

def test_inspect_of_docker_and_podman():
    from inkctl.execute.state.images import parse_inspect

    docker = json.dumps([{"Id": "sha256:" + "a" * 64, "RepoDigests": [], "Architecture": "amd64",
                          "Config": {"User": "", "Labels": {"inkctl.content": "x"}}}]).encode()
    podman = json.dumps([{"Id": "a" * 64, "RepoDigests": ["localhost/img@sha256:" + "b" * 64],
                          "Config": {"User": "vllm"}, "Labels": {"inkctl.content": "x"}}]).encode()
    d, p = parse_inspect("img", docker), parse_inspect("img", podman)
    assert d.id == p.id == "sha256:" + "a" * 64 and p.raw_id == "a" * 64  # podman's bare id is normalised
    assert d.labels == p.labels == {"inkctl.content": "x"} and p.user == "vllm"
    assert p.matches("sha256:" + "b" * 64) and p.matches("sha256:" + "a" * 64) and not d.matches("sha256:" + "b" * 64)


def test_build_failure_lines_show_our_verdict_not_exit_code_1():
    from inkctl.execute.state.images import NO_FILE, build_failure_lines

    out = ("Step 7/10 : RUN [...]\n ---> Running in a567\n\x1b[91minkctl-build: patch 0 (replace): /etc/x: sha256 "
           "mismatch before patching: expected 1111, actual 2d84\n\x1b[0mThe command '/bin/sh ...' returned a non-zero code: 1")
    assert build_failure_lines(out) == ["inkctl-build: patch 0 (replace): /etc/x: sha256 mismatch before patching: expected 1111, actual 2d84"]
    assert build_failure_lines("Step 1/2 : FROM x\nError: no such image\n") == ["Error: no such image"]
    assert NO_FILE.search("Error response from daemon: Could not find the file /etc/nonexist in container 8d6f")
    assert NO_FILE.search('Error: "/etc/nonexist" could not be found on container b8ea: no such file or directory')
