"""The test bed the relay benchmarks share (``benchmarks/weights.py``, ``benchmarks/images.py``): the
simulated hosts of ``tests/cluster`` seen from a home of its own (their host keys known), a
recipe and an inventory of the first N hosts per round, one whole ``python -m inkctl``
process timed, the bytes the head (h1) sent on its link, and the hand-made baseline for
images (``docker save | ssh HOST docker load`` from h1, several hosts at once)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class Testbed:
    def __init__(self, cluster, work: Path, env: dict[str, str] | None = None):
        import yaml

        self.cluster, self.work, self.extra_env = cluster, work, env or {}
        self.home = work / "home"
        (self.home / ".ssh").mkdir(parents=True, exist_ok=True)
        (self.home / ".ssh" / "known_hosts").write_text(Path(cluster.known_hosts).read_text())
        self.hosts = yaml.safe_load(Path(cluster.inventory).read_text())["hosts"]

    def setup(self, name: str, n: int, recipe: str) -> tuple[Path, Path]:
        """``recipe`` and an inventory of h1..hN in ``<work>/<name>``."""
        import yaml

        d = self.work / name
        d.mkdir(exist_ok=True)
        rec, inv = d / "recipe.yaml", d / "hosts.yaml"
        rec.write_text(recipe)
        inv.write_text(yaml.safe_dump({"hosts": self.hosts[:n]}, sort_keys=False))
        return rec, inv

    def env(self) -> dict[str, str]:
        """inkctl's environment: this home, this checkout, the hosts' own daemons only."""
        env = dict(os.environ, HOME=str(self.home), PYTHONPATH=str(ROOT), **self.extra_env)
        env.pop("DOCKER_HOST", None)
        return env

    def inkctl(self, *args) -> tuple[float, str]:
        """Seconds of one whole inkctl process, and what it printed on stdout; a failure ends
        the benchmark with inkctl's own words."""
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "inkctl", *map(str, args)], cwd=ROOT, env=self.env(),
                           capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
        seconds = time.monotonic() - t0
        if p.returncode != 0:
            raise SystemExit(f"inkctl {' '.join(map(str, args))} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
        return seconds, p.stdout

    def head_sent(self) -> int:
        """Bytes the head (h1) has sent on its link: what the bridge side of its veth received."""
        from tests.cluster import net

        with open(f"/sys/class/net/{net.veth(1, self.cluster.net_id)}/statistics/rx_bytes") as f:
            return int(f.read())

    def in_head(self, argv: list[str]) -> list[str]:
        return ["nsenter", f"--net={self.cluster.host('h1').netns_path}", "--"] + argv

    # ------------------------------------------------------------------ images

    def make_image(self, image: str, mib: int, base: str | None = None) -> None:
        """``image`` on h1: ``mib`` MiB of random bytes, imported (one layer) or on top of ``base``."""
        if base is None:
            script = (f"d=$(mktemp -d) && head -c {mib << 20} /dev/urandom > $d/payload && "
                      f"tar -C $d -c . | docker import - {image} >/dev/null; rc=$?; rm -rf $d; exit $rc")
        else:
            script = (f"d=$(mktemp -d) && head -c {mib << 20} /dev/urandom > $d/payload && "
                      f"printf 'FROM {base}\\nCOPY payload /payload\\n' > $d/Dockerfile && "
                      f"DOCKER_BUILDKIT=0 docker build -q -t {image} $d >/dev/null; rc=$?; rm -rf $d; exit $rc")
        cp = self.cluster.exec("h1", ["sh", "-c", script])
        if cp.returncode:
            raise SystemExit(f"cannot make {image} on h1: {cp.stderr}")

    def archive_size(self, image: str) -> int:
        """Bytes of ``docker save IMAGE`` on h1."""
        return int(self.cluster.exec("h1", ["sh", "-c", f"docker save {image} | wc -c"]).stdout)

    def drop_image(self, image: str, names: list[str]) -> None:
        for n in names:
            self.cluster.docker(n, "rmi", "-f", image)

    def save_load(self, image: str, names: list[str]) -> float:
        """``docker save | ssh HOST docker load`` from h1 to every host in ``names`` at once."""
        sock = self.cluster.host("h1").socket
        t0 = time.monotonic()
        procs = [subprocess.Popen(self.in_head(["sh", "-c", f"docker -H unix://{sock} save {image} | "
                                                            f"ssh -F {self.cluster.ssh_config} {n} docker load"]),
                                  stdout=subprocess.DEVNULL) for n in names]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise SystemExit(f"docker save | ssh docker load failed: {codes}")
        return time.monotonic() - t0
