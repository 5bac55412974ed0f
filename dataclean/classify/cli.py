"""`dataclean classify ...`: train a fastText quality classifier; score texts with one.

`classify` is a click group that the main CLI imports when it is used (`LAZY_COMMANDS`).
"""

from __future__ import annotations

import json
import sys

import click
import pyarrow as pa

from dataclean.classify.models import NORMALIZATIONS, label_probability, load_classifier
from dataclean.classify.train import MIN_THREADS, read_texts, train_classifier

classify = click.Group("classify", help="fastText quality classifiers (DCLM, FineWeb-Edu recipes).")


@classify.command()
@click.argument("positive", nargs=-1, required=True)
@click.option("--negative", multiple=True, required=True, help="Files of bad text (repeatable).")
@click.option("-o", "--output", required=True, help="Model file to write (.bin; .ftz: quantized).")
@click.option("--label", default="hq", show_default=True, help="Label of the positive texts.")
@click.option("--negative-label", default="lq", show_default=True)
@click.option("--text-column", default="text", show_default=True, help="Field of .jsonl/.parquet files.")
@click.option("--normalize", type=click.Choice(NORMALIZATIONS), default="none", show_default=True)
@click.option("--heldout", type=float, default=0.1, show_default=True, help="Share kept aside to evaluate.")
@click.option("--epoch", type=int, default=5, show_default=True)
@click.option("--lr", type=float, default=0.1, show_default=True)
@click.option("--word-ngrams", type=int, default=2, show_default=True)
@click.option("--dim", type=int, default=100, show_default=True)
@click.option("--bucket", type=int, default=2_000_000, show_default=True, help="Hashed n-gram rows.")
@click.option("--threads", type=int, default=MIN_THREADS, show_default=True, help=f"At least {MIN_THREADS}.")
def train(
    positive: tuple[str, ...],
    negative: tuple[str, ...],
    output: str,
    label: str,
    negative_label: str,
    text_column: str,
    normalize: str,
    heldout: float,
    epoch: int,
    lr: float,
    word_ngrams: int,
    dim: int,
    bucket: int,
    threads: int,
) -> None:
    """Train a classifier of POSITIVE text files (.txt a line each, .jsonl, .parquet) against
    --negative ones; print its held-out precision, recall and AUC."""
    result = train_classifier(
        list(read_texts(positive, text_column)),
        list(read_texts(negative, text_column)),
        output,
        label=label,
        negative_label=negative_label,
        normalize=normalize,
        heldout=heldout,
        epoch=epoch,
        lr=lr,
        word_ngrams=word_ngrams,
        dim=dim,
        bucket=bucket,
        threads=threads,
    )
    click.echo(
        f"wrote {output}; held out {result.positives:,} positive and {result.negatives:,} negative "
        f"texts: precision {result.precision:.3f}, recall {result.recall:.3f}, AUC {result.auc:.3f}"
    )
    settings = f"classify.models=NAME:{output} --set classify.label={label}"
    click.echo(f"use it: dataclean run ... --set {settings}")


@classify.command()
@click.argument("texts", nargs=-1)
@click.option("-m", "--model", required=True, help="fastText model file or URI.")
@click.option("--label", default=None, help="Label whose probability to print (default: the first).")
@click.option("--normalize", type=click.Choice(NORMALIZATIONS), default="none", show_default=True)
def score(texts: tuple[str, ...], model: str, label: str | None, normalize: str) -> None:
    """Print the probability of the label for each TEXT (or each stdin line), as JSON lines."""
    lines = list(texts) or sys.stdin.read().splitlines()
    wanted = label.removeprefix("__label__") if label else None
    probabilities = label_probability(load_classifier(model), pa.array(lines, pa.string()), wanted, normalize)
    for text, probability in zip(lines, probabilities, strict=True):
        record = {"text": text, "probability": round(float(probability), 6)}
        click.echo(json.dumps(record, ensure_ascii=False))
