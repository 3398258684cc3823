#!/usr/bin/env python3
"""Whole-process time of the paper commands, as ratios to a named floor.

Baseline ("floor"): `python -c "import pydantic, yaml"`, measured in the same run: the least
any command that validates YAML with pydantic can cost. Target (issue 2): each command at
most 2.0x the floor. Also checks that paramiko, docker and httpx are never imported.

`inkctl validate` keeps its verdict on a file (api/paper/validate_cache.py); each validate case runs
twice: "cold", the cache emptied before every run (the first validation of a file: it makes
the verdict and keeps it), and "warm", the verdict found (the file validated again, unchanged).
A bundled recipe, a user's recipe file (a copy of an example in a directory of its own) and
every bundled recipe at once.

    python benchmarks/startup.py [--runs N] [--instructions]

--instructions also counts each command's instructions under valgrind (callgrind, once each:
slow, but a count that a loaded machine does not change; times on a shared 2-core machine
swing by a third from one minute to the next).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = "recipes/inkling-small-2x-dgx-spark-vllm.yaml"
USER_RECIPE = "examples/vllm-single-docker.yaml"  # copied to a directory of its own: a user's file
TARGET = 2.0
FLOOR = "floor: import pydantic, yaml"  # the baseline; names fit 80 columns with their figures


def cases(user_file: str) -> dict[str, tuple[list[str], str | None]]:
    """name -> (argv, cache): None (no validate cache involved), "cold" or "warm"."""
    inkctl = [sys.executable, "-m", "inkctl"]
    out: dict[str, tuple[list[str], str | None]] = {
        FLOOR: ([sys.executable, "-c", "import pydantic, yaml"], None),
        "--help": ([*inkctl, "--help"], None),
    }
    for label, target in (("validate RECIPE", RECIPE), ("validate USER-FILE", user_file),
                          ("validate recipes/", "recipes/")):
        for cache in ("cold", "warm"):
            out[f"{label} ({cache})"] = ([*inkctl, "validate", target], cache)
    out["plan RECIPE"] = ([*inkctl, "plan", RECIPE], None)
    return out


HEAVY = ("paramiko", "docker", "httpx")


def environment(pycache: str, cache: str) -> dict:
    """An installed inkctl has its .pyc files; a worktree without them (PYTHONDONTWRITEBYTECODE)
    would compile every module on every run and measure the compiler, not inkctl. The validate
    cache lives in CACHE (XDG_CACHE_HOME), not in the user's."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=pycache, XDG_CACHE_HOME=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("INKCTL_VALIDATE_CACHE", None)
    return env


def prepare(cache: str | None, env: dict) -> None:
    """Before a cold run: no kept verdict (outside the time measured)."""
    if cache == "cold":
        shutil.rmtree(os.path.join(env["XDG_CACHE_HOME"], "inkctl"), ignore_errors=True)


def timed(argv: list[str], runs: int, env: dict, cache: str | None = None) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds of the process: user + system)."""
    import resource

    walls, cpus = [], []
    for _ in range(runs):
        prepare(cache, env)
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
        walls.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def instructions(argv: list[str], env: dict, cache: str | None = None) -> int:
    """Instructions the whole process executed (valgrind's callgrind)."""
    prepare(cache, env)
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
    env = dict(os.environ, INKCTL_VALIDATE_CACHE="0")  # what a first validation imports
    err = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, env=env).stderr
    line = next((x for x in err.splitlines() if x.startswith("HEAVY:")), "HEAVY:?")
    return [m for m in line[len("HEAVY:"):].split(",") if m]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--instructions", action="store_true", help="also count instructions under valgrind")
    args = ap.parse_args()
    runs = args.runs
    with tempfile.TemporaryDirectory(prefix="inkctl-pyc-") as pyc, tempfile.TemporaryDirectory(prefix="inkctl-bench-") as tmp:
        user_file = shutil.copy(ROOT / USER_RECIPE, Path(tmp) / "my-recipe.yaml")
        table = cases(user_file)
        env = environment(pyc, os.path.join(tmp, "cache"))
        for argv, cache in table.values():
            timed(argv, 1, env, cache)  # warm the page cache, write the .pyc files (and keep the verdicts)
        # round-robin: each round runs every case once, so a load that comes and goes on a shared
        # machine weighs on the floor and the commands alike (the ratios are what is compared)
        rounds = [{name: timed(argv, 1, env, cache) for name, (argv, cache) in table.items()} for _ in range(runs)]
        results = {name: (statistics.median(r[name][0] for r in rounds), statistics.median(r[name][1] for r in rounds))
                   for name in table}
        counts = {name: instructions(argv, env, cache) for name, (argv, cache) in table.items()} if args.instructions else {}
    floor, floor_cpu = results[FLOOR]
    print(f"inkctl ... as ratios to the floor; RECIPE: {RECIPE},\nUSER-FILE: a copy of {USER_RECIPE} elsewhere; "
          f"target <= {TARGET}x\nmedian of {runs} rounds, baseline = floor ({floor * 1000:.0f} ms wall, "
          f"{floor_cpu * 1000:.0f} ms CPU);\nCPU time is the steadier figure on a busy machine")
    worst = {"validate, cold": 0.0, "validate, warm": 0.0, "--help and plan": 0.0}
    kinds = {name: cache for name, (_, cache) in table.items()}

    def note(name: str, ratio: float) -> None:
        if name != FLOOR:
            group = f"validate, {kinds[name]}" if kinds[name] else "--help and plan"
            worst[group] = max(worst[group], ratio)

    for name, (t, cpu) in results.items():
        note(name, t / floor)
        print(f"  {name:<30} {t * 1000:6.0f} ms {t / floor:5.2f}x   cpu {cpu * 1000:5.0f} ms {cpu / floor_cpu:5.2f}x")
    if counts:
        floor_ir = counts[FLOOR]
        print("instructions (callgrind, one run each; the figure load does not change):")
        for name, n in counts.items():
            note(name, n / floor_ir)
            print(f"  {name:<30} {n / 1e6:6.0f} M  {n / floor_ir:5.2f}x")
    for words in (["--help"], ["validate", "recipes/"], ["plan", RECIPE]):
        heavy = heavy_imports(words)
        print(f"  heavy imports, `inkctl {' '.join(words)[:40]}` (cold): {', '.join(heavy) or 'none'}")
    for group, ratio in worst.items():
        print(f"worst ratio, {group}: {ratio:.2f}x: {'within' if ratio <= TARGET else 'OVER'} target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
