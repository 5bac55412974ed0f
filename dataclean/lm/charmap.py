"""CCNet normalization as a table over code points, for the compiled scorer (`dataclean.lm.fast`).

`normalize_text` (lowercase, NFD, drop accents and controls, digits to 0, punctuation to ASCII) acts
on each character independently, with two exceptions: Python lowercases a capital sigma by its
context (final "ς" or "σ"), and NFD reorders runs of combining characters. So one table lookup per
character gives exactly `normalize_text`, except in texts holding a character marked `UNSAFE`
(the capital sigma, and every character whose normalized form keeps a combining character): the
compiled scorer sends those texts through `normalize_text` itself.

The table also turns every whitespace character into a plain space, since `normalize_lines`
collapses any run of whitespace inside a line into one space.

Layout: `index[code]` is `IDENTITY` (the character stays), `UNSAFE`, or a position `k` in `pool`,
where `pool[k]` is the length `n` of the replacement and `pool[k + 1 : k + 1 + n]` its code points
(`n` = 0 deletes the character).
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass

import numpy as np

from dataclean.lm.normalize import kept_combining, normalize_text

IDENTITY = 0
UNSAFE = -1
NEWLINE = ord("\n")
SPACE = ord(" ")
_CAPITAL_SIGMA = 0x3A3


@dataclass(frozen=True)
class CharTable:
    """A per-code-point rewrite (module docstring) and its largest growth in code points per byte."""

    index: np.ndarray
    pool: np.ndarray
    expansion: int


def _every_character() -> tuple[np.ndarray, str]:
    """All code points but surrogates and "\n", and a string of them each followed by "\n"."""
    codes = np.arange(sys.maxunicode + 1, dtype=np.uint32)
    surrogate = (codes >= 0xD800) & (codes <= 0xDFFF)  # never in valid UTF-8, so never looked up
    codes = codes[(codes != NEWLINE) & ~surrogate]
    interleaved = np.empty(2 * len(codes), np.uint32)
    interleaved[0::2] = codes
    interleaved[1::2] = NEWLINE
    return codes, interleaved.tobytes().decode("utf-32-le")


@functools.cache
def whitespace_codes() -> np.ndarray:
    """The code points `str.split()` splits at, but "\n"."""
    _, every_char = _every_character()
    return np.array(sorted(ord(c) for c in set(re.findall(r"\s", every_char)) if c != "\n"), np.int32)


def _utf8_lengths(codes: np.ndarray) -> np.ndarray:
    return 1 + (codes >= 0x80).astype(np.int64) + (codes >= 0x800) + (codes >= 0x10000)


@functools.cache
def whitespace_table() -> CharTable:
    """Only whitespace to spaces: for text that `normalize_text` normalized already."""
    index = np.full(sys.maxunicode + 1, IDENTITY, np.int32)
    index[whitespace_codes()] = 1
    index[0xD800:0xE000] = UNSAFE
    return CharTable(index, np.array([0, 1, SPACE], np.int32), 1)


@functools.cache
def normalization_table() -> CharTable:
    """`normalize_text` followed by whitespace collapsing, as a table (module docstring)."""
    codes, every_char = _every_character()
    # Normalize every character in one call, each followed by "\n": NFD never reorders across a
    # "\n" (combining class 0) and "\n" itself maps to itself.
    normalized = np.frombuffer(normalize_text(every_char).encode("utf-32-le"), np.uint32).copy()
    ends = np.flatnonzero(normalized == NEWLINE)
    assert len(ends) == len(codes), "normalization created or removed a line break"
    starts = np.concatenate(([0], ends[:-1] + 1))
    normalized[np.isin(normalized, whitespace_codes())] = SPACE
    single = normalized[np.minimum(starts, len(normalized) - 1)]
    identity = (ends - starts == 1) & (single == codes)
    kept = np.concatenate(([0], np.cumsum(np.isin(normalized, list(kept_combining())))))
    unsafe = (kept[ends] > kept[starts]) | (codes == _CAPITAL_SIGMA)

    index = np.full(sys.maxunicode + 1, UNSAFE, np.int32)
    index[NEWLINE] = IDENTITY
    index[codes[identity & ~unsafe]] = IDENTITY
    replaced = ~identity & ~unsafe
    lengths = ends[replaced] - starts[replaced]
    positions = 1 + np.concatenate(([0], np.cumsum(lengths + 1)[:-1]))
    index[codes[replaced]] = positions
    pool = np.zeros(1 + int(np.sum(lengths + 1)), np.int32)  # 0 is never a position: IDENTITY
    pool[positions] = lengths
    # Each replacement's code points follow its length: gather them in one go.
    segment = np.repeat(np.arange(len(lengths)), lengths)
    within = np.arange(len(segment)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    pool[positions[segment] + 1 + within] = normalized[starts[replaced][segment] + within]
    expansion = np.max(lengths / _utf8_lengths(codes[replaced]), initial=1.0)
    return CharTable(index, pool, int(np.ceil(expansion)))
