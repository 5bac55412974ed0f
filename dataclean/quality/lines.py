"""Line and paragraph statistics of the quality pass, and the hash sets it counts repeats with.

Helpers of `dataclean.quality.signals` (compiled code only): Gopher's duplicate paragraphs and
lines, Gopher's bullet and ellipsis lines over `str.splitlines()`, FineWeb's lines over
`str.split("\\n")`, the terminal-punctuation test both FineWeb and C4 use, and which characters
are code (fenced or indented blocks: the code-aware Chinese rules).
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numpy as np

from dataclean.jit import helper
from dataclean.quality import chars as F
from dataclean.quality.tokenizer import _fnv

BASE = np.uint64(0x9E3779B97F4A7C15)  # of the polynomial word and n-gram hashes
MIX = np.uint64(0xFF51AFD7ED558CCD)


@helper
def lookup(keys, stamps, epoch, key, mask):  # type: ignore[no-untyped-def]
    """Slot of `key` in an open-addressing table whose live slots carry `epoch` (or the empty
    slot where it goes)."""
    i = np.int64((key ^ (key >> np.uint64(31))) * MIX >> np.uint64(20)) & mask
    while stamps[i] == epoch and keys[i] != key:
        i = (i + 1) & mask
    return i


@helper
def seen(keys, stamps, epoch, key, mask):  # type: ignore[no-untyped-def]
    """Whether `key` was added since `epoch` began; adds it if not."""
    i = lookup(keys, stamps, epoch, key, mask)
    if stamps[i] == epoch:
        return True
    stamps[i] = epoch
    keys[i] = key
    return False


@helper
def text_key(cps, s, e):  # type: ignore[no-untyped-def]
    return _fnv(cps, s, e) ^ (np.uint64(e - s) * BASE)


@helper
def line_ends(cps, flags, s, e, quotes):  # type: ignore[no-untyped-def]
    """Whether line `cps[s:e]` ends in terminal punctuation (with `quotes`: or in a closing quote
    right after it)."""
    if e <= s:
        return False
    last = cps[e - 1]
    if flags[last] & F.TERMINAL:
        return True
    return quotes and e - s >= 2 and _is_closing_quote(last) and (flags[cps[e - 2]] & F.TERMINAL) != 0


@helper
def _holds_sentence(cps, s, e):  # type: ignore[no-untyped-def]
    """Whether `cps[s:e]` holds a Chinese sentence end (。！？) anywhere: in the Chinese rules
    such a line is prose even when it ends in a colon or a cut."""
    for i in range(s, e):
        c = cps[i]
        if c == 0x3002 or c == 0xFF01 or c == 0xFF1F:
            return True
    return False


@helper
def _is_closing_quote(c):  # type: ignore[no-untyped-def]
    return c == 0x201D or c == 0x2019 or c == 34 or c == 39 or c == 0x300D or c == 0x300F or c == 0x300B


@helper
def duplicates(cps, s, e, breaks, keys, stamps, epoch, mask):  # type: ignore[no-untyped-def]
    """Gopher's paragraphs (`breaks` 2: split at 2+ newlines) or lines (1: split at 1+) of
    `cps[s:e]`: (how many, how many repeat an earlier one, their characters)."""
    count = dup = chars = 0
    start = s
    i = s
    while True:
        if i < e and cps[i] != 10:
            i += 1
            continue
        j = i
        while j < e and cps[j] == 10:
            j += 1
        if i < e and j - i < breaks:
            i = j
            continue
        count += 1
        if seen(keys, stamps, epoch, text_key(cps, start, i), mask):
            dup += 1
            chars += i - start
        if i >= e:
            break
        start = i = j
    return count, dup, chars


@helper
def gopher_lines(cps, length, flags, code, code_aware):  # type: ignore[no-untyped-def]
    """Over `text.splitlines()`: (lines, lines starting with `•`/`-`, lines ending in `...`/`…`).
    With `code_aware`, lines of code (`code`: a YAML list, a diff) are none of them: a bullet
    list is prose's."""
    lines = bullets = ellipses = 0
    start = i = 0
    while start < length:
        while i < length and not flags[cps[i]] & F.LINE_BREAK:
            i += 1
        if not (code_aware and code[start]):
            lines += 1
            a, b = start, i
            while a < b and flags[cps[a]] & F.SPACE:
                a += 1
            while b > a and flags[cps[b - 1]] & F.SPACE:
                b -= 1
            if b > a and (cps[a] == 0x2022 or cps[a] == 45):
                bullets += 1
            if b > a and (
                cps[b - 1] == 0x2026
                or (b - a >= 3 and cps[b - 1] == 46 and cps[b - 2] == 46 and cps[b - 3] == 46)
            ):
                ellipses += 1
        if i < length and cps[i] == 13 and i + 1 < length and cps[i + 1] == 10:
            i += 1
        i += 1
        start = i
    return lines, bullets, ellipses


@helper
def fineweb_lines(cps, length, flags, short, quotes, keys, stamps, epoch, mask, code, code_aware):  # type: ignore[no-untyped-def]
    """Over the non-blank lines of `text.split("\\n")`: (lines, ending in terminal punctuation,
    at most `short` characters, characters of lines repeating an earlier one, newlines, prose
    lines). With `code_aware`, lines of code (`code`) are no prose: the punctuation and short-line
    counts, and the prose lines they are shares of, leave them out, and a repeated one is no
    duplicated line."""
    lines = punctuated = shorts = dup_chars = newlines = prose = 0
    start = np.int64(0)  # not 0: a literal would compile the helpers it reaches again
    for i in range(length + 1):
        if i < length and cps[i] != 10:
            continue
        if i < length:
            newlines += 1
        blank = True
        for k in range(start, i):
            if not flags[cps[k]] & F.SPACE:
                blank = False
                break
        if not blank:
            lines += 1
            # a code line repeated (a fence, `}`, `return x`) is code's layout, not boilerplate
            if seen(keys, stamps, epoch, text_key(cps, start, i), mask) and not (code_aware and code[start]):
                dup_chars += i - start
            if not (code_aware and code[start]):
                prose += 1
                end = i
                while quotes and end > start and flags[cps[end - 1]] & F.SPACE:
                    end -= 1  # the Chinese rules: trailing spaces do not hide the end of a sentence
                if line_ends(cps, flags, start, end, quotes) or (quotes and _holds_sentence(cps, start, end)):
                    punctuated += 1
                if i - start <= short:
                    shorts += 1
        start = i + 1
    return lines, punctuated, shorts, dup_chars, newlines, prose


@helper
def code_mask(cps, length, code, indented):  # type: ignore[no-untyped-def]
    """code[i] = 1 where character i is code: on a line inside a ``` fence (the fence lines too)
    or, with `indented`, indented by a tab or four spaces (a Markdown code block); else 0. English
    web pages indent prose (a page's paragraphs, 63 of 697 Common Crawl pages): fences only there."""
    fence = False
    start = 0
    while start < length:
        end = start
        while end < length and cps[end] != 10:
            end += 1
        k = start
        spaces = 0
        while k < end and (cps[k] == 32 or cps[k] == 9):
            spaces += 4 if cps[k] == 9 else 1
            k += 1
        ticks = k + 2 < end + 1 and k + 2 < length and cps[k] == 96 and cps[k + 1] == 96 and cps[k + 2] == 96
        inside = fence or ticks or (indented and spaces >= 4 and k < end)
        if ticks:
            fence = not fence
        for i in range(start, min(end + 1, length)):
            code[i] = 1 if inside else 0
        start = end + 1
