"""SentencePiece tokenization of normalized lines (the pieces KenLM scores).

Our SentencePiece models are trained on normalized text with SentencePiece's own normalization off
(`identity` rule, no whitespace collapsing, no dummy prefix): `dataclean.lm.normalize` already did
that work, so training and scoring see exactly the same characters. We prepend the one space that
marks the first word ourselves, so every word, the first included, starts with the "▁" symbol.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Any

import sentencepiece as spm

from dataclean.lm.normalize import normalize_text

# Distinct words kept in a tokenizer's cache before it starts over.
CACHE_SIZE = 200_000

# Normalization is ours (dataclean.lm.normalize); see the module docstring.
_TRAINER_SETTINGS: dict[str, Any] = {
    "model_type": "unigram",
    "normalization_rule_name": "identity",
    "add_dummy_prefix": False,
    "remove_extra_whitespaces": False,
    "split_by_whitespace": True,
    "num_threads": 1,  # deterministic output
    "minloglevel": 2,
    "hard_vocab_limit": False,
}


def train_sentencepiece(lines: Iterable[str], vocab_size: int, character_coverage: float = 0.9995) -> bytes:
    """Train a unigram SentencePiece model on normalized lines; return the serialized model."""
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=(" " + line for line in lines),
        model_writer=buffer,
        vocab_size=vocab_size,
        character_coverage=character_coverage,
        **_TRAINER_SETTINGS,
    )
    return buffer.getvalue()


class Tokenizer:
    """Turns normalized lines into space-separated SentencePiece pieces, the input KenLM reads.

    Pieces never cross the start of a word (whitespace splitting), so a line's pieces are its words'
    pieces, and words repeat: ASCII lines (most English after normalization) are tokenized word
    by word through a cache, other lines (Chinese has no spaces to cut at) by SentencePiece
    directly. Both give SentencePiece's segmentation, except that where two segmentations score
    exactly the same (a run of one repeated character, such as "0000") floating-point rounding may
    pick the other of the two.
    """

    def __init__(self, model_proto: bytes, cache_size: int = CACHE_SIZE) -> None:
        self.processor = spm.SentencePieceProcessor(model_proto=model_proto)
        self.cache_size = cache_size
        self._words: dict[str, str] = {}

    def tokenize_words(self, lines: Sequence[list[str]]) -> list[str]:
        """Pieces of lines given as lists of ASCII words, each word normalized first.

        Normalizing a normalized word changes nothing, so raw plain-ASCII words (see
        `normalize.is_plain_ascii`) and normalized ones share one cache keyed by the word as given.
        """
        cache = self._words
        missing = set().union(*lines).difference(cache)
        if len(cache) + len(missing) > self.cache_size:
            cache.clear()
            missing = set().union(*lines)
        if missing:
            keys = list(missing)
            encoded = self.processor.encode([" " + normalize_text(w) for w in keys], out_type=str)
            cache.update(zip(keys, map(" ".join, encoded), strict=True))
        pieces_of = cache.__getitem__
        return [" ".join(map(pieces_of, words)) for words in lines]

    def tokenize_lines(self, lines: Sequence[str]) -> list[str]:
        """Pieces of each normalized line, joined by single spaces."""
        ascii_lines = [i for i, line in enumerate(lines) if line.isascii()]
        result: list[str] = [""] * len(lines)
        if ascii_lines:
            tokenized = self.tokenize_words([lines[i].split(" ") for i in ascii_lines])
            for i, line in zip(ascii_lines, tokenized, strict=True):
                result[i] = line
        others = [i for i, line in enumerate(lines) if not line.isascii()]
        if others:
            encoded = self.processor.encode([" " + lines[i] for i in others], out_type=str)
            for i, line_pieces in zip(others, encoded, strict=True):
                result[i] = " ".join(line_pieces)
        return result

    def tokenize_whole_lines(self, lines: Sequence[str]) -> list[str]:
        """Reference path without the word cache: SentencePiece on each whole line."""
        encoded = self.processor.encode([" " + line for line in lines], out_type=str)
        return [" ".join(pieces) for pieces in encoded]
