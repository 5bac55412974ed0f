"""Letters by script in each text's sample: what `dataclean.lang` needs besides the model.

One numba pass over a string array's UTF-8 bytes counts, in each text's first `max_chars`
characters: letters of any script (a text without any is `und`), Han characters (CJK unified
ideographs, their extensions and compatibility forms), kana, Latin letters (ASCII letters and
the Latin-1 and Latin Extended-A/B letters), and Latin prose words. Letters outside the BMP count
as letters except the emoji and symbol planes' (U+1F000-U+1FFFF) and the tags and private planes
(U+E0000 and above).

A Latin prose word is a chunk (cut at whitespace, Han/kana characters and CJK or full-width
punctuation, U+2E80 and above) holding a Latin letter and none of what marks code or an address:
`_ = ( ) { } [ ] ; < > / \\ @ # $ % ^ * | ~` or a backtick, or a `.` between two letters or
digits (`plt.plot`, `example.com`). Lines inside a ``` fence and lines indented by a tab or four
spaces (code blocks) hold none. So `loss` and `grad norm` in a Chinese sentence are one and two
words, while `TrainingArguments(output_dir="out")`, `"train_batch_size": 16` and a URL are not
prose: the language stage weighs words against Han characters, code and addresses set apart.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

from functools import lru_cache

import numba as nb
import numpy as np

from dataclean.text.utf8 import decode_code_point

LETTER, HAN, KANA, LATIN, LATIN_WORDS = 0, 1, 2, 3, 4
_COUNTS = 5


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
def _is_code_mark(cp: int) -> bool:
    """Characters that make a chunk code or an address, not a prose word."""
    return (
        cp == 0x5F or cp == 0x3D or cp == 0x28 or cp == 0x29 or cp == 0x7B or cp == 0x7D
        or cp == 0x5B or cp == 0x5D or cp == 0x3B or cp == 0x3C or cp == 0x3E or cp == 0x2F
        or cp == 0x5C or cp == 0x40 or cp == 0x23 or cp == 0x24 or cp == 0x25 or cp == 0x5E
        or cp == 0x2A or cp == 0x7C or cp == 0x7E or cp == 0x60
    )  # fmt: skip


@nb.njit(cache=True, nogil=True)
def _count_kernel(
    data: np.ndarray, offsets: np.ndarray, max_chars: int, classes: np.ndarray, counts: np.ndarray
) -> None:
    """Adds each text's counts to counts[text] (zeros, allocated by the caller: `dataclean.jit`)."""
    for t in range(len(offsets) - 1):
        i, stop, chars = offsets[t], offsets[t + 1], 0
        # chunk state: holds a Latin letter, holds a code mark, a `.` right after a letter/digit
        latin_chunk = code_chunk = dot_after_alnum = previous_alnum = False
        # line state: at its start, its indent, inside a ``` fence, a code line, leading backticks
        line_start, spaces, fence, code_line, ticks = True, 0, False, False, 0
        while i < stop and chars < max_chars:
            cp, size = decode_code_point(data, i)
            i += size
            chars += 1
            kind = 0
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
                    kind = 2
            if line_start:
                if cp == 0x20:
                    spaces += 1
                elif cp == 0x09:
                    spaces += 4
                elif cp == 0x60:
                    ticks += 1
                else:
                    line_start = False
                    code_line = spaces >= 4
                    if ticks >= 3:
                        fence = not fence
            alnum = kind == 4 or 0x30 <= cp <= 0x39
            if cp <= 0x20 or cp >= 0x2E80 or kind == 2 or kind == 3:
                if latin_chunk and not code_chunk and not fence and not code_line:
                    counts[t, LATIN_WORDS] += 1
                latin_chunk = code_chunk = dot_after_alnum = False
            else:
                latin_chunk |= kind == 4
                if _is_code_mark(cp) or (dot_after_alnum and alnum):
                    code_chunk = True
                dot_after_alnum = cp == 0x2E and previous_alnum
            previous_alnum = alnum
            if cp == 0x0A:
                line_start, spaces, code_line, ticks = True, 0, False, 0
        if latin_chunk and not code_chunk and not fence and not code_line:
            counts[t, LATIN_WORDS] += 1


def script_counts(data: np.ndarray, offsets: np.ndarray, max_chars: int) -> np.ndarray:
    """int64 [texts, 5]: letters, Han, kana, Latin letters, Latin prose words in each text's first
    `max_chars` characters."""
    counts = np.zeros((len(offsets) - 1, _COUNTS), np.int64)
    _count_kernel(data, offsets, max_chars, _classes(), counts)
    return counts
