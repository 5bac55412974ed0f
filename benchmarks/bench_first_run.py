"""A user's first run against a warm one: `dataclean run` on the bundled sample, numba's cache empty.

    python benchmarks/bench_first_run.py [--repeat 3] [--executor ray] [--compare-tree /work/main]
                                         [--corpus DIR] [--work /tmp/dataclean-first-run] [--json]

Each round runs `python -m dataclean run dataclean/data/sample -o OUT` twice in fresh processes,
its progress piped (`benchmarks/startup.py`), timed from start to exit: first with
`NUMBA_CACHE_DIR` pointing at an empty folder (a first run after install: every kernel compiles),
then again with that folder as the first run left it (a warm run). The headline is cold / warm,
per round and its median: figures on a shared machine drift by +-30% from minute to minute, their
ratio within one round much less. Each run also gives the seconds from its start to its first
progress line (a person sees the run has started), and the warm run where its seconds went (its
phases, cut at its progress lines) and its fixed cost: wall minus the stages' seconds over the
workers (`--corpus DIR` measures that on a corpus of your own too, warm, after the rounds).

`--compare-tree DIR` also runs another checkout of dataclean (e.g. the main branch before the
compile scheduling of `dataclean.run.kernels`) in the same rounds, alternating with this one, for the
same two figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.startup import fixed_cost, phases, stage_seconds, timed_progress

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "dataclean" / "data" / "sample"
WORKERS = os.cpu_count() or 1  # an embedded Ray's, by default


def timed_run(tree: Path, cache: Path, out: Path, executor: str, source: Path = SAMPLE) -> dict[str, Any]:
    """One `dataclean run` of `source` with the code in `tree`: {"seconds", "first_line", "lines",
    "stats"} (`benchmarks/startup.py`)."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_CACHE_DIR": str(cache)}
    if tree != ROOT:
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # run another checkout without writing into it
    command = [sys.executable, "-m", "dataclean", "run", str(source), "-o", str(out)]
    command += ["--executor", executor]
    run = timed_progress(command, env, cwd=tree)
    stats = json.loads((out / "stats.json").read_text())
    return {"seconds": run["wall"], "first_line": run["first_line"], "lines": run["lines"], "stats": stats}


def cold_and_warm(tree: Path, work: Path, executor: str) -> dict[str, Any]:
    """One round for one checkout: a run on an empty cache, then one on the cache it left."""
    cache = work / "numba-cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    cold = timed_run(tree, cache, work / "out", executor)
    warm = timed_run(tree, cache, work / "out", executor)
    workers = 1 if executor == "local" else WORKERS
    return {
        "cold": cold["seconds"],
        "warm": warm["seconds"],
        "ratio": cold["seconds"] / warm["seconds"],
        "first_line_cold": cold["first_line"],
        "first_line_warm": warm["first_line"],
        "warm_phases": phases(warm["lines"], warm["seconds"]),
        "warm_fixed": fixed_cost(warm["seconds"], warm["stats"], workers),
    }


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("cold", "warm", "ratio", "first_line_cold", "first_line_warm", "warm_fixed")
    found: dict[str, Any] = {"rounds": rounds}
    for key in keys:
        values = [r[key] for r in rounds if r[key] is not None]
        found[f"median_{key}"] = statistics.median(values) if values else None
    names = rounds[0]["warm_phases"]
    found["median_warm_phases"] = {
        name: statistics.median(r["warm_phases"][name] for r in rounds) for name in names
    }
    return found


def _s(seconds: float | None) -> str:
    """Seconds, or "none" (a checkout that prints no progress lines)."""
    return "none" if seconds is None else f"{seconds:.2f} s"


def _phases_line(found: dict[str, float]) -> str:
    return ", ".join(f"{name} {seconds:.1f}" for name, seconds in found.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--executor", choices=["ray", "local"], default="ray")
    parser.add_argument("--compare-tree", type=Path, default=None, help="another dataclean checkout")
    parser.add_argument("--work", type=Path, default=Path("/tmp/dataclean-first-run"))
    parser.add_argument("--corpus", type=Path, default=None, help="also a warm run on this corpus")
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
                r = result
                print(
                    f"round {number + 1} {name:8s} cold {r['cold']:6.2f} s  warm {r['warm']:6.2f} s  "
                    f"cold/warm {r['ratio']:.2f}; first progress line cold {_s(r['first_line_cold'])}, "
                    f"warm {_s(r['first_line_warm'])}; warm fixed cost {r['warm_fixed']:.2f} s",
                    flush=True,
                )
    results: dict[str, Any] = {name: summary(found) for name, found in rounds.items()}
    results["executor"] = args.executor
    if args.corpus is not None:
        results["corpus"] = corpus_run(args.corpus.resolve(), args.work / "corpus", args.executor)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, found in results.items():
        if isinstance(found, dict) and "rounds" in found:
            m = found
            print(
                f"{name:8s} median cold {m['median_cold']:.2f} s, warm {m['median_warm']:.2f} s, "
                f"cold/warm {m['median_ratio']:.2f} (over {len(m['rounds'])} rounds); first progress "
                f"line cold {_s(m['median_first_line_cold'])}, warm {_s(m['median_first_line_warm'])}"
            )
            print(
                f"{'':8s} warm: fixed cost {found['median_warm_fixed']:.2f} s; "
                f"phases {_phases_line(found['median_warm_phases'])}"
            )
    if "corpus" in results:
        c = results["corpus"]
        print(
            f"corpus {args.corpus}: warm {c['seconds']:.2f} s, stages {c['stage_seconds']:.2f} s over "
            f"{c['workers']} worker(s), fixed cost {c['fixed']:.2f} s; phases {_phases_line(c['phases'])}"
        )


def corpus_run(corpus: Path, work: Path, executor: str) -> dict[str, Any]:
    """A warm run on `corpus` (after one to warm the cache): its seconds, phases and fixed cost."""
    cache = work / "numba-cache"
    cache.mkdir(parents=True, exist_ok=True)
    timed_run(ROOT, cache, work / "out", executor, corpus)
    run = timed_run(ROOT, cache, work / "out", executor, corpus)
    workers = 1 if executor == "local" else WORKERS
    return {
        "seconds": run["seconds"],
        "stage_seconds": stage_seconds(run["stats"]),
        "workers": workers,
        "fixed": fixed_cost(run["seconds"], run["stats"], workers),
        "phases": phases(run["lines"], run["seconds"]),
    }


if __name__ == "__main__":
    main()
