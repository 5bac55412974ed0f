"""How much two busy cores slow each other down on dataclean's row-local work, without Ray.

The 1 -> 2 worker speed-up of `bench_scale.py` can only approach 2x if one process's work takes
as long beside another as alone. This runs the default pipeline's row-local stages (clean,
split, perplexity) over one shard of the scale corpus in a fresh process alone, then over two
shards in two processes at once, and reports each stage's seconds and the slowdown: the ceiling
the machine itself puts on the speed-up, before any Ray, driver or start-up cost.

    python benchmarks/bench_contention.py [--work /tmp/dataclean-scale] [--docs 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scale import build_corpus


def _stage_seconds(shard: str) -> dict[str, float]:
    """Seconds per stage over one shard, in 2048-row batches as a run reads them."""
    import pyarrow.parquet as pq

    from dataclean.stages.clean import CleanText
    from dataclean.stages.perplexity import ScorePerplexity
    from dataclean.stages.split import SplitLongDocuments

    stages = [CleanText(), SplitLongDocuments(), ScorePerplexity()]
    for stage in stages:
        stage.setup()
    table = pq.read_table(shard)
    stages[2](table.slice(0, 64))  # the compiled tokenizer's first call loads it: not timed
    seconds = {}
    for stage in stages:
        started = time.perf_counter()
        for start in range(0, table.num_rows, 2048):
            stage(table.slice(start, 2048))
        seconds[stage.name] = time.perf_counter() - started
    return seconds


def _run(shards: list[str]) -> list[dict[str, float]]:
    with multiprocessing.get_context("spawn").Pool(len(shards)) as pool:
        return pool.map(_stage_seconds, shards)


def ceiling_round(first: str, second: str) -> tuple[float, float]:
    """One round: seconds of the row-local stages over `first`, then `second`, in one process at
    a time (summed), and over both in two processes at once (the slower one's). Their ratio is
    the speed-up two workers can reach on this machine at best: `alone / together`."""
    alone = sum(sum(_run([shard])[0].values()) for shard in (first, second))
    pair = _run([first, second])
    together = max(sum(result.values()) for result in pair)
    return alone, together


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/dataclean-scale")
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="fastest of this many, interleaved")
    args = parser.parse_args()
    corpus = Path(args.work) / f"corpus-{args.docs}"
    build_corpus(corpus, args.docs, args.shards)
    first, second = (str(path) for path in sorted(corpus.glob("*.parquet"))[:2])
    alone: dict[str, float] = {}
    together: dict[str, float] = {}
    for _ in range(max(1, args.repeat)):
        for shard in (first, second):
            for name, seconds in _run([shard])[0].items():
                alone[name] = min(alone.get(name, 1e9), seconds)
        pair = _run([first, second])
        for name in pair[0]:
            # Both processes ran at once: the pair's time is its slower member's.
            together[name] = min(together.get(name, 1e9), max(result[name] for result in pair))
    print(f"{'stage':12} {'alone s':>8} {'two at once s':>14} {'slowdown':>9}")
    for name in alone:
        print(f"{name:12} {alone[name]:8.2f} {together[name]:14.2f} {together[name] / alone[name] - 1:+9.0%}")
    total_alone, total_together = sum(alone.values()), sum(together.values())
    print(
        f"{'all':12} {total_alone:8.2f} {total_together:14.2f} {total_together / total_alone - 1:+9.0%}"
        f"  -> two processes do {2 * total_alone / total_together:.2f}x the work of one"
    )


if __name__ == "__main__":
    main()
