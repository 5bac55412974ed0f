"""Dedup alone at growing sizes: wall time, driver and largest-worker memory, rounds.

    python benchmarks/bench_dedup_scale.py [--sizes 100000 300000 1000000] [--corpus shaped|pool]
                                           [--work /tmp/dataclean-scale] [--data PATH]

Corpora (cached per size under --work):
- `shaped` (the default): `benchmarks/shaped_corpus.py`, the same shares of exact copies, near
  copies and template pages at every size, in shards of 25,000 rows, so what grows with the
  corpus is the machinery's cost, not the task;
- `pool`: bench_scale's short documents of 1-4 real sentences from one pool of about 80,000, 8%
  exact and 8% near copies of the first 200,000 documents, cut into shards of
  `--rows-per-shard` rows: the larger, the more its documents share (at 10M one LSH component
  holds 54% of the rows): the stress case of a percolating candidate graph.
Each size is one `dataclean run CORPUS -o OUT --only dedup --workers 2` (embedded Ray) in a
fresh process, timed from launch to exit, memory of the driver and of every Ray worker sampled
every 0.5 s (`bench_scale.run_measured`: resident, and resident without file pages, "anon": a
large component's task maps its spilled sets, which the system's file cache holds), CPU seconds
of every process. Also from stats.json's dedup `fit` entry: the fit's seconds by step, the
connected-components rounds, candidates, the largest component's rows, and the peak memory the
fit's tasks and the driver report (VmHWM), with the step whose tasks raised it. Growth
exponents are the least-squares slope of log value against log documents (1.0 is linear;
memory flat is 0), over all sizes and from each size to the next (seconds and CPU).

Disk and time at 10M (`--sizes ... 10000000`): the shaped corpus is 2.6 GB of Parquet (built in
about 75 s on 2 cores), the pool corpus 2.4 GB (single-threaded: 500 s at `nice 10` on a busy
machine); a run's summaries and scratch about 10 GB more. Figures: docs/scaling.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import corpus as data
from benchmarks import shaped_corpus
from benchmarks.bench_scale import corpus_for, growth, run_config


def shaped_for(work: Path, docs: int) -> Path:
    """The corpus of constant shape (`benchmarks.shaped_corpus`) of `docs` documents, cached."""
    folder = work / f"shaped-{docs}"
    started = time.perf_counter()
    shaped_corpus.build(folder, docs)
    size = sum(p.stat().st_size for p in folder.glob("*.parquet")) / 1e6
    print(
        f"corpus: {docs:,} shaped documents, {size:.0f} MB Parquet ({time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    return folder


def run_size(work: Path, docs: int, shards: int, shape: str) -> dict[str, Any]:
    corpus = shaped_for(work, docs) if shape == "shaped" else corpus_for(work, docs, shards)
    out = work / "out-dedup-scale"
    result = run_config(corpus, out, "ray", 2, extra=("--only", "dedup"))
    stats = json.loads((out / "stats.json").read_text())
    fit = next(stage for stage in stats["stages"] if stage["stage"] == "dedup").get("fit", {})
    result.update(
        {
            "load": os.getloadavg()[0],
            "fit_seconds": fit.get("seconds"),
            "component_rounds": fit.get("component_rounds"),
            "candidates": fit.get("candidates"),
            "largest_component": fit.get("largest_component"),
            "dropped": fit.get("exact_of", 0) + fit.get("near_duplicate_of", 0),
            "fit_task_peak_mb": fit.get("peak_worker_bytes", 0) / 1e6,
            "fit_driver_peak_mb": fit.get("peak_driver_bytes", 0) / 1e6,
            # The step whose tasks first raised their process's high-water mark, and to what.
            "fit_peak_mb_by_step": {
                step: round(peak / 1e6) for step, peak in fit.get("peak_bytes_by_step", {}).items() if peak
            },
        }
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    parser.add_argument(
        "--corpus",
        choices=("shaped", "pool"),
        default="shaped",
        help="shaped: the same shares of copies and site pages at every size (default); pool: "
        "bench_scale's documents from one pool of sentences, which share more as the corpus grows",
    )
    parser.add_argument("--rows-per-shard", type=int, default=25_000, help="pool corpus only")
    parser.add_argument("--work", type=Path, default=Path("/tmp/dataclean-scale"))
    parser.add_argument("--json", type=Path, help="write the results here")
    data.add_data_argument(parser)
    args = parser.parse_args()
    data.use_data(args.data, args.generated)
    header = (
        f"{'docs':>10} {'seconds':>8} {'docs/s':>9} {'driver MB':>9} {'worker MB':>9} "
        f"{'(anon)':>13} {'rounds':>6}"
    )
    print(header + "  fit seconds by step", flush=True)
    runs = []
    for docs in args.sizes:
        result = run_size(args.work, docs, max(2, docs // args.rows_per_shard), args.corpus)
        runs.append(result)
        print(
            f"{result['rows_in']:>10,} {result['seconds']:8.1f} "
            f"{result['rows_in'] / result['seconds']:9,.0f} "
            f"{result['driver_mb']:9,.0f} {result['worker_mb']:9,.0f} "
            f"{result['driver_anon_mb']:6,.0f} {result['worker_anon_mb']:6,.0f} "
            f"{result['component_rounds']:>6}  "
            f"{result['fit_seconds']} (CPU {sum(result['cpu'].values()):.1f} s, load {result['load']:.1f})",
            flush=True,
        )
        print(
            f"{'':>10} fit tasks' peak MB by step: {result['fit_peak_mb_by_step']}; candidates "
            f"{result['candidates']:,}, largest component {result['largest_component'] or 0:,} rows, "
            f"dropped {result['dropped']:,} ({result['dropped'] / result['rows_in']:.1%})",
            flush=True,
        )
    exponents = {}
    if len(runs) > 1:
        exponents = {
            "seconds": growth([(r["rows_in"], r["seconds"]) for r in runs]),
            "driver MB": growth([(r["rows_in"], r["driver_mb"]) for r in runs]),
            "worker MB": growth([(r["rows_in"], r["worker_mb"]) for r in runs]),
            "driver MB without file pages": growth([(r["rows_in"], r["driver_anon_mb"]) for r in runs]),
            "worker MB without file pages": growth([(r["rows_in"], r["worker_anon_mb"]) for r in runs]),
        }
        cpu = [(r["rows_in"], sum(r["cpu"].values())) for r in runs]
        exponents["CPU seconds"] = growth(cpu)
        seconds = [(r["rows_in"], r["seconds"]) for r in runs]
        for name, points in (("seconds", seconds), ("CPU", cpu)):
            for pair in itertools.pairwise(points):
                exponents[f"{name}, {pair[0][0]:,} -> {pair[1][0]:,}"] = growth(list(pair))
        for name, value in exponents.items():
            print(f"growth exponent, {name}: {value:.2f}")
    report = {"runs": runs, "exponents": exponents}
    (args.json or args.work / "dedup-scale.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
