"""Letters by script in each text's sample: what `dataclean.lang` needs besides the model.

One numba pass over a string array's UTF-8 bytes counts, in each text's first `max_chars`
characters: letters of any script (a text without any is `und`), Han characters (CJK unified
ideographs, their extensions and compatibility forms), kana, and Latin letters (ASCII letters and
the Latin-1 and Latin Extended-A/B letters). Letters outside the BMP count as letters except the
emoji and symbol planes' (U+1F000-U+1FFFF) and the tags and private planes (U+E0000 and above).
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

from functools import lru_cache

import numba as nb
import numpy as np

from dataclean.text.utf8 import decode_code_point

LETTER, HAN, KANA, LATIN = 0, 1, 2, 3


@lru_cache(maxsize=1)
def _classes() -> np.ndarray:
    """Per BMP code point: 0 none, 1 letter, 2 Han, 3 kana, 4 Latin (each also a letter)."""
    table = np.array([chr(cp).isalpha() for cp in range(0x10000)], np.uint8)
    for low, high in ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF)):
        table[low : high + 1] = np.where(table[low : high + 1] > 0, 2, 0)
    table[0x3040:0x3100] = np.where(table[0x3040:0x3100] > 0, 3, 0)
    table[0x31F0:0x3200] = np.where(table[0x31F0:0x3200] > 0, 3, 0)  # katakana extensions
    table[0x41:0x5B] = table[0x61:0x7B] = 4
    latin = table[0xC0:0x250]
    table[0xC0:0x250] = np.where(latin > 0, 4, 0)
    return table


@nb.njit(cache=True, nogil=True)
def _count_kernel(
    data: np.ndarray, offsets: np.ndarray, max_chars: int, classes: np.ndarray, counts: np.ndarray
) -> None:
    """Adds each text's counts to counts[text] (zeros, allocated by the caller: `dataclean.jit`)."""
    for t in range(len(offsets) - 1):
        i, stop, chars = offsets[t], offsets[t + 1], 0
        while i < stop and chars < max_chars:
            cp, size = decode_code_point(data, i)
            i += size
            chars += 1
            if cp < 0x10000:
                kind = classes[cp]
                if kind:
                    counts[t, LETTER] += 1
                    if kind > 1:
                        counts[t, kind - 1] += 1
            elif cp < 0x1F000 or (0x20000 <= cp < 0xE0000):
                counts[t, LETTER] += 1
                if 0x20000 <= cp < 0x32000:
                    counts[t, HAN] += 1


def script_counts(data: np.ndarray, offsets: np.ndarray, max_chars: int) -> np.ndarray:
    """int64 [texts, 4]: letters, Han, kana, Latin in each text's first `max_chars` characters."""
    counts = np.zeros((len(offsets) - 1, 4), np.int64)
    _count_kernel(data, offsets, max_chars, _classes(), counts)
    return counts
