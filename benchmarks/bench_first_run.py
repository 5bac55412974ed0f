"""A user's first run against a warm one: `dataclean run` on the bundled sample, numba's cache empty.

    python benchmarks/bench_first_run.py [--repeat 3] [--executor ray] [--compare-tree /work/main]
                                         [--work /tmp/dataclean-first-run] [--json]

Each round runs `python -m dataclean run dataclean/data/sample -o OUT --quiet` twice in fresh
processes, timed from start to exit: first with `NUMBA_CACHE_DIR` pointing at an empty folder (a
first run after install: every kernel compiles), then again with that folder as the first run
left it (a warm run). The headline is cold / warm, per round and its median: figures on a shared
machine drift by +-30% from minute to minute, their ratio within one round much less.

`--compare-tree DIR` also runs another checkout of dataclean (e.g. the main branch before the
compile scheduling of `dataclean.warmup`) in the same rounds, alternating with this one, for the
same two figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "dataclean" / "data" / "sample"


def timed_run(tree: Path, cache: Path, out: Path, executor: str) -> float:
    """Seconds from start to exit of one `dataclean run` of the sample with the code in `tree`."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_CACHE_DIR": str(cache)}
    if tree != ROOT:
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # run another checkout without writing into it
    command = [sys.executable, "-m", "dataclean", "run", str(SAMPLE), "-o", str(out), "--quiet"]
    command += ["--executor", executor]
    started = time.perf_counter()
    result = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"{tree}: dataclean run failed:\n{result.stderr[-3000:]}")
    return seconds


def cold_and_warm(tree: Path, work: Path, executor: str) -> dict[str, float]:
    """One round for one checkout: a run on an empty cache, then one on the cache it left."""
    cache = work / "numba-cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    cold = timed_run(tree, cache, work / "out", executor)
    warm = timed_run(tree, cache, work / "out", executor)
    return {"cold": cold, "warm": warm, "ratio": cold / warm}


def summary(rounds: list[dict[str, float]]) -> dict[str, Any]:
    return {
        "rounds": rounds,
        "median_cold": statistics.median(r["cold"] for r in rounds),
        "median_warm": statistics.median(r["warm"] for r in rounds),
        "median_ratio": statistics.median(r["ratio"] for r in rounds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--executor", choices=["ray", "local"], default="ray")
    parser.add_argument("--compare-tree", type=Path, default=None, help="another dataclean checkout")
    parser.add_argument("--work", type=Path, default=Path("/tmp/dataclean-first-run"))
    parser.add_argument("--json", action="store_true", help="print the results as JSON only")
    args = parser.parse_args()
    trees = {"this": ROOT}
    if args.compare_tree is not None:
        trees["compare"] = args.compare_tree.resolve()
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for number in range(args.repeat):
        for name, tree in trees.items():
            result = cold_and_warm(tree, args.work / name, args.executor)
            rounds[name].append(result)
            if not args.json:
                print(
                    f"round {number + 1} {name:8s} cold {result['cold']:6.2f} s  "
                    f"warm {result['warm']:6.2f} s  cold/warm {result['ratio']:.2f}",
                    flush=True,
                )
    results: dict[str, Any] = {name: summary(found) for name, found in rounds.items()}
    results["executor"] = args.executor
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, found in results.items():
        if isinstance(found, dict):
            print(
                f"{name:8s} median cold {found['median_cold']:.2f} s, warm {found['median_warm']:.2f} s, "
                f"cold/warm {found['median_ratio']:.2f} (over {len(found['rounds'])} rounds)"
            )


if __name__ == "__main__":
    main()
