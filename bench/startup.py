#!/usr/bin/env python3
"""Whole-process time of the paper commands, as ratios to a named floor.

Baseline ("floor"): `python -c "import pydantic, yaml"`, measured in the same run: the least
any command that validates YAML with pydantic can cost. Target (issue 2): each command at
most 2.0x the floor. Also checks that paramiko, docker and httpx are never imported.

    python bench/startup.py [--runs N] [--instructions]

--instructions also counts each command's instructions under valgrind (callgrind, once each:
slow, but a count that a loaded machine does not change; times on a shared 2-core machine
swing by a third from one minute to the next).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = "recipes/inkling-small-2x-dgx-spark-vllm.yaml"
TARGET = 2.0
CASES = {
    "floor: import pydantic, yaml": [sys.executable, "-c", "import pydantic, yaml"],
    "inkctl --help": [sys.executable, "-m", "inkctl", "--help"],
    "inkctl validate recipes/": [sys.executable, "-m", "inkctl", "validate", "recipes/"],
    f"inkctl plan {RECIPE}": [sys.executable, "-m", "inkctl", "plan", RECIPE],
}
HEAVY = ("paramiko", "docker", "httpx")


def environment(pycache: str) -> dict:
    """An installed inkctl has its .pyc files; a worktree without them (PYTHONDONTWRITEBYTECODE)
    would compile every module on every run and measure the compiler, not inkctl."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(argv: list[str], runs: int, env: dict) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds of the process: user + system)."""
    import resource

    walls, cpus = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
        walls.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def instructions(argv: list[str], env: dict) -> int:
    """Instructions the whole process executed (valgrind's callgrind)."""
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv], cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, check=False)
    line = next((x for x in p.stderr.splitlines() if "Collected :" in x), None)
    if line is None:
        raise SystemExit(f"valgrind gave no count for {argv}:\n{p.stderr[-2000:]}")
    return int(line.split(":")[-1].strip())


def heavy_imports(args: list[str]) -> list[str]:
    # main(), not the entry point: run() ends the process with os._exit before the check
    code = ("import sys\nfrom inkctl.cli.app import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit: pass\n"
            f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    err = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True).stderr
    line = next((x for x in err.splitlines() if x.startswith("HEAVY:")), "HEAVY:?")
    return [m for m in line[len("HEAVY:"):].split(",") if m]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--instructions", action="store_true", help="also count instructions under valgrind")
    args = ap.parse_args()
    runs = args.runs
    with tempfile.TemporaryDirectory(prefix="inkctl-pyc-") as pyc:
        env = environment(pyc)
        for argv in CASES.values():
            timed(argv, 1, env)  # warm the page cache and write the .pyc files
        # round-robin: each round runs every case once, so a load that comes and goes on a shared
        # machine weighs on the floor and the commands alike (the ratios are what is compared)
        rounds = [{name: timed(argv, 1, env) for name, argv in CASES.items()} for _ in range(runs)]
        results = {name: (statistics.median(r[name][0] for r in rounds), statistics.median(r[name][1] for r in rounds))
                   for name in CASES}
        counts = {name: instructions(argv, env) for name, argv in CASES.items()} if args.instructions else {}
    floor, floor_cpu = results["floor: import pydantic, yaml"]
    print(f"median of {runs} rounds, baseline = floor ({floor * 1000:.0f} ms wall, {floor_cpu * 1000:.0f} ms CPU), "
          f"target <= {TARGET}x; CPU time is the steadier figure on a busy machine")
    worst = 0.0
    for name, (t, cpu) in results.items():
        ratio = t / floor
        if not name.startswith("floor"):
            worst = max(worst, ratio)
        print(f"  {name:<60} {t * 1000:7.0f} ms  {ratio:5.2f}x   cpu {cpu * 1000:5.0f} ms  {cpu / floor_cpu:5.2f}x")
    if counts:
        floor_ir = counts["floor: import pydantic, yaml"]
        print("instructions (callgrind, one run each; the load-independent figure):")
        for name, n in counts.items():
            if not name.startswith("floor"):
                worst = max(worst, n / floor_ir)
            print(f"  {name:<60} {n / 1e6:7.0f} M  {n / floor_ir:5.2f}x")
    for words in (["--help"], ["validate", "recipes/"], ["plan", RECIPE]):
        heavy = heavy_imports(words)
        print(f"  heavy imports during `inkctl {' '.join(words)}`: {', '.join(heavy) or 'none'}")
    print(f"worst ratio {worst:.2f}x: {'within' if worst <= TARGET else 'OVER'} target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
