"""Benchmark the clean stage against ftfy.fix_text on every document (datatrove/NeMo Curator style).

Prints MB/s per core (single process) of:
- dataclean's CleanText stage on Arrow batches (the whole stage: cleaning, garbage, repetition);
- ftfy.fix_text on every document (the reference; the target is at least 10x faster);
- one regex pass stripping control characters (a floor: the least any cleaner must do);
- datatrove's FTFYFormatter step over datatrove Documents, if datatrove is installed (a
  benchmark-only dependency): ftfy.fix_text with datatrove's own settings.
And the repair quality: of the documents that ftfy's encoding fixer changes when run on every
document, how many dataclean repaired identically, and where not, whether ftfy's own badness
score (then the count of mojibake-shaped character pairs) finds less or more mojibake left in
dataclean's output (dataclean repairs line by line, as ftfy.fix_text does, so it also fixes
mojibake lines inside otherwise clean documents).

    python benchmarks/bench_clean.py [--repeat 4] [--json PATH]

`--json PATH` also writes the comparisons (with each implementation's peak memory above the
input, see benchmarks/measure.py) for benchmarks/run_all.py.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import ftfy
import pyarrow as pa
from ftfy.badness import badness

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.corpus import SHARED, clean_benchmark_corpus, have_shared
from benchmarks.measure import Measurement, PeakMemory, comparison, write_json
from dataclean import columns as C
from dataclean.stages.clean import _MOJIBAKE, CleanText, clean_text
from dataclean.stages.language import IdentifyLanguage

CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _left(text: str) -> tuple[int, int]:
    """Mojibake left in a text: ftfy's badness score, then mojibake-shaped character pairs."""
    return badness(text), len(_MOJIBAKE.findall(text))


def _rate(megabytes: float, seconds: float) -> float:
    return megabytes / seconds if seconds else float("inf")


def datatrove_ftfy(docs: list[str]) -> tuple[float, float | None] | None:
    """Seconds and peak memory of datatrove's FTFYFormatter step over `docs`; None without it."""
    try:
        from datatrove.data import Document
        from datatrove.pipeline.formatters import FTFYFormatter
    except ImportError:
        return None
    documents = [Document(text=doc, id=str(i)) for i, doc in enumerate(docs)]
    formatter = FTFYFormatter()
    with PeakMemory() as memory:
        started = time.perf_counter()
        for _ in formatter.run(iter(documents)):
            pass
        seconds = time.perf_counter() - started
    return seconds, memory.megabytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=4, help="copies of the base corpus")
    parser.add_argument("--batch-rows", type=int, default=2048)
    parser.add_argument("--json", help="also write the comparisons here (for run_all.py)")
    args = parser.parse_args()

    docs = clean_benchmark_corpus(args.repeat)
    megabytes = sum(len(d.encode("utf-8")) for d in docs) / 1e6
    source = str(SHARED) if have_shared() else "generated text"
    print(f"corpus: {len(docs):,} documents, {megabytes:.1f} MB ({source})")

    stage = CleanText()
    batches = [
        pa.table({C.ID: [str(i) for i in range(len(chunk))], C.TEXT: chunk})
        for chunk in (docs[i : i + args.batch_rows] for i in range(0, len(docs), args.batch_rows))
    ]
    stage(batches[0].slice(0, 10))  # compile the repetition kernel outside the timing
    with PeakMemory() as ours_memory:
        started = time.perf_counter()
        cleaned = [stage(batch) for batch in batches]
        ours = time.perf_counter() - started
    # The `language` stage that follows clean in the default recipe (lid.176 on the first 2,000
    # characters), on clean's output; its model is read outside the timing, as once per worker.
    language = IdentifyLanguage()
    language.setup()
    started = time.perf_counter()
    for batch in cleaned:
        language(batch.drop_columns([C.DROP_REASON]))
    language_seconds = time.perf_counter() - started

    started = time.perf_counter()
    for doc in docs:
        CONTROL.sub("", doc)
    regex = time.perf_counter() - started

    with PeakMemory() as ftfy_memory:
        started = time.perf_counter()
        for doc in docs:
            ftfy.fix_text(doc)
        ftfy_all = time.perf_counter() - started
    datatrove = datatrove_ftfy(docs)

    # Quality: every document ftfy's encoding fixer changes must come out the same from ours.
    # Where they differ, ftfy's own badness score says which output holds less mojibake.
    repaired = matched = better = worse = 0
    for doc in docs:
        reference = ftfy.fix_encoding(doc)
        if reference != doc:
            repaired += 1
            ours_text = clean_text(doc)
            theirs = clean_text(reference, fix_mojibake=False)
            if ours_text == theirs:
                matched += 1
            elif _left(ours_text) < _left(theirs):
                better += 1
            else:
                worse += 1

    ours_rate, ftfy_rate, regex_rate = (
        _rate(megabytes, ours),
        _rate(megabytes, ftfy_all),
        _rate(megabytes, regex),
    )
    print(f"{'implementation':44} {'MB/s/core':>10} {'vs ftfy':>8}")
    print(f"{'dataclean CleanText (whole stage)':44} {ours_rate:10.1f} {ours_rate / ftfy_rate:7.1f}x")
    both_rate = _rate(megabytes, ours + language_seconds)
    print(f"{'dataclean CleanText + IdentifyLanguage':44} {both_rate:10.1f} {both_rate / ftfy_rate:7.1f}x")
    print(f"{'ftfy.fix_text on every document':44} {ftfy_rate:10.1f} {1.0:7.1f}x")
    print(f"{'regex strip of control characters only':44} {regex_rate:10.1f} {regex_rate / ftfy_rate:7.1f}x")
    if datatrove is not None:
        datatrove_rate = _rate(megabytes, datatrove[0])
        print(
            f"{'datatrove FTFYFormatter step':44} {datatrove_rate:10.1f} {datatrove_rate / ftfy_rate:7.1f}x"
        )
    print(
        f"mojibake: of {repaired} documents ftfy.fix_encoding changes, dataclean repairs {matched} "
        f"identically, {better} with less mojibake left (ftfy badness), {worse} with more"
    )
    if args.json:
        kind = "web + Chinese" if have_shared() else "generated text"
        corpus = f"{len(docs):,} docs, {megabytes:.1f} MB {kind}, 3% with mojibake"
        dataclean = Measurement("CleanText stage", len(docs), megabytes, ours, peak_mb=ours_memory.megabytes)
        rows = [
            comparison(
                "clean",
                corpus,
                dataclean,
                Measurement(
                    "ftfy.fix_text on every document",
                    len(docs),
                    megabytes,
                    ftfy_all,
                    peak_mb=ftfy_memory.megabytes,
                ),
            )
        ]
        if datatrove is not None:
            seconds, peak = datatrove
            reference = Measurement("datatrove FTFYFormatter", len(docs), megabytes, seconds, peak_mb=peak)
            rows.append(comparison("clean", corpus, dataclean, reference))
        quality = {
            "ftfy_repaired": repaired,
            "same": matched,
            "less_mojibake": better,
            "more_mojibake": worse,
        }
        write_json(args.json, rows, quality=quality)


if __name__ == "__main__":
    main()
