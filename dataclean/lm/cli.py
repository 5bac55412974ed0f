"""`dataclean lm ...`: train a reference language model, score texts with one.

`lm` is a click group that the main CLI registers (`cli.add_command(lm)`).
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import click

from dataclean.errors import ConfigError
from dataclean.lm.model import DEFAULT_MIN_TOKENS, load_model
from dataclean.lm.train import train_model


def _read_lines(paths: tuple[str, ...]) -> Iterator[str]:
    """Lines of plain-text corpora (.gz read transparently); each line is one training sentence."""
    for name in paths:
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"{name}: no such corpus file")
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as source:
                yield from source
        else:
            with path.open(encoding="utf-8", errors="replace") as source:
                yield from source


def _prune(value: str) -> tuple[int, ...]:
    try:
        thresholds = tuple(int(part) for part in value.replace(",", " ").split())
    except ValueError:
        raise ConfigError(f"--prune {value!r}: expected integers such as '0 1 2'") from None
    return thresholds or (0,)


lm = click.Group("lm", help="Reference language models for perplexity (CCNet recipe).")


@lm.command()
@click.argument("corpus", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="Model folder to write.")
@click.option("--order", type=int, default=4, show_default=True, help="n-gram order.")
@click.option(
    "--vocab-size", type=int, default=8000, show_default=True, help="SentencePiece vocabulary size."
)
@click.option(
    "--prune",
    default="0",
    show_default=True,
    help="Per-order count thresholds, e.g. '0 1 2': drop bigrams seen once, "
    "trigrams and up seen at most twice (lmplz --prune).",
)
@click.option(
    "--character-coverage",
    type=float,
    default=0.9995,
    show_default=True,
    help="SentencePiece character coverage (1.0 for small alphabets).",
)
@click.option("--lang", default=None, help="Language code recorded in model.json.")
@click.option(
    "--trainer",
    type=click.Choice(["auto", "lmplz", "python"]),
    default="auto",
    show_default=True,
    help="auto: KenLM's lmplz if on PATH, else the built-in trainer.",
)
def train(
    corpus: tuple[str, ...],
    output: str,
    order: int,
    vocab_size: int,
    prune: str,
    character_coverage: float,
    lang: str | None,
    trainer: str,
) -> None:
    """Train a model folder from CORPUS text files (one sentence or paragraph per line)."""
    info = train_model(
        _read_lines(corpus),
        output,
        order=order,
        vocab_size=vocab_size,
        prune=_prune(prune),
        character_coverage=character_coverage,
        trainer=trainer,  # type: ignore[arg-type]
        metadata={"lang": lang, "training_data": [str(Path(c).name) for c in corpus]},
    )
    ngrams = info.get("ngrams")
    click.echo(
        f"wrote {output}: {info['lines']:,} lines, {info['pieces']:,} pieces, trainer {info['trainer']}"
        + (f", n-grams {ngrams}" if ngrams else "")
    )


@lm.command()
@click.argument("texts", nargs=-1)
@click.option("-m", "--model", default="en", show_default=True, help="Bundled name or model folder.")
@click.option("--min-tokens", type=int, default=DEFAULT_MIN_TOKENS, show_default=True)
def score(texts: tuple[str, ...], model: str, min_tokens: int) -> None:
    """Print the perplexity of each TEXT (or of each stdin line), as JSON lines."""
    language_model = load_model(model)
    lines = list(texts) or sys.stdin.read().splitlines()
    for text, ppl in zip(lines, language_model.perplexities(lines, min_tokens), strict=True):
        click.echo(
            json.dumps(
                {"text": text, "ppl": None if ppl != ppl else round(float(ppl), 1)}, ensure_ascii=False
            )
        )
