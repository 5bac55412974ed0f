"""How much two busy cores slow each other down on dataclean's row-local work, without Ray.

The 1 -> 2 worker speed-up of `bench_scale.py` can only approach 2x if one process's work takes
as long beside another as alone. This runs the default pipeline's row-local stages (clean,
split, perplexity) over one shard of the scale corpus in a fresh process alone, then over two
shards in two processes at once, and reports each stage's seconds and the slowdown: the ceiling
the machine itself puts on the speed-up, before any Ray, driver or start-up cost.

    python benchmarks/bench_contention.py [--work /tmp/dataclean-scale] [--docs 1000000] [--repeat 3]

Each round measures one shard after the other alone, then both at once; the ceiling of a round
is the ratio of the two, and rounds are never mixed (median with min-max over rounds).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus as data
from benchmarks.bench_scale import build_corpus
from benchmarks.rounds import describe


def _stage_seconds(shard: str) -> dict[str, float]:
    """Seconds per stage over one shard, in 2048-row batches as a run reads them."""
    import pyarrow.parquet as pq

    from dataclean import columns as C
    from dataclean.stages.clean import CleanText
    from dataclean.stages.language import IdentifyLanguage
    from dataclean.stages.perplexity import ScorePerplexity
    from dataclean.stages.split import SplitLongDocuments

    # The language stage is timed too: perplexity reads its `lang` (which the perplexity stage
    # once labelled itself when no language stage ran before it).
    stages = [CleanText(), SplitLongDocuments(), ScorePerplexity(), IdentifyLanguage()]
    for stage in stages:
        stage.setup()
    table = pq.read_table(shard)
    table = stages[3](table).drop_columns([C.DROP_REASON])  # `lang` for perplexity: not timed
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
    parser.add_argument("--repeat", type=int, default=3, help="rounds")
    data.add_data_argument(parser)
    args = parser.parse_args()
    data.use_data(args.data, args.generated)
    corpus = Path(args.work) / f"corpus-{args.docs}"
    build_corpus(corpus, args.docs, args.shards)
    first, second = (str(path) for path in sorted(corpus.glob("*.parquet"))[:2])
    print(f"{'round':6} {'stage':12} {'alone s':>8} {'two at once s':>14} {'slowdown':>9}")
    ceilings = []
    for number in range(1, max(1, args.repeat) + 1):
        alone: dict[str, float] = {}
        for shard in (first, second):
            for name, seconds in _run([shard])[0].items():
                alone[name] = alone.get(name, 0.0) + seconds
        pair = _run([first, second])
        # Both processes ran at once: the pair's time is its slower member's, per stage.
        together = {name: max(result[name] for result in pair) for name in pair[0]}
        for name in alone:
            slowdown = together[name] / (alone[name] / 2) - 1
            print(f"{number:<6} {name:12} {alone[name]:8.2f} {together[name]:14.2f} {slowdown:+9.0%}")
        ceilings.append(sum(alone.values()) / max(sum(result.values()) for result in pair))
        print(f"{number:<6} {'all':12} -> two processes do {ceilings[-1]:.2f}x the work of one")
    print(f"ceiling, median over {len(ceilings)} round(s): {describe(ceilings, 2, 'x')}")


if __name__ == "__main__":
    main()
