#!/usr/bin/env python3
"""Loading a large recipe, as a ratio to a named baseline measured in the same run.

Baseline: ``yaml.load(text, CSafeLoader)`` + ``Recipe.model_validate`` of the same 300-line
recipe: what loading costs without positions, limits or located problems. Ours is
``load_model`` (events composed under limits, every path located). Target: at most 3.0x the
baseline (a timed unit test would flake on a busy machine: the target lives here).

    python benchmarks/load.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TARGET = 3.0


def big_recipe() -> str:
    text = (Path(__file__).resolve().parents[1] / "recipes/inkling-small-2x-dgx-spark-vllm.yaml").read_text()
    extra = "".join(f"      - --flag-{i}=value-{i}\n" for i in range(100))
    env = "".join(f"    VAR_{i}: 'value {i}'\n" for i in range(100))
    text = text.replace("    port: 8000\n", "    port: 8000\n    extra:\n" + extra, 1)
    return text.replace("container:\n", "container:\n  env:\n" + env, 1)


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    import yaml

    from inkctl.recipe.reading.load import load_model
    from inkctl.recipe.model import Recipe

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    runs = ap.parse_args().runs
    text = big_recipe()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    load_model(Recipe, "big.yaml", text=text)  # warm: imports, pydantic's schema build

    def baseline():
        Recipe.model_validate(yaml.load(text, Loader=loader))

    def ours():
        load_model(Recipe, "big.yaml", text=text)

    # interleaved, so load on a shared machine hits both alike
    base, mine = [], []
    for _ in range(runs):
        base.append(best(baseline, 1))
        mine.append(best(ours, 1))
    b, m = statistics.median(base), statistics.median(mine)
    print(f"recipe: {len(text.splitlines())} lines, {runs} runs, medians")
    print(f"  baseline  yaml CSafeLoader + model_validate  {b * 1000:7.2f} ms")
    print(f"  load_model (positions, limits, located)     {m * 1000:7.2f} ms   {m / b:4.2f}x  (target <= {TARGET}x)")
    return 0 if m / b <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
