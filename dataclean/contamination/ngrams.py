"""The n-grams that decontamination matches: word n-grams and character n-grams of normalized text.

Texts are normalized as dedup normalizes them (`dataclean.dedup.shingles.Normalized`: case, width,
punctuation and digits folded, whitespace runs made one space), then cut into two streams of tokens:
- words: runs of letters and digits between spaces, of scripts written with spaces (Latin,
  Cyrillic, Greek, Arabic...); word n-grams are the GPT-3 / lm-evaluation-harness unit (13 words);
- characters: each letter of an unsegmented script (Han, kana, Thai, Lao, Khmer, Myanmar) is a
  token of its own, whatever stands between them (a number or a Latin word inside Chinese text is
  a word of the word stream, not a break of the character stream); character n-grams catch
  Chinese text, which has no spaces for word n-grams to find.
Both streams come from every text, so a Chinese question quoted inside an English page (or the
reverse) is found as well as one inside Chinese text. A word n-gram is n words in a row, with no
character of the other stream between them (the numbers scattered through a Chinese text are not
a sentence); a character n-gram may have words between its characters (a year, a Latin name), but
fewer than it has characters. A text with fewer tokens in a stream than
the n-gram length has no n-gram of that stream: an eval field shorter than one n-gram (a one-word
answer) never matches alone.

Each n-gram is hashed to 64 bits (FNV-1a 64 of each token, combined in order with the stream as a
seed, then XXH64's final avalanche), so the word n-gram "a b c" and the character n-gram "abc"
never collide by construction, and unrelated n-grams collide with probability about 2**-64 per
pair. `ngram_hashes` also gives, per n-gram, its row and the positions of its first and last token
in the row's token sequence (both streams counted together, in text order), from which the
`remove` mode finds the text to cut.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.dedup.shingles import DEFAULT_FOLD, Normalized, unsegmented_code_points

WORD_STREAM, CHAR_STREAM = 0, 1
# Text per call of the kernel: its output arrays take about 24 bytes per byte of this much text.
CHUNK_BYTES = 1 << 20

_FNV64_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV64_PRIME = np.uint64(0x100000001B3)
_P1 = np.uint64(11400714785074694791)
_P2 = np.uint64(14029467366897019727)
_P3 = np.uint64(1609587929392839161)


@nb.njit(cache=True, nogil=True)
def _combine(tokens: np.ndarray, start: int, count: int, stream: int) -> np.uint64:
    acc = np.uint64(count) ^ (np.uint64(stream + 1) * _P3)
    for i in range(start, start + count):
        acc = acc ^ (tokens[i] * _P1)
        acc = ((acc << np.uint64(31)) | (acc >> np.uint64(33))) * _P2
    acc ^= acc >> np.uint64(33)
    acc *= _P2
    acc ^= acc >> np.uint64(29)
    acc *= _P3
    return acc ^ (acc >> np.uint64(32))


@nb.njit(cache=True, nogil=True)
def _ngrams_kernel(
    data: np.ndarray,
    offsets: np.ndarray,
    unsegmented: np.ndarray,
    word_n: int,
    char_n: int,
    tokens: np.ndarray,
    positions: np.ndarray,
    out_hashes: np.ndarray,
    out_rows: np.ndarray,
    out_first: np.ndarray,
    out_last: np.ndarray,
    row_base: int,
) -> int:
    """N-grams of every row of a normalized buffer into the `out_*` arrays; returns how many.

    `tokens`, `positions`: scratch space for one row's tokens (the caller sizes them: twice the
    longest row's bytes, words at the front, characters in the back half).
    """
    count = 0
    for row in range(len(offsets) - 1):
        i, end = offsets[row], offsets[row + 1]
        n_words = 0
        n_chars = 0
        h = _FNV64_OFFSET
        in_word = False
        position = 0
        half = len(tokens) // 2
        while i < end:
            b0 = np.int64(data[i])
            length = 1
            cp = b0
            if b0 >= 0xF0:
                length = 4
                cp = (b0 & 0x07) << 18 | (np.int64(data[i + 1]) & 0x3F) << 12
            elif b0 >= 0xE0:
                length = 3
                cp = (b0 & 0x0F) << 12 | (np.int64(data[i + 1]) & 0x3F) << 6 | (np.int64(data[i + 2]) & 0x3F)
            elif b0 >= 0xC0:
                length = 2
                cp = (b0 & 0x1F) << 6 | (np.int64(data[i + 1]) & 0x3F)
            is_char = (cp < 0x10000 and unsegmented[cp]) or (0x20000 <= cp < 0x40000)
            if b0 == 0x20 or is_char:
                if in_word:
                    tokens[n_words] = h
                    positions[n_words] = position
                    n_words += 1
                    position += 1
                    in_word = False
                    h = _FNV64_OFFSET
                if is_char:
                    c = _FNV64_OFFSET
                    for k in range(i, i + length):
                        c = (c ^ np.uint64(data[k])) * _FNV64_PRIME
                    tokens[half + n_chars] = c
                    positions[half + n_chars] = position
                    n_chars += 1
                    position += 1
            else:
                in_word = True
                for k in range(i, i + length):
                    h = (h ^ np.uint64(data[k])) * _FNV64_PRIME
            i += length
        if in_word:
            tokens[n_words] = h
            positions[n_words] = position
            n_words += 1
        for k in range(n_words - word_n + 1):
            if positions[k + word_n - 1] - positions[k] != word_n - 1:
                continue  # words on both sides of Chinese text are not an n-gram
            out_hashes[count] = _combine(tokens, k, word_n, WORD_STREAM)
            out_rows[count] = row_base + row
            out_first[count] = positions[k]
            out_last[count] = positions[k + word_n - 1]
            count += 1
        for k in range(n_chars - char_n + 1):
            if positions[half + k + char_n - 1] - positions[half + k] >= 2 * char_n:
                continue  # as many words as characters in between: not one stretch of Chinese
            out_hashes[count] = _combine(tokens, half + k, char_n, CHAR_STREAM)
            out_rows[count] = row_base + row
            out_first[count] = positions[half + k]
            out_last[count] = positions[half + k + char_n - 1]
            count += 1
    return count


@dataclass
class NGrams:
    """The n-grams of a batch: `hashes` (uint64), and per n-gram its `rows` (int64) and the token
    positions of its first and last token in that row (`first`, `last`, int32)."""

    hashes: np.ndarray
    rows: np.ndarray
    first: np.ndarray
    last: np.ndarray


def ngram_hashes(
    texts: pa.Array | pa.ChunkedArray | Sequence[str | None],
    word_n: int,
    char_n: int,
    fold: Sequence[str] = DEFAULT_FOLD,
    normalized: bool = False,
) -> NGrams:
    """The word and character n-grams of every text (see the module docstring). `normalized=True`
    takes the texts as already normalized (tokens separated by single spaces)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not isinstance(texts, pa.Array):
        texts = pa.array(list(texts), pa.string())
    table = unsegmented_code_points(fold)
    parts: list[NGrams] = []
    start = 0
    rows = len(texts)
    lengths = np.asarray(pc.binary_length(texts).fill_null(0), dtype=np.int64)
    while start < rows:
        stop, size = start, 0
        while stop < rows and (stop == start or size + lengths[stop] <= CHUNK_BYTES):
            size += lengths[stop]
            stop += 1
        chunk = texts.slice(start, stop - start)
        data, offsets = _buffer(chunk, fold, normalized)
        longest = int(np.max(np.diff(offsets))) if len(offsets) > 1 else 0
        tokens = np.empty(2 * longest + 2, dtype=np.uint64)
        positions = np.empty(2 * longest + 2, dtype=np.int32)
        total = int(offsets[-1] - offsets[0]) + 1
        out = NGrams(*(np.empty(total, dtype) for dtype in (np.uint64, np.int64, np.int32, np.int32)))
        used = _ngrams_kernel(data, offsets, table, word_n, char_n, tokens, positions, *_fields(out), start)
        parts.append(NGrams(*(values[:used] for values in _fields(out))))
        start = stop
    if not parts:
        empty = np.zeros(0, np.int32)
        return NGrams(np.zeros(0, np.uint64), np.zeros(0, np.int64), empty, empty)
    return NGrams(*(np.concatenate(values) for values in zip(*map(_fields, parts), strict=True)))


def _fields(ngrams: NGrams) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return ngrams.hashes, ngrams.rows, ngrams.first, ngrams.last


def _buffer(texts: pa.Array, fold: Sequence[str], normalized: bool) -> tuple[np.ndarray, np.ndarray]:
    """A UTF-8 buffer and row offsets (relative to it) of the normalized texts."""
    if normalized:
        from dataclean.dedup.hashing import string_buffers

        data, offsets = string_buffers(texts.fill_null(""))
        return data, offsets.astype(np.int64)  # absolute offsets into the data buffer: fine
    norm = Normalized(texts.fill_null(""), fold)
    return norm.data, norm.offsets


def tokens(normalized: str, fold: Sequence[str] = DEFAULT_FOLD) -> list[str]:
    """The tokens of a normalized text in order, both streams together (the kernel's reference)."""
    table = unsegmented_code_points(fold)
    found: list[str] = []
    word = ""
    for char in normalized:
        cp = ord(char)
        is_char = (table[cp] if cp < 0x10000 else 0x20000 <= cp < 0x40000) and char != " "
        if char == " " or is_char:
            if word:
                found.append(word)
                word = ""
            if is_char:
                found.append(char)
        else:
            word += char
    if word:
        found.append(word)
    return found
