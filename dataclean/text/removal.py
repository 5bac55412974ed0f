"""The clean stage's removal steps as one compiled pass over an Arrow batch's UTF-8 bytes.

Most rows need no repair (no mojibake pair, C1 character, HTML entity, `Â`/`Ã` before a lost
continuation byte) and no joiner rule (ZWJ/ZWNJ), only the removal steps: CR and CRLF and
U+2028/U+2029 become LF, the removed characters go, the exotic spaces become a space. For those
rows `removal_pass` does these steps on the bytes, counts what `dataclean.stages.clean` counts
(characters changed, garbage characters, characters) and says whether the result is blank, without
a Python string per row. The other rows are flagged and left to the Python path; the same pass
finds the mojibake pairs (as `dataclean.text.mojibake.mojibake_pair_flags` does), so that the
Python path skips its pair search in rows without one. About 390 MB/s per core on the clean
benchmark's web + Chinese corpus.

Which character does what comes from the clean stage's own regular expressions, applied to every
code point once (`char_classes`), not from a second list here; the steps are independent (no step
adds or removes another's characters) except CRLF, which the pass reads before the others, as the
Python path's first substitution does.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import re
from functools import lru_cache

import numba as nb
import numpy as np
import pyarrow as pa

from dataclean.jit import helper
from dataclean.text.mojibake import pair_masks
from dataclean.text.utf8 import decode_code_point, utf8_buffers

GARBAGE, REMOVE, SPACE, NEWLINE, CR, FALLBACK, WHITESPACE, AMPERSAND = 1, 2, 4, 8, 16, 32, 64, 128
# ftfy's HTML entity (`ftfy.chardata.HTML_ENTITY_RE`, which tests/stages/test_clean.py pins): "&", "#"
# or not, 1 to 24 ASCII letters or digits, ";". A row with one goes to the Python path, which
# unescapes it unless a "<" came before it.
_ENTITY_MAX = 24
_SURROGATES = range(0xD800, 0xE000)


@lru_cache(maxsize=4)
def char_classes(
    garbage: re.Pattern[str],
    remove: re.Pattern[str],
    spaces: re.Pattern[str],
    line_separators: re.Pattern[str],
    fallback: re.Pattern[str],
) -> np.ndarray:
    """Per code point (uint8 [0x110000]), the bits above: what the clean stage's patterns (each a
    single-character class, but `line_separators`) do to it, and whether `str.isspace` holds."""
    points = np.arange(0x110000, dtype=np.uint32)
    points[_SURROGATES.start : _SURROGATES.stop] = 0  # not in valid UTF-8; reset below
    every = points.tobytes().decode("utf-32-le")
    classes = np.zeros(0x110000, np.uint8)
    for pattern, bit in ((garbage, GARBAGE), (remove, REMOVE), (spaces, SPACE), (fallback, FALLBACK)):
        for match in re.finditer(f"(?:{pattern.pattern})+", every):
            classes[match.start() : match.end()] |= bit
    for char in ("\r", "\u2028", "\u2029", "\n"):
        if line_separators.fullmatch(char):
            classes[ord(char)] |= CR if char == "\r" else NEWLINE
    for char in map(chr, range(0x3100)):  # str.isspace holds for none above U+3000
        if char.isspace():
            classes[ord(char)] |= WHITESPACE
    classes[ord("&")] |= AMPERSAND
    classes[_SURROGATES.start : _SURROGATES.stop] = FALLBACK
    return classes


@helper
def _entity_at(data, i, stop):  # type: ignore[no-untyped-def]
    """Whether an HTML entity's name and ";" follow an "&" (at i - 1)."""
    if i < stop and data[i] == 35:  # "#"
        i += 1
    length = 0
    while i < stop and length <= _ENTITY_MAX:
        byte = data[i]
        if byte == 59:  # ";"
            return length > 0
        if not (48 <= byte <= 57 or 65 <= byte <= 90 or 97 <= byte <= 122):
            return False
        length += 1
        i += 1
    return False


@nb.njit(cache=True, nogil=True)
def _removal_kernel(data, offsets, classes, lead, continuation, find_pairs, out, new_offsets, counts, flags):  # type: ignore[no-untyped-def]
    """The pass over every text (`removal_pass`), into arrays the caller allocates (zeros but
    `out`; `dataclean.jit`): counts[:, 0..2] changed, garbage and all characters, flags[:, 0..2]
    blank, Python path, mojibake pair. Returns the bytes written to `out`."""
    n = len(offsets) - 1
    changed, garbage, chars = counts[0], counts[1], counts[2]
    blank, python, pairs = flags[0], flags[1], flags[2]
    o = 0
    for t in range(n):
        start, stop = offsets[t], offsets[t + 1]
        first = o
        i = start
        count, bad, nch, white = 0, 0, 0, True
        previous = np.uint16(0)  # the encodings in which the previous character is a lead byte
        while i < stop:
            byte = data[i]
            if byte < 0x80 and classes[byte] == 0:  # most bytes: ASCII that stays
                out[o] = byte
                o += 1
                i += 1
                nch += 1
                white = False
                previous = np.uint16(0)
                continue
            code, size = decode_code_point(data, i)
            if code >= 0x80 and code < 0x10000 and find_pairs:
                if previous & continuation[code]:
                    pairs[t] = python[t] = True
                    break
                previous = lead[code]
            else:
                previous = np.uint16(0)
            nch += 1
            cls = classes[code]
            if cls == 0:
                for k in range(size):
                    out[o + k] = data[i + k]
                o += size
                white = False
                i += size
                continue
            if cls & 32 or (cls & 128 and _entity_at(data, i + 1, stop)):  # FALLBACK
                python[t] = True
                break
            if cls & 1:  # GARBAGE
                bad += 1
            if cls & 16:  # CR; a CRLF is one change
                out[o] = 10
                o += 1
                count += 1
                if i + 1 < stop and data[i + 1] == 10:
                    i += 1
                    nch += 1
            elif cls & 8:  # NEWLINE
                out[o] = 10
                o += 1
                count += 1
            elif cls & 2:  # REMOVE
                count += 1
            elif cls & 4:  # SPACE
                out[o] = 32
                o += 1
                count += 1
            else:
                for k in range(size):
                    out[o + k] = data[i + k]
                o += size
                if not cls & 64:
                    white = False
            i += size
        if python[t]:  # the original bytes, for the Python path to replace
            # Whether the rest holds a pair, as the pair search of the Python path wants to know.
            while find_pairs and not pairs[t] and i < stop:
                code, size = decode_code_point(data, i)
                if code >= 0x80 and code < 0x10000:
                    if previous & continuation[code]:
                        pairs[t] = True
                    previous = lead[code]
                else:
                    previous = np.uint16(0)
                i += size
            o = first
            for k in range(start, stop):
                out[o] = data[k]
                o += 1
        else:
            changed[t], garbage[t], chars[t], blank[t] = count, bad, nch, white
        new_offsets[t + 1] = o
    return o


def removal_pass(
    texts: pa.Array, classes: np.ndarray, find_pairs: bool
) -> tuple[pa.Array, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For a `string` array: (the texts with the removal steps done, rows for the Python path as
    they were; per row, characters changed, garbage characters, characters, blank after removal;
    which rows need the Python path; which hold a mojibake pair, looked for if `find_pairs`: a
    lead then a continuation character that one encoding explains, as
    `dataclean.text.mojibake.mojibake_pair_flags` finds them; such a row needs the Python path)."""
    data, offsets = utf8_buffers(texts)
    lead, continuation = pair_masks()
    n = len(offsets) - 1
    out = np.empty(max(int(offsets[n] - offsets[0]), 1), np.uint8)
    new_offsets = np.zeros(n + 1, np.int32)
    counts, flags = np.zeros((3, n), np.int64), np.zeros((3, n), np.bool_)
    used = _removal_kernel(
        data, offsets, classes, lead, continuation, find_pairs, out, new_offsets, counts, flags
    )
    out = out[:used]
    changed, garbage, chars = counts
    blank, python, pairs = flags
    array = pa.StringArray.from_buffers(len(texts), pa.py_buffer(new_offsets), pa.py_buffer(out))
    return array, changed, garbage, chars, blank, python, pairs
