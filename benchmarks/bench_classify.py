"""Benchmark the `classify` stage: speed against fastText's own Python predict, same model, same text.

The model is a DCLM-shaped fastText classifier (two labels, word bigrams, softmax) trained here by
fastText (fasttext-numpy2) on the reference data: WikiText-2 paragraphs (label `hq`) against raw
Common Crawl pages (`lq`), `--dim` and `--bucket` as given (DCLM's own file is 2M buckets; the
default here, 500k x 100, keeps the benchmark's memory modest on a shared machine).

Speed (MB/s per core, one process, the same documents for all, each warmed up once, median of
`--rounds` rotating rounds, the ratio per round with its min-max): the `ScoreQuality` stage
(row-local: no buckets, no cut) on Arrow batches of the documents in both of its modes,
`classify.exact=true` (fastText's probabilities bit for bit) and the default (the projected
rows, `dataclean.lang.fasttext_projected`), against fastText's predict through its Python
binding on the same whole documents with newlines as spaces (prepared before the clock starts),
in both of its documented forms: one call per document, and one call with the list of documents
(`multilinePredict`). MB counts whole documents' UTF-8 bytes. Before timing, each mode's
probabilities are compared with fastText's on every document (how many are equal, the largest
difference; and each one's largest difference from the same arithmetic in float64), and so are
the cuts they make over this corpus: the 20 quality buckets and a top
10% share (`classify.keep_top=0.1`), from exact quantiles as the stage computes them.

    python benchmarks/bench_classify.py [--data REFERENCE_FOLDER] [--rounds 5] [--repeat 4]

Benchmark-only: never imported by tests.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.corpus import (
    add_data_argument,
    clean_benchmark_corpus,
    have_shared,
    use_data,
    web_docs,
)
from benchmarks.rounds import describe, round_ratios, timed_rounds
from dataclean import columns as C
from dataclean.classify.models import WHOLE_TEXT
from dataclean.classify.ranks import GRID_QUANTILES, buckets, ranks
from dataclean.classify.train import MIN_THREADS
from dataclean.lang.fasttext import hidden_vectors, read_model, utf8_buffers
from dataclean.stages.classify import ScoreQuality


def _train(folder: Path, dim: int, bucket: int) -> tuple[str, object]:
    import fasttext

    wikitext = corpus.SHARED / "en" / "wikitext2" / "valid.txt"
    positives = [
        line.strip() for line in wikitext.read_text(encoding="utf-8").splitlines() if len(line) > 200
    ]
    negatives = [" ".join(doc.split()) for doc in web_docs()]
    train = folder / "train.txt"
    with train.open("w", encoding="utf-8") as sink:
        for label, texts in (("hq", positives), ("lq", negatives)):
            sink.writelines(f"__label__{label} {text}\n" for text in texts)
    model = fasttext.train_supervised(
        str(train), dim=dim, bucket=bucket, wordNgrams=2, epoch=5, thread=MIN_THREADS, verbose=0
    )
    path = folder / "quality.bin"
    model.save_model(str(path))
    return str(path), model


def _cuts(scores: np.ndarray, keep_top: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(bucket per row, kept by keep_top) as the stage cuts one language's scores: exact corpus
    quantiles, quantile q being the value of rank ceil(q * n) (`dataclean.lm.quantiles`)."""
    cuts = np.quantile(scores, GRID_QUANTILES, method="inverted_cdf")
    least = np.quantile(scores, 1.0 - keep_top, method="inverted_cdf")
    return buckets(ranks(scores, cuts)).to_numpy(), scores >= least


def _float64_probabilities(path: str, docs: list[str], label: str) -> np.ndarray:
    """The probability of `label` computed in float64 throughout (the same rows and tokens, a
    float64 mean and dot product, then a softmax), as fastText reports it (exp of log(p + 1e-5)):
    the yardstick for how far each of fastText's float32 path and the projected rows is from
    the arithmetic they both round (the benchmark's model is a softmax)."""
    model = read_model(path)
    wide = dataclasses.replace(model, rows=model.rows.astype(np.float64))
    data, offsets = utf8_buffers(pa.array(docs, pa.string()))
    logits = hidden_vectors(wide, data, offsets, WHOLE_TEXT, np.float64) @ model.output.astype(np.float64).T
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities = shifted[:, model.labels.index(label)] / shifted.sum(axis=1)
    reported: np.ndarray = np.exp(np.log(probabilities + 1e-5))
    return reported


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(parser)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=2, help="copies of the clean benchmark's corpus")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--bucket", type=int, default=500_000)
    parser.add_argument("--batch-rows", type=int, default=2048)
    args = parser.parse_args()
    use_data(args.data, args.generated)
    if not have_shared():
        raise SystemExit("bench_classify trains its model on the reference data: give --data")
    docs = [doc for doc in clean_benchmark_corpus(args.repeat) if doc]
    megabytes = sum(len(doc.encode("utf-8")) for doc in docs) / 1e6
    lines = [doc.replace("\n", " ") for doc in docs]
    batches = [
        pa.table({C.ID: [str(i) for i in range(len(chunk))], C.TEXT: chunk, C.LANG: ["en"] * len(chunk)})
        for chunk in (docs[i : i + args.batch_rows] for i in range(0, len(docs), args.batch_rows))
    ]
    with tempfile.TemporaryDirectory(prefix="bench-classify-") as folder:
        path, reference = _train(Path(folder), args.dim, args.bucket)
        stages = {
            mode: ScoreQuality(models=(f"q:{path}",), label=("hq",), buckets=False, exact=mode == "exact")
            for mode in ("exact", "projected")
        }
        for stage in stages.values():
            stage.setup()
        labels, probabilities = reference.predict(lines, k=-1)  # type: ignore[attr-defined]
        theirs = np.array(
            [
                dict(zip(ls, ps, strict=True)).get("__label__hq", 0.0)
                for ls, ps in zip(labels, probabilities, strict=True)
            ]
        )
        their_buckets, their_kept = _cuts(theirs)
        wide = _float64_probabilities(path, docs, "hq")
        own = float(np.abs(theirs - wide).max())
        print(f"fastText itself: the largest difference from the float64 computation {own:.1e}")
        for mode, stage in stages.items():
            ours = np.concatenate([stage(batch).column("quality_q").to_numpy() for batch in batches])
            same = int((ours.astype(np.float32) == theirs.astype(np.float32)).sum())
            difference = float(np.abs(ours - theirs).max())
            our_buckets, our_kept = _cuts(ours)
            bucket_rows, top_rows = (
                int((our_buckets != their_buckets).sum()),
                int((our_kept != their_kept).sum()),
            )
            print(
                f"agreement, {mode:>9}: {same:,} of {len(docs):,} documents get fastText's probability "
                f"exactly, the largest difference {difference:.1e} (from the float64 computation: "
                f"{np.abs(ours - wide).max():.1e}); rows whose bucket differs: {bucket_rows}, whose "
                f"top-10% cut differs: {top_rows}"
            )
        seconds = timed_rounds(
            {
                "exact": lambda: [stages["exact"](batch) for batch in batches],
                "projected": lambda: [stages["projected"](batch) for batch in batches],
                "per document": lambda: [reference.predict(line, k=-1) for line in lines],  # type: ignore[attr-defined]
                "list": lambda: reference.predict(lines, k=-1),  # type: ignore[attr-defined]
            },
            args.rounds,
        )
    print(f"speed: {len(docs):,} documents, {megabytes:.1f} MB, median of {args.rounds} rounds, one process")
    rates = {name: megabytes / statistics.median(times) for name, times in seconds.items()}
    print(f"  dataclean ScoreQuality, default (projected) {rates['projected']:8.1f} MB/s")
    print(f"  dataclean ScoreQuality, classify.exact=true {rates['exact']:8.1f} MB/s")
    print(f"  fastText predict, one call per document     {rates['per document']:8.1f} MB/s")
    print(f"  fastText predict, one call with the list    {rates['list']:8.1f} MB/s")
    best = "list" if rates["list"] >= rates["per document"] else "per document"
    for mode in ("projected", "exact"):
        ratios = round_ratios(seconds[best], seconds[mode])
        print(f"  {mode} against fastText's faster form ({best}), per round: {describe(ratios, 1, 'x')}")


if __name__ == "__main__":
    main()
