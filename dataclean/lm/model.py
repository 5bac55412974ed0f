"""A reference language model: normalization + SentencePiece + KenLM, scored the CCNet way.

A model is a folder (the bundled ones are under `dataclean/data/lm/<lang>/`):

    model.json        what it is: language, order, vocabulary size, training data, trainer
    tokenizer.model   the SentencePiece model
    model.arpa.gz     the KenLM model (model.arpa or a KenLM binary model.bin work too)

Perplexity follows CCNet (facebookresearch/cc_net `perplexity.py`): each non-empty normalized line
is tokenized and scored by KenLM with <s> and </s>, and

    ppl = 10 ** (-sum(log10 p over lines) / sum(pieces + 1 over lines))

where the +1 counts each line's </s>. Normalization and tokenization of a batch run as one compiled
pass (`dataclean.lm.compiled`) that gives SentencePiece's own pieces, and the KenLM query as another
(`dataclean.lm.ngram`, on the tables `dataclean.lm.arpa` reads from the ARPA file) that gives KenLM's
own scores; KenLM itself is loaded only for a model those tables do not take (a KenLM binary file,
an ARPA file with blanks; see `arpa.py`).

Short texts: a perplexity over a handful of tokens is noise (data-juicer users report 225,308 for
a four-character Chinese phrase), so a text with fewer than `min_tokens` pieces gets NaN ("not
scored") instead of a number.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import kenlm
import numpy as np
import pyarrow as pa

from dataclean.errors import ConfigError
from dataclean.lm.arpa import read_arpa
from dataclean.lm.compiled import Tokenized, compile_tokenizer
from dataclean.lm.ngram import NgramScorer
from dataclean.lm.normalize import normalize_lines
from dataclean.lm.tokenizer import Tokenizer
from dataclean.lm.unigram import read_unigram

BUNDLED = ("en", "zh")
MODEL_FILES = ("model.bin", "model.arpa.gz", "model.arpa")
METADATA_FILE = "model.json"
TOKENIZER_FILE = "tokenizer.model"
# Texts with fewer SentencePiece pieces than this are not scored by default (see module docstring).
DEFAULT_MIN_TOKENS = 8


@dataclass
class Scores:
    """Per-text sums over lines: log10 probability, tokens (pieces + one </s> per line), lines."""

    log10_prob: np.ndarray
    tokens: np.ndarray
    lines: np.ndarray

    def perplexity(self, min_tokens: int = DEFAULT_MIN_TOKENS) -> np.ndarray:
        """CCNet perplexity per text; NaN for texts with fewer than `min_tokens` pieces."""
        with np.errstate(divide="ignore", invalid="ignore"):
            ppl = np.power(10.0, -self.log10_prob / self.tokens)
        pieces = self.tokens - self.lines
        return np.where((self.tokens > 0) & (pieces >= min_tokens), ppl, np.nan)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence writes to file descriptor 2 (C++ code's stderr); errors still raise."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class LanguageModel:
    """Scores text with a KenLM model after CCNet normalization and SentencePiece tokenization."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        metadata_path = self.directory / METADATA_FILE
        self.metadata: dict[str, Any] = (
            json.loads(metadata_path.read_text()) if metadata_path.exists() else {}
        )
        tokenizer_path = self.directory / TOKENIZER_FILE
        if not tokenizer_path.exists():
            raise ConfigError(f"{self.directory}: no {TOKENIZER_FILE}; not a dataclean model folder")
        proto = tokenizer_path.read_bytes()
        self.tokenizer = Tokenizer(proto)
        self.compiled = compile_tokenizer(proto)
        model_path = model_file(self.directory)
        if model_path is None:
            raise ConfigError(f"{self.directory}: no {' / '.join(MODEL_FILES)} in this model folder")
        self.model_path = model_path
        tables = read_arpa(model_path)
        pieces = self.tokenizer.pieces() if tables is not None else []
        self.scorer = NgramScorer(tables, pieces) if tables is not None else None
        if self.scorer is None:
            self.kenlm  # noqa: B018 (load KenLM now, as the scorer would have loaded its tables)

    @functools.cached_property
    def kenlm(self) -> Any:
        """KenLM's own model of the file: the scorer where `scorer` is None, else a reference."""
        config = kenlm.Config()
        config.show_progress = False
        with _quiet_stderr():  # KenLM prints advice about binary files on every ARPA load
            return kenlm.Model(str(self.model_path), config)

    @property
    def lang(self) -> str | None:
        """The language code the model was trained for, from model.json."""
        lang = self.metadata.get("lang")
        return str(lang) if lang is not None else None

    def normalize(self, texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """Normalized non-empty lines of all texts, and the index of the text each line is from."""
        lines: list[str] = []
        owners: list[int] = []
        for index, text in enumerate(texts):
            text_lines = normalize_lines(text)
            lines.extend(text_lines)
            owners.extend([index] * len(text_lines))
        return lines, np.asarray(owners, dtype=np.int64)

    def query(self, lines: Sequence[str] | Sequence[bytes]) -> np.ndarray:
        """KenLM's own log10 probability of each tokenized line, with <s> and </s>."""
        return np.fromiter(map(self.kenlm.score, lines), np.float64, len(lines))

    def query_tokenized(self, tokenized: Tokenized) -> np.ndarray:
        """KenLM's log10 probability of each tokenized line, with <s> and </s>: the compiled
        scorer's, or KenLM's own where the model has no tables."""
        if self.scorer is None:
            return self.query(tokenized.lines)
        return self.scorer.score(tokenized.ids, tokenized.pieces, tokenized.data)

    def tokenize_array(self, texts: pa.Array | pa.ChunkedArray) -> Tokenized:
        """Normalized, tokenized lines of a string array (nulls are ""), in text order.

        The compiled path (`dataclean.lm.compiled`) when the tokenizer is one it reproduces;
        otherwise `normalize_lines` and SentencePiece itself, which give the same lines.
        """
        if self.compiled is not None:
            return self.compiled.tokenize(texts)
        lines, owners = self.normalize(texts.fill_null("").to_pylist())
        return Tokenized.from_lines(self.tokenizer.tokenize_lines(lines), owners)

    def tokenize(self, texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """Normalized, tokenized lines of all texts, and the index of the text each line is from."""
        tokenized = self.tokenize_array(pa.array(texts, pa.string()))
        return [line.decode("utf-8") for line in tokenized.lines], tokenized.texts

    def score_array(self, texts: pa.Array | pa.ChunkedArray) -> Scores:
        """Sums of log10 probability and tokens per text of a string array (nulls are "")."""
        tokenized = self.tokenize_array(texts)
        log10_prob = self.query_tokenized(tokenized)
        size = len(texts)
        return Scores(
            log10_prob=np.bincount(tokenized.texts, weights=log10_prob, minlength=size),
            tokens=np.bincount(tokenized.texts, weights=tokenized.pieces + 1, minlength=size),
            lines=np.bincount(tokenized.texts, minlength=size).astype(np.float64),
        )

    def score(self, texts: Sequence[str]) -> Scores:
        """Sums of log10 probability and tokens per text (normalize, tokenize, query)."""
        return self.score_array(pa.array(texts, pa.string()))

    def perplexities(self, texts: Sequence[str], min_tokens: int = DEFAULT_MIN_TOKENS) -> np.ndarray:
        """Perplexity of each text; NaN where it has fewer than `min_tokens` pieces."""
        return self.score(texts).perplexity(min_tokens)

    def perplexity(self, text: str, min_tokens: int = DEFAULT_MIN_TOKENS) -> float:
        """Perplexity of one text; NaN if it has fewer than `min_tokens` pieces."""
        return float(self.perplexities([text], min_tokens)[0])


def resolve_model(name_or_path: str | Path) -> Path:
    """The folder of a bundled model name (`en`, `zh`) or of a model path."""
    if str(name_or_path) in BUNDLED:
        return Path(str(resources.files("dataclean") / "data" / "lm" / str(name_or_path)))
    path = Path(name_or_path)
    if not path.is_dir():
        raise ConfigError(
            f"language model {str(name_or_path)!r}: not a bundled model ({', '.join(BUNDLED)}) "
            "and not a model folder"
        )
    return path


def model_file(folder: Path) -> Path | None:
    """The KenLM model file of a model folder (`MODEL_FILES`, in that order), or None."""
    return next((folder / name for name in MODEL_FILES if (folder / name).exists()), None)


def prepare_tables(folder: Path) -> int | None:
    """Build and cache the tables a model's scoring reads (`unigram.read_unigram`,
    `arpa.read_arpa`), so that the processes of a run load them instead of each building them.
    Returns the n-gram order of the model's tables, None if KenLM itself scores it."""
    tokenizer = folder / TOKENIZER_FILE
    if tokenizer.exists():
        read_unigram(tokenizer.read_bytes())
    path = model_file(folder)
    tables = read_arpa(path) if path is not None else None
    return tables.order if tables is not None else None


def load_model(name_or_path: str | Path) -> LanguageModel:
    """Load a bundled model (`"en"`, `"zh"`) or a model folder written by `dataclean lm train`."""
    return LanguageModel(resolve_model(name_or_path))
