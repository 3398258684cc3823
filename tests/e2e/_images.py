"""Helpers of the image tests (test_build.py, test_hotfix.py), on top of conftest's fixtures:
a scratch copy of a tests/e2e/recipes/build-*.yaml recipe with its patches (so lock files never
land in the repository), and commands run inside images on a host."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import yaml

E2E = Path(__file__).resolve().parent
CONTROL_SOCKET = "unix:///var/run/docker.sock"


class Workspace:
    """tmp/recipes/<recipe> and tmp/patches/* (the recipe's root is tmp)."""

    def __init__(self, tmp: Path, recipe: str, patches: tuple[str, ...] = ()):
        self.tmp = tmp
        (tmp / "recipes").mkdir(exist_ok=True)
        (tmp / "patches").mkdir(exist_ok=True)
        self.recipe = tmp / "recipes" / recipe
        shutil.copy(E2E / "recipes" / recipe, self.recipe)
        for p in patches:
            shutil.copy(E2E / "patches" / p, tmp / "patches" / p)

    @property
    def lock(self) -> Path:
        return self.recipe.with_name(self.recipe.stem + ".lock.json")

    def patch(self, name: str) -> Path:
        return self.tmp / "patches" / name

    def edit(self, fn) -> None:
        doc = yaml.safe_load(self.recipe.read_text())
        fn(doc)
        self.recipe.write_text(yaml.safe_dump(doc, sort_keys=False))


def ok_json(ran) -> dict:
    """The JSON a successful ``inkctl ... --output json`` printed."""
    assert ran.rc == 0, ran
    return json.loads(ran.stdout)


def in_image(cluster, host: str, image: str, *argv: str) -> str:
    """Run argv in a throwaway container of image on host; its stdout."""
    res = cluster.docker(host, "run", "--rm", "--network", "none", "--entrypoint", argv[0], image, *argv[1:])
    assert res.returncode == 0, f"{host}: {argv} in {image}: {res.stderr}"
    return res.stdout


def remove_image(cluster, host: str, tag: str) -> None:
    cluster.docker(host, "image", "rm", "--force", tag)


def local_docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "-H", CONTROL_SOCKET, *args], capture_output=True, text=True, timeout=300)


class Built:
    """Tags a test builds, removed from the hosts (and the local daemon) when it ends."""

    def __init__(self, cluster):
        self.cluster, self.where = cluster, []

    def fresh(self, tag: str, *hosts: str, local: bool = False) -> str:
        for h in hosts:
            remove_image(self.cluster, h, tag)
        if local:
            local_docker("image", "rm", "--force", tag)
        self.where.append((tag, hosts, local))
        return tag

    def clean(self) -> None:
        for tag, hosts, local in self.where:
            for h in hosts:
                remove_image(self.cluster, h, tag)
            if local:
                local_docker("image", "rm", "--force", tag)
