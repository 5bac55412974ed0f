"""Train a fastText quality classifier on the user's good and bad text, and measure it held out.

`train_classifier` writes a supervised fastText model (DCLM's recipe: two labels, word bigrams;
Li et al. 2024) trained by fastText's own trainer (the `fasttext-numpy2` build on PyPI, a
maintained fork of fastText 0.9 that runs on numpy 2), on exactly the text the `classify` stage
gives the model (`dataclean.classify.models.prepare_texts`, newlines as spaces). A share of the
texts (chosen by a hash of the text, so the same texts are held out on every run) is kept aside;
the finished model scores it with dataclean's own inference, and the precision, recall (of the
positive label at probability 0.5) and ROC AUC are reported.

fastText's trainer is given at least 11 threads: its `DenseMatrix::uniform` gives thread i the
elements [i * b, (i + 1) * b) of the input matrix, b = rows * dim // 10 (`uniformThread`), so
with t < 10 threads only t tenths of the matrix get their random start, and with exactly 10 the
last rows * dim % 10 elements get none; those keep what the allocation held, which in the PyPI
builds is not zeroed: training stops with "Encountered NaN" (measured with fasttext-numpy2
0.10.4, a words-only softmax model of 290 real lines with 3 labels: 19 of 20 runs with 1 or 2
threads, 3 of 20 with 10, none of 40 with 11, 12 or 16). Thread 10 covers the remainder. Extra threads on
fewer cores cost only time slices.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from dataclean.classify.models import label_probability, prepare_texts
from dataclean.errors import ConfigError
from dataclean.lang.fasttext import read_model

# fastText's trainer initializes a tenth of its input matrix per thread, the remainder by the
# eleventh (see the module docstring).
MIN_THREADS = 11


@dataclass
class Evaluation:
    """Held-out quality of a trained classifier (positive label at probability 0.5)."""

    positives: int
    negatives: int
    precision: float
    recall: float
    auc: float


def read_texts(paths: tuple[str, ...] | list[str], column: str = "text") -> Iterator[str]:
    """Texts of `.txt` files (a line each; `.gz` read transparently), `.jsonl` files (the `column`
    field of each line) and `.parquet` files (the `column` column)."""
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"{name}: no such file")
        stem = path.name.removesuffix(".gz")
        if stem.endswith(".parquet"):
            values = pq.read_table(path, columns=[column]).column(column).to_pylist()
            yield from (text for text in values if text and text.strip())
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as source:
            for number, line in enumerate(source, 1):
                if stem.endswith((".jsonl", ".json")):
                    try:
                        text = json.loads(line).get(column) if line.strip() else None
                    except (json.JSONDecodeError, AttributeError):
                        raise ConfigError(f"{name}, line {number}: not a JSON object") from None
                else:
                    text = line.rstrip("\n")
                if text and text.strip():
                    yield text


def held_out(texts: list[str], share: float) -> np.ndarray:
    """bool per text: kept aside for evaluation (a hash of the text, so stable across runs)."""
    buckets = np.array([xxhash.xxh64_intdigest(text.encode("utf-8")) % 10_000 for text in texts], np.int64)
    return buckets < int(share * 10_000)


def roc_auc(positive_scores: np.ndarray, negative_scores: np.ndarray) -> float:
    """The probability that a positive scores above a negative (ties count half): ROC AUC."""
    scores = np.concatenate([positive_scores, negative_scores])
    _values, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)
    ranks = ((last - counts + 1 + last) / 2.0)[inverse]  # 1-based, ties at their mean rank
    n_pos, n_neg = len(positive_scores), len(negative_scores)
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _fasttext_trainer() -> object:
    try:
        import fasttext
    except ModuleNotFoundError:
        fasttext = None
    if fasttext is None or not hasattr(fasttext, "train_supervised"):
        raise ConfigError(
            "training needs fastText's trainer: pip install fasttext-numpy2 "
            "(fasttext-predict, which language identification installs, only predicts)"
        )
    return fasttext


def train_classifier(
    positives: list[str],
    negatives: list[str],
    output: str,
    *,
    label: str = "hq",
    negative_label: str = "lq",
    normalize: str = "none",
    heldout: float = 0.1,
    epoch: int = 5,
    lr: float = 0.1,
    word_ngrams: int = 2,
    dim: int = 100,
    bucket: int = 2_000_000,
    min_count: int = 1,
    threads: int = MIN_THREADS,
) -> Evaluation:
    """Train on `positives` (label `label`) and `negatives`, write the model to `output` (a
    `.ftz` name writes it quantized), return its held-out evaluation (module docstring)."""
    if not positives or not negatives:
        raise ConfigError("classify train: needs positive and negative texts")
    if label == negative_label:
        raise ConfigError("classify train: the positive and negative labels must differ")
    fasttext = _fasttext_trainer()
    texts = [*positives, *negatives]
    prepared = prepare_texts(pa.array(texts, pa.string()), normalize).to_pylist()
    lines = [" ".join((text or "").split()) for text in prepared]
    is_positive = np.arange(len(texts)) < len(positives)
    aside = held_out(texts, heldout)
    if aside[is_positive].all() or aside[~is_positive].all():
        raise ConfigError("classify train: too few texts to keep a share aside; lower --heldout")
    # Training order: by a hash of the text, so positives and negatives interleave.
    order = sorted(np.flatnonzero(~aside), key=lambda i: xxhash.xxh64_intdigest(texts[i].encode("utf-8")))
    with tempfile.TemporaryDirectory(prefix="dataclean-classify-") as folder:
        train_file = os.path.join(folder, "train.txt")
        with open(train_file, "w", encoding="utf-8") as sink:
            for i in order:
                sink.write(f"__label__{label if is_positive[i] else negative_label} {lines[i]}\n")
        model = fasttext.train_supervised(  # type: ignore[attr-defined]
            input=train_file,
            lr=lr,
            epoch=epoch,
            wordNgrams=word_ngrams,
            dim=dim,
            bucket=bucket,
            minCount=min_count,
            loss="softmax",
            thread=max(threads, MIN_THREADS),
            verbose=0,
        )
        if output.endswith(".ftz"):
            model.quantize(input=train_file, retrain=False, qnorm=True)
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        model.save_model(output)
    trained = read_model(output)
    scores = label_probability(trained, pa.array([texts[i] for i in np.flatnonzero(aside)]), label, normalize)
    truth = is_positive[aside]
    predicted = scores >= 0.5
    true_positive = int((predicted & truth).sum())
    return Evaluation(
        positives=int(truth.sum()),
        negatives=int((~truth).sum()),
        precision=true_positive / max(int(predicted.sum()), 1),
        recall=true_positive / max(int(truth.sum()), 1),
        auc=roc_auc(scores[truth], scores[~truth]),
    )
