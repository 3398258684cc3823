"""`--slurm` and `export slurm` against a real Slurm (slurm-wlm 22.05: slurmctld, one slurmd per
test host in its namespace, munge; tests/cluster/slurm.py) that starts the fake engine's
containers on the hosts' own dockerd.

What is asserted happened for real: the jobs Slurm accepted or refused (`sbatch --test-only`,
`squeue`), the containers on the hosts (their runtime's `ps`), the answers from the head, the
text of the script, `scontrol show job` and the job's output.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import containers, finish, no_traceback

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
PARTITION_HOSTS = ("h1", "h2")
PODMAN_HOST = "h3"  # the cluster's podman host, alone in partition ink<K>pod
SECRET = "hf_slurm_e2e_Zq8vX3kP0wLr"


def _job_says(out: Path, line: str, within_s: float) -> bool:
    """The job's output file holds ``line`` within ``within_s`` seconds."""
    end = time.monotonic() + within_s
    while line not in (out.read_text(errors="replace") if out.exists() else ""):
        if time.monotonic() > end:
            return False
        time.sleep(0.3)
    return True


@pytest.fixture(scope="module")
def slurm(cluster):
    from tests.cluster import slurm as slurm_harness

    pod = f"ink{cluster.net_id}pod"  # a second partition: the podman host
    s = slurm_harness.start(cluster, PARTITION_HOSTS, extra={pod: [PODMAN_HOST]})
    s.pod = pod
    yield s
    for job in s.jobs():
        s.run(["scancel", job.split()[0]], check=False)


@pytest.fixture
def sl(inkctl, slurm, tmp_path):
    """inkctl with Slurm's client config, run in a job directory (shared: all hosts see one filesystem)."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()

    def run(*args, timeout: float = 180, env: dict | None = None):
        return inkctl(*args, "--job-dir", str(jobs), timeout=timeout, env={**slurm.env, **(env or {})}) \
            if args[0] in ("up",) else inkctl(*args, timeout=timeout, env={**slurm.env, **(env or {})})
    run.jobs = jobs
    run.start = lambda *args: inkctl.start(*args, env=slurm.env)
    return run


def _no_jobs(slurm, timeout=60):
    end = time.monotonic() + timeout
    while slurm.jobs() and time.monotonic() < end:
        time.sleep(0.3)
    return slurm.jobs()


def _scontrol_all(slurm) -> str:
    cp = slurm.run(["scontrol", "show", "job", "-dd"], check=False)
    return cp.stdout + cp.stderr


def test_test_only_accepts_every_exported_script(slurm, inkctl, tmp_path):
    """Every recipe that exports (bundled and e2e) gives a script `sbatch --test-only` accepts."""
    names = ["inkling-8x-h200-podman-vllm", "inkling-small-2x-rtxpro6000-sglang", "sglang-2node-podman",
             "vllm-native-2node", "vllm-ray-2node", "vllm-single-docker"]
    names += [str(p) for p in sorted((ROOT / "tests/e2e/recipes").glob("*.yaml"))
              if "engine" in yaml.safe_load(p.read_text())  # gateway files name recipes; each exports alone
              and yaml.safe_load(p.read_text())["hardware"]["nodes"] <= len(PARTITION_HOSTS)
              and yaml.safe_load(p.read_text()).get("patches", {}).get("mode") != "at_start"]
    checked = 0
    for n in names:
        out = tmp_path / f"{Path(n).stem}.sbatch"
        r = inkctl("export", "slurm", n, "--partition", slurm.partition, "--time", "30:00", "--out", out, env=slurm.env)
        assert r.rc == 0, r
        assert no_traceback(r.out)
        cp = slurm.run(["sbatch", "--test-only", str(out)], check=False)
        assert cp.returncode == 0 and "to start at" in cp.stderr, f"{n}: {cp.stderr}"
        checked += 1
    assert checked >= 10
    assert slurm.jobs() == []  # --test-only submits nothing


def test_too_many_nodes_is_refused_before_submitting(sl, slurm, recipe):
    rec = recipe("vllm-native-2", name="e2e-slurm-big", hardware={"nodes": 3}, engine={"args": {"tensor_parallel": 3}})
    r = sl("up", rec, "--slurm", "--partition", slurm.partition)
    assert r.rc == 2, r
    assert f"needs 3 nodes (hardware.nodes) but partition {slurm.partition} has 2" in r.stderr, r
    assert "nothing submitted" in r.stderr
    assert no_traceback(r.out)
    assert slurm.jobs() == []
    assert list(sl.jobs.iterdir()) == []  # refused before even the script is written


def test_two_node_job_serves_answers_and_down_leaves_nothing(sl, slurm, cluster, recipe):
    rec = recipe("vllm-native-2", name="e2e-slurm-serve",
                 secrets={"HF_TOKEN": {"env": "E2E_SLURM_TOKEN"}},
                 container={"env": {"FAKE_LOG_ENV": "1"}})
    up = sl("up", rec, "--slurm", "--partition", slurm.partition, "--time", "20:00",
            env={"E2E_SLURM_TOKEN": SECRET})
    try:
        assert up.rc == 0, up
        assert no_traceback(up.out)
        job = next(w for w in up.stdout.split() if w.isdigit())
        nodes = [slurm.node(h) for h in PARTITION_HOSTS]
        assert f"job {job} runs on {', '.join(nodes)}; head {nodes[0]}" in up.stdout, up
        assert "is up: http://10.231." in up.stdout and "first request TTFT" in up.stdout
        # it serves: a completion through the head, from here
        url = f"http://{cluster.host('h1').address}:18000"
        req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(
            {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=30) as resp:
            assert json.load(resp)["choices"][0]["message"]["content"]
        for h in PARTITION_HOSTS:
            assert containers(cluster, h, "e2e-slurm-serve") == [f"inkctl-e2e-slurm-serve-r{PARTITION_HOSTS.index(h)} running"]
        # the secret reached the engine, and nowhere it should not be
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url + "/inkctl/fake/argv", timeout=10) as resp:
            assert json.load(resp)["env"]["HF_TOKEN"] == SECRET
        script = Path(sl.jobs, "inkctl-e2e-slurm-serve.sbatch").read_text()
        assert SECRET not in script and "HF_TOKEN" in script.split("#SBATCH")[0]  # named in the header
        assert SECRET not in _scontrol_all(slurm)
        # the environment Slurm stored for the job (what `scontrol show job` would dump) has no secret
        stored = [p for p in Path(slurm.dir, "ctld").rglob(f"job.{job}/*") if p.is_file()]
        assert any(p.name == "environ" or p.name == "environment" for p in stored), stored
        assert all(SECRET.encode() not in p.read_bytes() for p in stored)
        assert SECRET not in slurm.run(["scontrol", "write", "batch_script", job, "-"]).stdout
        assert SECRET not in up.out
        job_dir = Path(sl.jobs, f"inkctl-e2e-slurm-serve-{job}")
        leftover = [p for p in [*job_dir.rglob("*"), *sl.jobs.glob(".*")]
                    if p.is_file() and SECRET in p.read_text(errors="replace")]
        assert leftover == [], leftover  # env files are removed once the containers read them
        # the job's own poll of the head says ready too: on its own clock (its interval, curl's timeout),
        # so it may come a little after `up`'s own check returned
        out = Path(sl.jobs, f"inkctl-e2e-slurm-serve-{job}.out")
        assert _job_says(out, "inkctl: ready", within_s=60), out.read_text()

        again = sl("up", rec, "--slurm", "--partition", slurm.partition, env={"E2E_SLURM_TOKEN": SECRET})
        assert again.rc == 0 and f"is already up: {url}/health (job {job} on" in again.stdout, again
        other = sl("up", rec, "--slurm", "--set", "container.env.OTHER=1", env={"E2E_SLURM_TOKEN": SECRET})
        assert other.rc == 2 and f"job {job} (running) already runs e2e-slurm-serve: another version" in other.stderr, other
        assert [j.split()[0] for j in slurm.jobs()] == [job]  # nothing else submitted
        st = sl("status", rec, "--slurm")
        assert st.rc == 0, st
        assert f"job {job}: running on {', '.join(nodes)}" in st.stdout and "rank 1 " + nodes[1] + ": running" in st.stdout
        logs = sl("logs", rec, "--slurm", "--rank", "1", env={"E2E_SLURM_TOKEN": SECRET})
        assert logs.rc == 0, logs
        assert "1: " in logs.stdout and "0: " not in logs.stdout.replace("10: ", "")
        assert SECRET not in logs.out and "HF_TOKEN=***" in logs.stdout  # the engine dumps its env; inkctl masks it
    finally:
        down = sl("down", rec, "--slurm")
    assert down.rc == 0, down
    assert f"job {job} cancelled" in down.stdout and "every rank removed its container" in down.stdout
    assert _no_jobs(slurm) == []
    for h in PARTITION_HOSTS:
        assert containers(cluster, h, "e2e-slurm-serve") == []
    again = sl("status", rec, "--slurm")
    assert again.rc == 1 and "no Slurm job" in again.stdout


def test_crashing_rank_fails_the_job_and_is_named(sl, slurm, cluster, recipe):
    rec = recipe("vllm-native-2", name="e2e-slurm-crash",
                 container={"env": {"FAKE_READY_AFTER": "20", "FAKE_CRASH_AFTER": "${CRASH_AFTER}", "FAKE_EXIT_CODE": "3"}})
    slurm.node_env("h1", {"CRASH_AFTER": "600"})
    slurm.node_env("h2", {"CRASH_AFTER": "1"})
    try:
        up = sl("up", rec, "--slurm", "--partition", slurm.partition)
    finally:
        slurm.node_env("h1", None)
        slurm.node_env("h2", None)
    assert up.rc == 1, up
    assert no_traceback(up.out)
    assert f"rank 1 on {slurm.node('h2')} failed first: the engine exited with code 3" in up.stderr, up
    job = up.stdout.split("submitted job ", 1)[1].split()[0]
    assert f"cancelling job {job} ..." in up.stdout and "every rank removed its container" in up.stdout, up
    assert _no_jobs(slurm) == []  # not left running half-up
    for h in PARTITION_HOSTS:
        assert containers(cluster, h, "e2e-slurm-crash") == []


def test_scancel_alone_leaves_nothing(sl, slurm, cluster, recipe, tmp_path):
    """The script by itself (sbatch, no inkctl in the loop): ready, then scancel removes every container."""
    rec = recipe("sglang-2", name="e2e-slurm-plain")
    script = tmp_path / "plain.sbatch"
    r = sl("export", "slurm", rec, "--out", script, "--partition", slurm.partition)
    assert r.rc == 0, r
    job = slurm.run(["sbatch", "--parsable", "--chdir", str(sl.jobs), str(script)]).stdout.strip()
    out = Path(sl.jobs, f"inkctl-e2e-slurm-plain-{job}.out")
    assert _job_says(out, "inkctl: ready", within_s=90), out.read_text() if out.exists() else "(no output yet)"
    assert [c.split()[1] for h in PARTITION_HOSTS for c in containers(cluster, h, "e2e-slurm-plain")] == ["running"] * 2
    watch = sl.start("watch", rec, "--slurm", "--interval", "0.5")
    first = watch.stdout.readline()
    assert f"watching job {job} on {slurm.node('h1')}, {slurm.node('h2')}" in first, first
    slurm.run(["scancel", job])
    w_out, w_err = finish(watch, timeout=60)
    assert watch.returncode == 1 and f"job {job} is cancelled" in w_err, (w_out, w_err)
    assert _no_jobs(slurm) == []
    for h in PARTITION_HOSTS:
        assert containers(cluster, h, "e2e-slurm-plain") == []
    status = sorted(p.read_text().split()[1] for p in Path(sl.jobs, f"inkctl-e2e-slurm-plain-{job}", "status").glob("rank*"))
    assert status == ["stopped", "stopped"]
    assert os.path.exists(out)


def test_weights_on_a_partition_then_the_job_asserts_the_locks_pins(sl, slurm, cluster, recipe, inkctl, tmp_path):
    """`weights --partition` fills every node of the partition (h1, h2; not h4); the job then checks
    the lock's image and every pinned model file on each node before its engine starts."""
    import shutil

    from tests.cluster import net
    from tests.cluster.hub import Hub, make_model

    repo = "test/weights-model"
    caches = {h: Path(cluster.host(h).hf_dir) / "hub" for h in ("h1", "h2", "h4")}
    for c in caches.values():
        shutil.rmtree(c, ignore_errors=True)
    base = {h["name"]: h for h in yaml.safe_load(Path(cluster.inventory).read_text())["hosts"]}
    inv = tmp_path / "nodes.yaml"  # per-node settings by Slurm node name
    inv.write_text(yaml.safe_dump({"hosts": [dict(base[h], name=slurm.node(h)) for h in PARTITION_HOSTS]}))
    rec = recipe("weights", name="e2e-slurm-weights")
    env = {"E2E_HF_TOKEN": "hf_e2e_slurm_weights_token", **slurm.env}
    with Hub(net.gateway(cluster.net_id)) as hub:
        hub.add(make_model(str(tmp_path / "hub"), repo, shards=2, shard_mib=1))
        env["HF_ENDPOINT"] = hub.url
        lock = inkctl("lock", rec, "--hosts", inv, env=env)
        assert lock.rc == 0, lock
        w = inkctl("weights", rec, "--partition", slurm.partition, "--hosts", inv, env=env, timeout=180)
    assert w.rc == 0, w
    assert no_traceback(w.out)
    pinned = json.loads(rec.with_name(rec.stem + ".lock.json").read_text())
    files = {f["path"]: f["size"] for f in pinned["model"]["files"]}
    for h in PARTITION_HOSTS:
        snap = next((caches[h] / ("models--" + repo.replace("/", "--")) / "snapshots").iterdir())
        assert {p: (snap / p).stat().st_size for p in files} == files
    assert not caches["h4"].exists()  # not a node of the partition

    # the job: each node's own HF_HOME (a site's per-node setting), the pins checked there
    for h in PARTITION_HOSTS:
        slurm.node_env(h, {"HF_HOME": cluster.host(h).hf_dir})
    try:
        up = sl("up", rec, "--slurm", "--partition", slurm.partition, env=env)
        assert up.rc == 0, up
        script = Path(sl.jobs, "inkctl-e2e-slurm-weights.sbatch").read_text()
        assert script.count("      check_size ") == 2 * len(files) and script.count("      check_image ") == 2
        assert sl("down", rec, "--slurm").rc == 0
        snap = next((caches["h2"] / ("models--" + repo.replace("/", "--")) / "snapshots").iterdir())
        shard = next(p for p in files if p.endswith(".safetensors"))
        (snap / shard).resolve().unlink()
        bad = sl("up", rec, "--slurm", "--partition", slurm.partition, env=env)
    finally:
        for h in PARTITION_HOSTS:
            slurm.node_env(h, None)
        sl("down", rec, "--slurm")
    assert bad.rc == 1, bad
    assert f"rank 1 on {slurm.node('h2')} failed first: pinned model file" in bad.stderr and shard in bad.stderr, bad
    assert _no_jobs(slurm) == []
    for h in PARTITION_HOSTS:
        assert containers(cluster, h, "e2e-slurm-weights") == []


def test_hotfix_runs_in_the_job_and_an_edited_script_is_refused(sl, slurm, cluster, tmp_path):
    """The hotfix travels in the script, is checked against its pin when the job writes it, and runs
    in the container before the engine; a script whose hotfix was edited stops before any rank starts."""
    import hashlib
    import shutil

    body = (ROOT / "tests/e2e/patches/hotfix-marker.py").read_bytes()
    (tmp_path / "patches").mkdir()
    shutil.copy(ROOT / "tests/e2e/patches/hotfix-marker.py", tmp_path / "patches")
    doc = yaml.safe_load((ROOT / "tests/e2e/recipes/build-hotfix.yaml").read_text())
    doc["name"] = "e2e-slurm-hotfix"
    doc["patches"]["hotfixes"][0]["sha256"] = hashlib.sha256(body).hexdigest()
    rec = tmp_path / "hotfix.yaml"
    rec.write_text(yaml.safe_dump(doc))
    up = sl("up", rec, "--slurm", "--partition", slurm.partition)
    try:
        assert up.rc == 0, up
        marker = cluster.docker("h1", "exec", "inkctl-e2e-slurm-hotfix-r0", "cat", "/tmp/inkctl-hotfix-marker")
        assert marker.returncode == 0 and marker.stdout.startswith("hotfix ran at"), marker
    finally:
        assert sl("down", rec, "--slurm").rc == 0

    script = tmp_path / "edited.sbatch"
    assert sl("export", "slurm", rec, "--partition", slurm.partition, "--out", script).rc == 0
    text = script.read_text()
    assert 'print("hotfix-marker: marker written")' in text
    script.write_text(text.replace('print("hotfix-marker: marker written")', 'print("something else")'))
    job = slurm.run(["sbatch", "--parsable", "--chdir", str(sl.jobs), str(script)]).stdout.strip()
    assert _no_jobs(slurm) == []
    out = Path(sl.jobs, f"inkctl-e2e-slurm-hotfix-{job}.out").read_text()
    assert "hotfix-marker.py: sha256 is" in out and f"the pin is {hashlib.sha256(body).hexdigest()}" in out, out
    assert "started" not in out  # no rank ran
    assert containers(cluster, "h1", "e2e-slurm-hotfix") == []


def test_ctrl_c_during_the_boot_cancels_the_job(sl, slurm, cluster, recipe):
    import signal

    rec = recipe("sglang-2", name="e2e-slurm-ctrlc", container={"env": {"FAKE_READY_AFTER": "60"}})
    p = sl.start("up", rec, "--slurm", "--partition", slurm.partition, "--job-dir", str(sl.jobs))
    seen = []
    while True:
        line = p.stdout.readline()
        assert line, f"up ended early: {seen} {p.stderr.read()}"
        seen.append(line)
        if "runs on" in line:
            break
    end = time.monotonic() + 30  # the containers are up (booting) before the interrupt
    while time.monotonic() < end and len(containers(cluster, "h1", "e2e-slurm-ctrlc") + containers(cluster, "h2", "e2e-slurm-ctrlc")) < 2:
        time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = finish(p, timeout=90)
    assert p.returncode == 130, (out, err)
    assert "interrupted: job" in err and "was cancelled" in err and "every rank removed its container" in out, (out, err)
    assert _no_jobs(slurm) == []
    for h in PARTITION_HOSTS:
        assert containers(cluster, h, "e2e-slurm-ctrlc") == []


def _batch_script(slurm, job: str) -> str:
    """The script Slurm stored for the job (what sbatch really submitted)."""
    return slurm.run(["scontrol", "write", "batch_script", job, "-"]).stdout


def _export(inkctl, slurm, rec, out: Path, *args) -> str:
    r = inkctl("export", "slurm", rec, "--out", out, *args, env=slurm.env)
    assert r.rc == 0, r
    return out.read_text()


def test_up_takes_exports_options_and_submits_the_script_export_writes(sl, slurm, cluster, recipe, inkctl, tmp_path):
    """`up --slurm --container docker --gpus-per-node 2` on a podman recipe: the ranks run on the
    nodes' docker, the job asks for 2 GPUs per node, and the batch script Slurm stored for the job
    is exactly the one `export slurm` writes with the same options."""
    rec = recipe("vllm-native-2", name="e2e-slurm-opts", container={"runtime": "podman", "gpus": "cdi"})
    opts = ["--partition", slurm.partition, "--time", "20:00", "--container", "docker", "--gpus-per-node", "2"]
    up = sl("up", rec, "--slurm", *opts)
    try:
        assert up.rc == 0, up
        job = next(w for w in up.stdout.split() if w.isdigit())
        stored = _batch_script(slurm, job)
        exported = _export(inkctl, slurm, rec, tmp_path / "opts.sbatch", *opts, "--job-dir", str(sl.jobs))
        assert stored == exported
        assert "docker run" in stored and "podman" not in stored
        assert "#SBATCH --gpus-per-node=2" in stored
        shown = slurm.run(["scontrol", "show", "job", job]).stdout
        assert "gres:gpu:2" in shown or "gres/gpu:2" in shown, shown
        for h in PARTITION_HOSTS:
            assert containers(cluster, h, "e2e-slurm-opts") == [f"inkctl-e2e-slurm-opts-r{PARTITION_HOSTS.index(h)} running"]
    finally:
        down = sl("down", rec, "--slurm")
    assert down.rc == 0, down
    assert _no_jobs(slurm) == []


def test_up_with_pyxis_submits_exports_pyxis_script(sl, slurm, recipe, inkctl, tmp_path):
    """--container pyxis picks pyxis for up as for export (this Slurm has no pyxis plugin, so the
    job fails at srun: up names it and cancels; the stored script is still there to compare)."""
    rec = recipe("sglang-2", name="e2e-slurm-pyxis")
    opts = ["--partition", slurm.partition, "--container", "pyxis", "--gpus-per-node", "0"]
    up = sl("up", rec, "--slurm", *opts, timeout=120)
    assert up.rc == 1, up
    assert no_traceback(up.out)
    job = next(w for w in up.stdout.split() if w.isdigit())
    stored = _batch_script(slurm, job)
    assert stored == _export(inkctl, slurm, rec, tmp_path / "pyxis.sbatch", *opts, "--job-dir", str(sl.jobs))
    assert "--container-image=inkctl-fake-engine:latest" in stored and "--gpus-per-node" not in stored
    assert f"job {job}" in up.stderr, up
    assert _no_jobs(slurm) == []


def test_a_job_left_pending_is_cancelled_with_slurms_reason(sl, slurm, recipe, tmp_path):
    """Both nodes held by another job: up waits --pending-timeout, then cancels its job and says
    why (squeue's reason) and what to do; only the other job is left."""
    blocker = slurm.run(["sbatch", "--parsable", "-p", slurm.partition, "--nodes", "2", "--exclusive",
                         "--job-name", "e2e-blocker", "--chdir", str(tmp_path), "-o", "/dev/null",
                         "--wrap", "sleep 600"]).stdout.strip()
    try:
        end = time.monotonic() + 60
        while f"{blocker} RUNNING" not in slurm.jobs() and time.monotonic() < end:
            time.sleep(0.3)
        assert f"{blocker} RUNNING" in slurm.jobs()
        rec = recipe("vllm-native-2", name="e2e-slurm-pending")
        t0 = time.monotonic()
        up = sl("up", rec, "--slurm", "--partition", slurm.partition, "--pending-timeout", "4")
        took = time.monotonic() - t0
        assert up.rc == 1, up
        assert no_traceback(up.out)
        job = next(w for w in up.stdout.split() if w.isdigit() and w != blocker)
        said = " ".join(up.stderr.split())
        assert f"job {job} still pending after 4 s (reason Resources): the nodes it needs are busy" in said, up
        assert f"squeue -p {slurm.partition}" in said, up
        assert all(len(ln) <= 80 for ln in up.stderr.splitlines()), up
        assert f"job {job} is cancelled; it never ran" in up.stdout, up
        assert took < 60, took
        assert slurm.jobs() == [f"{blocker} RUNNING"]
        gone = slurm.run(["scontrol", "show", "job", job]).stdout
        assert "JobState=CANCELLED" in gone, gone
    finally:
        slurm.run(["scancel", blocker], check=False)
    assert _no_jobs(slurm) == []


def test_weights_on_a_running_jobs_nodes(slurm, cluster, recipe, inkctl, tmp_path):
    """`weights --slurm-job JOBID` fills the nodes the job holds (its allocation: h1 only here),
    and inside an allocation ($SLURM_JOB_NODELIST) the same without the option."""
    import shutil

    from tests.cluster import net
    from tests.cluster.hub import Hub, make_model

    repo = "test/weights-model"
    caches = {h: Path(cluster.host(h).hf_dir) / "hub" for h in PARTITION_HOSTS}
    for c in caches.values():
        shutil.rmtree(c, ignore_errors=True)
    base = {h["name"]: h for h in yaml.safe_load(Path(cluster.inventory).read_text())["hosts"]}
    inv = tmp_path / "nodes.yaml"
    inv.write_text(yaml.safe_dump({"hosts": [dict(base[h], name=slurm.node(h)) for h in PARTITION_HOSTS]}))
    rec = recipe("weights", name="e2e-slurm-weights-job")
    env = {"E2E_HF_TOKEN": "hf_e2e_slurm_weights_token", **slurm.env}
    alloc = slurm.run(["sbatch", "--parsable", "-p", slurm.partition, "--nodes", "1", "-w", slurm.node("h1"),
                       "--job-name", "e2e-alloc", "--chdir", str(tmp_path), "-o", "/dev/null",
                       "--wrap", "sleep 600"]).stdout.strip()
    try:
        end = time.monotonic() + 60
        while f"{alloc} RUNNING" not in slurm.jobs() and time.monotonic() < end:
            time.sleep(0.3)
        with Hub(net.gateway(cluster.net_id)) as hub:
            hub.add(make_model(str(tmp_path / "hub"), repo, shards=2, shard_mib=1))
            env["HF_ENDPOINT"] = hub.url
            assert inkctl("lock", rec, "--hosts", inv, env=env).rc == 0
            w = inkctl("weights", rec, "--slurm-job", alloc, "--hosts", inv, env=env, timeout=180)
            assert w.rc == 0, w
            assert no_traceback(w.out)
            pinned = json.loads(rec.with_name(rec.stem + ".lock.json").read_text())
            files = {f["path"]: f["size"] for f in pinned["model"]["files"]}
            snap = next((caches["h1"] / ("models--" + repo.replace("/", "--")) / "snapshots").iterdir())
            assert {p: (snap / p).stat().st_size for p in files} == files
            assert not caches["h2"].exists()  # not a node of the job
            # inside the allocation: its $SLURM_JOB_NODELIST, no option (--hosts: per-node settings)
            shutil.rmtree(caches["h1"])
            inside = inkctl("weights", rec, "--hosts", inv, env={**env, "SLURM_JOB_NODELIST": slurm.node("h1")},
                            timeout=180)
            assert inside.rc == 0, inside
            assert {p: (snap / p).stat().st_size for p in files} == files
            assert not caches["h2"].exists()
        # a job that holds no nodes: a clear error
        slurm.run(["scancel", alloc])
        _no_jobs(slurm)
        gone = inkctl("weights", rec, "--slurm-job", alloc, env=env)
        assert gone.rc == 2 and f"job {alloc} is cancelled: it holds no nodes now" in gone.stderr, gone
        assert no_traceback(gone.out)
    finally:
        slurm.run(["scancel", alloc], check=False)


def test_podman_node_serves_under_slurm(sl, slurm, cluster, recipe):
    """A podman host under Slurm (h3, partition ink<K>pod): `up --slurm --container podman` on a
    docker recipe starts the rank with the node's podman (GPUs through CDI), serves, and
    `down --slurm` leaves nothing there."""
    rec = recipe("single", name="e2e-slurm-podman")
    up = sl("up", rec, "--slurm", "--partition", slurm.pod, "--container", "podman", "--time", "10:00")
    try:
        assert up.rc == 0, up
        assert no_traceback(up.out)
        assert f"runs on {slurm.node(PODMAN_HOST)}" in up.stdout, up
        job = next(w for w in up.stdout.split() if w.isdigit())
        stored = _batch_script(slurm, job)
        assert "podman run" in stored and "nvidia.com/gpu=all" in stored and "docker" not in stored
        assert containers(cluster, PODMAN_HOST, "e2e-slurm-podman") == ["inkctl-e2e-slurm-podman-r0 running"]
    finally:
        down = sl("down", rec, "--slurm")
    assert down.rc == 0, down
    assert _no_jobs(slurm) == []
    assert containers(cluster, PODMAN_HOST, "e2e-slurm-podman") == []


def test_up_shows_each_ranks_boot_phases_from_the_jobs_output(sl, slurm, recipe, tmp_path):
    """The ranks' lines in the job's output ('R: ', srun --label) give the boot table `up` gives
    over SSH: each rank's phases as the fake prints them (vLLM's format strings), inkctl's
    milestones, and the readiness completion's first token after the fake's FAKE_TTFT."""
    env = {"FAKE_WEIGHTS_S": "1.5", "FAKE_GRAPHS_S": "1", "FAKE_TTFT": "1.5"}
    rec = recipe("vllm-native-2", name="e2e-slurm-boot", container={"env": env})
    res, runs = tmp_path / "res", tmp_path / "runs"
    nodes = [slurm.node(h) for h in PARTITION_HOSTS]
    up = sl("up", rec, "--slurm", "--partition", slurm.partition, "--time", "10:00", "--results-dir", str(res))
    try:
        assert up.rc == 0, up
        table = up.stdout[up.stdout.index("boot phase (s)"):].split("\n  smoke:")[0]
        assert f"r0 {nodes[0]}"[:11] in table and f"r1 {nodes[1]}"[:11] in table, table
        for label in ("container started", "weights loaded", "CUDA graphs", "health answering", "first token"):
            assert label in table, table
        assert all(len(line) <= 80 for line in table.splitlines()), table
    finally:
        assert sl("down", rec, "--slurm").rc == 0
    (saved,) = sorted((res / "boots" / "e2e-slurm-boot").glob("*.json"))
    first = json.loads(saved.read_text())
    assert [(x["host"], x["rank"]) for x in first["ranks"]] == [(nodes[0], 0), (nodes[1], 1)], first
    for x in first["ranks"]:
        assert 1.5 <= x["seconds"]["weights"] <= 2.0 and x["seconds"]["graphs"] == 1.0, x

    again = sl("up", rec, "--slurm", "--partition", slurm.partition, "--time", "10:00", "--results-dir", str(res),
               "-o", "json", env={"INKCTL_RUNS_DIR": str(runs)})
    try:
        assert again.rc == 0, again
        (ev,) = [json.loads(ln) for ln in again.stdout.splitlines() if '"boot_phases"' in ln]
        m = ev["record"]["inkctl"]
        assert 0 <= m["container"] <= m["port_open"] <= m["health"] < m["first_token"], m
        assert 1.5 <= m["first_token"] - m["health"] <= 1.5 + 0.75, m
        assert m["health"] >= 1.5 + 1.0  # the boot waited for the phases the ranks reported
        assert ev["previous"] == f"e2e-slurm-boot/{saved.stem}", ev
        (recorded,) = [json.loads(ln) for d in runs.iterdir() for ln in (d / "events.jsonl").read_text().splitlines()
                       if '"boot_phases"' in ln]
        assert recorded["record"]["ranks"] == ev["record"]["ranks"]
    finally:
        assert sl("down", rec, "--slurm").rc == 0
    cmp = sl("results", "--boots", "--results-dir", str(res), *sorted(str(p) for p in saved.parent.glob("*.json")))
    assert cmp.rc == 0 and "weights loaded" in cmp.stdout and "first token" in cmp.stdout, cmp


def test_up_slurm_guards_the_endpoint_with_the_recipes_api_key(sl, slurm, cluster, recipe):
    """Issue 29: the job's engine gets the key the recipe names (read where the recipe says:
    env E2E_SLURM_API_SRC, not $API_KEY), up --slurm answers with it and proves 401 without it."""
    key = "sk-slurm-e2e-7Hq2mN4pX9vB1c"
    rec = recipe("vllm-native-2", name="e2e-slurm-key", secrets={"API_KEY": {"env": "E2E_SLURM_API_SRC"}},
                 api_key="API_KEY")
    up = sl("up", rec, "--slurm", "--partition", slurm.partition, "--time", "20:00", env={"E2E_SLURM_API_SRC": key})
    try:
        assert up.rc == 0, up
        assert "a request without it gets 401" in up.out and key not in up.out
        url = f"http://{cluster.host('h1').address}:18000"
        body = json.dumps({"model": "fake", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode()
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        for headers, want in (({}, 401), ({"Authorization": f"Bearer {key}"}, 200)):
            req = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json", **headers})
            try:
                with opener.open(req, timeout=30) as resp:
                    got = resp.status
            except urllib.error.HTTPError as e:
                got = e.code
            assert got == want
        script = Path(sl.jobs, "inkctl-e2e-slurm-key.sbatch").read_text()
        assert key not in script and "VLLM_API_KEY=API_KEY:env:E2E_SLURM_API_SRC" in script
    finally:
        down = sl("down", rec, "--slurm")
    assert down.rc == 0, down
