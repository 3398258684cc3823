"""Shared fixtures of the end-to-end tests: the real ``inkctl`` CLI against the test cluster.

- ``cluster``: the session's test cluster (``tests.cluster``), 4 hosts, h3 on podman; reused
  when one of that shape is already up.
- ``home``: a HOME per test with ~/.ssh/config and ~/.ssh/known_hosts made from the cluster's
  files, so host-key tests can change them freely.
- ``inkctl``: runs ``python -m inkctl ...`` as a subprocess in that HOME -> Ran(rc, stdout, stderr).
- ``inventory`` / ``recipe``: write an inventory of chosen hosts, or a variant of a test recipe.

Every test's deployments are removed from every host afterwards, whatever the test did.
"""

from __future__ import annotations

import copy
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RECIPES = Path(__file__).resolve().parent / "recipes"
HOSTS = 4


@pytest.fixture(scope="session")
def cluster():
    if os.geteuid() != 0:
        pytest.skip("the test cluster needs root (network namespaces, dockerd)")
    from tests.cluster import Cluster

    # INKCTL_E2E_NET_ID=K runs on a cluster of its own beside the default one (a shared machine)
    return Cluster.up(HOSTS, net_id=int(os.environ.get("INKCTL_E2E_NET_ID", "0")))


@dataclass
class Ran:
    rc: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def out(self) -> str:
        return self.stdout + self.stderr

    def __str__(self) -> str:  # what pytest shows when an assert on it fails
        return f"rc={self.rc} in {self.seconds:.1f} s\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


@pytest.fixture
def home(tmp_path, cluster):
    h = tmp_path / "home"
    ssh = h / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    shutil.copy(cluster.known_hosts, ssh / "known_hosts")
    lines = []
    for host in cluster.hosts:
        lines += [f"Host {host.name}", f"  HostName {host.address}", "  User root", f"  IdentityFile {cluster.identity_file}", ""]
    (ssh / "config").write_text("\n".join(lines))
    return h


@pytest.fixture
def inkctl(home):
    """inkctl(*args) -> Ran; inkctl.start(*args) -> a running Popen (for signals)."""
    def environ(env: dict | None) -> dict:
        e = {k: v for k, v in os.environ.items() if not k.startswith(("SSH_", "INKCTL_", "E2E_"))}
        e.update(HOME=str(home), PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                 COLUMNS="200", NO_COLOR="1", **(env or {}))
        return e

    def run(*args, timeout: float = 120, env: dict | None = None) -> Ran:
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "inkctl", *map(str, args)], cwd=ROOT, env=environ(env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:  # show where it hung, then stop it the way a person would
            p.send_signal(signal.SIGINT)
            try:
                out, err = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            raise AssertionError(f"inkctl {' '.join(map(str, args))} still running after {timeout} s:\n{out}\n{err}")
        return Ran(p.returncode, out, err, time.monotonic() - t0)

    def start(*args, env: dict | None = None) -> subprocess.Popen:
        # a test that must stop it and cannot sends SIGABRT: the fault handler prints where each thread was
        env = {"PYTHONFAULTHANDLER": "1", **(env or {})}
        return subprocess.Popen([sys.executable, "-m", "inkctl", *map(str, args)], cwd=ROOT, env=environ(env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    run.start = start
    return run


@pytest.fixture
def inventory(tmp_path, cluster):
    """inventory("h1", "h2", vars={"h2": {"X": "1"}}) -> path of an inventory of those hosts in that order."""
    base = {h["name"]: h for h in yaml.safe_load(Path(cluster.inventory).read_text())["hosts"]}

    def make(*names: str, vars: dict | None = None, **fields) -> Path:
        hosts = []
        for n in names:
            h = copy.deepcopy(base[n])
            h.setdefault("vars", {}).update((vars or {}).get(n, {}))
            h.update(fields.get(n, {}))
            hosts.append(h)
        path = tmp_path / f"inventory-{'-'.join(names)}-{len(list(tmp_path.glob('inventory-*')))}.yaml"
        path.write_text(yaml.safe_dump({"hosts": hosts}, sort_keys=False))
        return path

    return make


def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
    return out


@pytest.fixture
def recipe(tmp_path):
    """recipe("single", name="x", container={"env": {...}}) -> path of a variant of tests/e2e/recipes/single.yaml."""
    def make(base: str, **changes) -> Path:
        doc = _merge(yaml.safe_load((RECIPES / f"{base}.yaml").read_text()), changes)
        path = tmp_path / f"{doc['name']}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    return make


def containers(cluster, host: str, deployment: str | None = None) -> list[str]:
    """'name state' of inkctl's containers on a host (of one deployment, or all)."""
    label = f"label=inkctl.deployment={deployment}" if deployment else "label=inkctl.deployment"
    r = cluster.docker(host, "ps", "--all", "--filter", label, "--format", "{{.Names}} {{.State}}", check=True)
    from inkctl.execute.state.deployed import normal_state

    out = []
    for line in r.stdout.splitlines():
        if line.strip():
            name, _, state = line.partition(" ")
            out.append(f"{name} {normal_state(state)}")
    return out


@pytest.fixture(autouse=True)
def _clean_hosts(request):
    """After each test: no inkctl container left on any host, and all links up."""
    yield
    if "cluster" not in request.fixturenames:
        return
    cluster = request.getfixturevalue("cluster")
    for h in cluster.hosts:
        cluster.heal(h.name)
        r = cluster.docker(h.name, "ps", "--all", "--quiet", "--filter", "label=inkctl.deployment")
        ids = r.stdout.split()
        if ids:
            cluster.docker(h.name, "rm", "--force", *ids)


def unfold(text: str) -> str:
    """Text as the shell reads it: a line that ends with ` \\` continues on the next (how inkctl
    folds a command in a message wider than the screen, so that it pastes as one command)."""
    import re

    return re.sub(r" \\\n\s*", " ", text)


def said(text: str) -> str:
    """What a message says, whatever the width it was folded to: folded commands joined, every
    run of whitespace one space (piped output folds at $COLUMNS, else 80: tests/unit/test_piped_width.py)."""
    return " ".join(unfold(text).split())


def no_traceback(text: str) -> bool:
    """inkctl printed no Python traceback of its own. Engine logs that inkctl quotes (lines
    behind '|') may hold the engine's tracebacks: those are the user's evidence, not a bug."""
    own = [line for line in text.splitlines() if not line.lstrip().startswith("|")]
    return not any(line.lstrip().startswith("Traceback") for line in own) and "internal error" not in text


def finish(p: subprocess.Popen, timeout: float = 60) -> tuple[str, str]:
    """Wait for an inkctl started with ``inkctl.start``; if it hangs, fail with its thread stacks."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER prints every thread's stack
        raise AssertionError("inkctl did not end:\n" + p.communicate()[1][-8000:])
    finally:
        if p.poll() is None:
            p.kill()
