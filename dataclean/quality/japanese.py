"""Japanese words as FineWeb-2 counts them: SudachiPy's morphemes, split mode A.

FineWeb-2 counts Japanese words with datatrove's tokenizer for `jpn_Jpan`: spaCy's `ja` language
over SudachiPy with `sudachidict_core` and no split mode set, which datatrove's
`JapaneseTokenizer` turns into mode A (the shortest units), on pieces of at most 40,000 UTF-8
bytes (`chunk_text_on_bytes`); its words are the morphemes' surfaces, stripped, without the
whitespace ones. These are those words, as code-point spans of each text, for the compiled rules
to read instead of cutting the text themselves (`dataclean.quality.signals`): a morphological
analysis with a 200 MB dictionary is not something to reproduce in numba.

SudachiPy is the `ja` extra (`pip install dataclean[ja]`). Without it the Japanese table counts
one word per kana or Han character, as it did before, and the stage counts those rows
(`japanese_characters_as_words` in its stats and the report): nothing changes silently.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

# datatrove cuts a Japanese text into pieces of at most this many UTF-8 bytes before SudachiPy
# (which refuses inputs over 49,149 bytes); the pieces are tokenized apart.
CHUNK_BYTES = 40_000
_local = threading.local()  # a SudachiPy tokenizer is not safe to share between threads


@lru_cache(maxsize=1)
def sudachi_available() -> bool:
    """Whether SudachiPy and its core dictionary import (the `ja` extra is installed)."""
    try:
        import sudachidict_core  # noqa: F401
        import sudachipy  # noqa: F401
    except ImportError:
        return False
    return True


@lru_cache(maxsize=1)
def _dictionary() -> Any:
    from sudachipy import Dictionary

    return Dictionary(dict="core")


def _tokenizer() -> Any:
    tokenizer = getattr(_local, "tokenizer", None)
    if tokenizer is None:
        from sudachipy import SplitMode

        tokenizer = _local.tokenizer = _dictionary().tokenizer(mode=SplitMode.A)
    return tokenizer


def chunks(text: str, max_bytes: int = CHUNK_BYTES) -> list[str]:
    """datatrove's `chunk_text_on_bytes` (datatrove 0.10, `utils/word_tokenizers.py`, Apache-2.0):
    consecutive pieces of `text` of at most `max_bytes` UTF-8 bytes, found by growing a guess."""

    def utf8_length(piece: str) -> int:
        return len(piece.encode("utf-8"))

    total = utf8_length(text)
    factor = len(text) / total if total > 0 else 1
    increase_by = int(max(min(max_bytes * 0.1, 10), 1))
    guess = int(max(max_bytes * factor - 10, 1))
    pieces = []
    remaining = text
    while remaining:
        part = remaining[:guess]
        if utf8_length(part) > max_bytes:
            guess = int(max(guess - min(max_bytes * 0.001, 10), 1))
            continue
        cut = guess
        while utf8_length(part) < max_bytes and part != remaining:
            cut = min(len(remaining), cut + increase_by)
            part = remaining[:cut]
        if utf8_length(part) > max_bytes:
            cut -= increase_by
        pieces.append(remaining[:cut])
        remaining = remaining[cut:]
    return pieces


def word_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) code-point spans of `text`'s words as datatrove counts them for Japanese:
    SudachiPy's mode A morphemes per piece, each stripped of whitespace, whitespace ones left out."""
    tokenizer = _tokenizer()
    spans = []
    base = 0
    for piece in chunks(text):
        for morpheme in tokenizer.tokenize(piece):
            start, end = morpheme.begin(), morpheme.end()
            while start < end and piece[start].isspace():
                start += 1
            while end > start and piece[end - 1].isspace():
                end -= 1
            if start < end:
                spans.append((base + start, base + end))
        base += len(piece)
    return spans


def word_bounds(texts: Sequence[str | None], rows: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The words of `texts` (the texts of `rows`, of a batch of `count` rows) as the compiled
    rules take them: `bounds[row]` (first, end) into `spans` (rows of start, end in code points),
    (-1, -1) for a row whose words the rules cut themselves."""
    bounds = np.full((count, 2), -1, np.int64)
    found: list[tuple[int, int]] = []
    for row, text in zip(rows, texts, strict=True):
        first = len(found)
        found.extend(word_spans(text or ""))
        bounds[row] = first, len(found)
    spans = np.array(found, np.int64).reshape(-1, 2)
    return bounds, spans
