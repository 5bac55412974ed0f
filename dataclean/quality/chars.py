"""Character classes of the quality tokenizer: one uint32 of flags per code point.

The table (`dataclean/data/quality/char_classes.npz`) is built by
`scripts/build_quality_tables.py`, which asks spaCy's English tokenizer regexes, datatrove's
punctuation sets and Python's `str` methods about every code point, so the compiled code needs no
regex: spaCy's classes (ALPHA, ALPHA_LOWER, ALPHA_UPPER, quotes, icons, the one-character
prefixes and suffixes, the characters a period may follow as a suffix, URL host characters),
datatrove's `PUNCTUATION_SET` and `TERMINAL_PUNCTUATION`, `str.isspace`/`str.isalpha`, Unicode
category P (spaCy's `is_punct`), the sentencizer's sentence-final characters, `str.splitlines`
boundaries, and Han/kana (one word per character in the Chinese rules).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

ALPHA = 1 << 0
LOWER = 1 << 1
UPPER = 1 << 2
QUOTE = 1 << 3
ICON = 1 << 4
BEFORE_PERIOD = 1 << 5
HOST = 1 << 6
WORD = 1 << 7
SPACE = 1 << 8
IS_ALPHA = 1 << 9
PREFIX = 1 << 10
SUFFIX = 1 << 11
PUNCTUATION = 1 << 12
TERMINAL = 1 << 13
P_CATEGORY = 1 << 14
SENTENCE_END = 1 << 15
LINE_BREAK = 1 << 16
HAN = 1 << 17

TABLES = Path(__file__).resolve().parent.parent / "data" / "quality"


def is_han_or_kana(code: int) -> bool:
    """CJK unified ideographs (and extensions, compatibility forms), hiragana, katakana."""
    return (
        0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF
        or 0xF900 <= code <= 0xFAFF
        or 0x20000 <= code <= 0x323AF
        or 0x3040 <= code <= 0x30FF
        or 0x31F0 <= code <= 0x31FF
    )


@lru_cache(maxsize=1)
def char_classes() -> np.ndarray:
    """The flags of every code point (uint32, indexed by code point)."""
    with np.load(TABLES / "char_classes.npz") as data:
        return np.ascontiguousarray(data["flags"])
