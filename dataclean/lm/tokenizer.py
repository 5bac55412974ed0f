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

    SentencePiece itself, line by line. Scoring uses `dataclean.lm.compiled`, which gives the same
    pieces several times faster; this is the reference it is tested against and the path for
    SentencePiece models it does not reproduce.
    """

    def __init__(self, model_proto: bytes) -> None:
        self.processor = spm.SentencePieceProcessor(model_proto=model_proto)

    def pieces(self) -> list[str]:
        """The vocabulary, by id."""
        return [self.processor.id_to_piece(i) for i in range(self.processor.get_piece_size())]

    def tokenize_lines(self, lines: Sequence[str]) -> list[str]:
        """Pieces of each normalized line, joined by single spaces."""
        encoded = self.processor.encode([" " + line for line in lines], out_type=str)
        return [" ".join(pieces) for pieces in encoded]
