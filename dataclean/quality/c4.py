"""C4QualityFilter in filter mode, for the quality pass: the document-level outcome of its line loop.

Helpers of `dataclean.quality.signals` (compiled code only). Over `text.splitlines()`, each line
stripped, with Wikipedia citations removed: lines with a word over 1,000 characters, without
terminal punctuation (`. ? ! " '`, not `...`) or with under 3 words are passed over; then
`lorem ipsum` drops the document, `javascript` passes the line over, `{` drops the document, a
policy phrase passes the line over, and the sentences of the other lines are counted as spaCy's
sentencizer counts them (on the document's own words when the line had no citation).
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numpy as np

from dataclean.jit import helper
from dataclean.quality import chars as F
from dataclean.quality.lines import line_ends
from dataclean.quality.tokenizer import tokenize

# C4's lower-cased substring tests: lorem ipsum (drops the document), javascript (drops the
# line), then its policy phrases (drop the line).
PATTERNS = (
    "lorem ipsum",
    "javascript",
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)


def first_chars_table() -> np.ndarray:
    """Per ASCII character, the bits of the `PATTERNS` that start with it."""
    table = np.zeros(128, np.int64)
    for which, pattern in enumerate(PATTERNS):
        table[ord(pattern[0])] |= 1 << which
    return table


@helper
def _sentence_step(buf, s, t, flags, state):  # type: ignore[no-untyped-def]
    """One token `buf[s:t]` through spaCy's sentencizer; `state` is (sentences, seen_end)."""
    sentences, seen_end = state
    final = t - s == 1 and (flags[buf[s]] & F.SENTENCE_END) != 0
    punct = True
    for m in range(s, t):
        if not flags[buf[m]] & F.P_CATEGORY:
            punct = False
            break
    if seen_end and not punct and not final:
        return sentences + 1, False
    return sentences, seen_end or final


@helper
def _sentences(buf, tokens, first, last, flags):  # type: ignore[no-untyped-def]
    """Sentences spaCy's sentencizer finds in a line whose tokens are `tokens[first:last]` (over
    `buf`): one, plus one per token that is neither punctuation nor sentence-final after a
    sentence-final one. Whitespace between tokens that spaCy keeps as a token (a run longer than
    one space, or not starting with a space) counts as a token that is not punctuation."""
    state = (1, False)
    for k in range(first, last):
        if k > first:
            gap = tokens[k, 0] - tokens[k - 1, 1]
            if (gap > 1 or (gap == 1 and buf[tokens[k - 1, 1]] != 32)) and state[1]:
                state = (state[0] + 1, False)
        state = _sentence_step(buf, tokens[k, 0], tokens[k, 1], flags, state)
    return state[0]


@helper
def _c4_line(cps, s, e, flags, buf):  # type: ignore[no-untyped-def]
    """C4's view of one line: strip it, count its whitespace-separated words and the longest,
    and remove Wikipedia citations (`[12]`, `[edit]`, `[citation needed]`): (start, end, whether
    the line was copied into `buf` without its citations (then start is 0), words, longest)."""
    while s < e and flags[cps[s]] & F.SPACE:
        s += 1
    while e > s and flags[cps[e - 1]] & F.SPACE:
        e -= 1
    words = longest = 0
    i = s
    while i < e:
        while i < e and flags[cps[i]] & F.SPACE:
            i += 1
        j = i
        while j < e and not flags[cps[j]] & F.SPACE:
            j += 1
        if j > i:
            words += 1
            longest = max(longest, j - i)
        i = j
    cited = False
    for i in range(s, e):
        if cps[i] == 91 and _citation_end(cps, i, e) > 0:
            cited = True
            break
    if not cited:
        return s, e, False, words, longest
    n = 0
    i = s
    while i < e:
        end = _citation_end(cps, i, e) if cps[i] == 91 else -1
        if end > 0:
            i = end
            continue
        buf[n] = cps[i]
        n += 1
        i += 1
    return 0, n, True, words, longest


# As code points: a string constant would make numba compile its unicode machinery.
_EDIT = np.array([ord(ch) for ch in "[edit]"], np.int64)
_CITATION_NEEDED = np.array([ord(ch) for ch in "[citation needed]"], np.int64)


@helper
def _citation_end(cps, i, e):  # type: ignore[no-untyped-def]
    """End of the Wikipedia citation (`[12]`, `[]`, `[edit]`, `[citation needed]`) at `i`, or -1."""
    j = i + 1
    while j < e and 48 <= cps[j] <= 57:
        j += 1
    if j < e and cps[j] == 93:
        return j + 1
    end = _literal(cps, i, e, _EDIT)
    return end if end > 0 else _literal(cps, i, e, _CITATION_NEEDED)


@helper
def _literal(cps, i, e, text):  # type: ignore[no-untyped-def]
    """End of `text` (an array of code points) if `cps[i:]` starts with it, else -1."""
    if e - i < len(text):
        return -1
    for k in range(len(text)):
        if cps[i + k] != text[k]:
            return -1
    return i + len(text)


@helper
def _c4_ends(buf, s, e, flags, cjk):  # type: ignore[no-untyped-def]
    """C4's terminal punctuation test on `buf[s:e]` (`. ? ! " '`, not `...`); `cjk` adds every
    terminal mark and a closing quote after one."""
    if e <= s:
        return False
    last = buf[e - 1]
    if e - s >= 3 and last == 46 and buf[e - 2] == 46 and buf[e - 3] == 46:
        return False
    if last == 46 or last == 63 or last == 33 or last == 34 or last == 39:
        return True
    return cjk and line_ends(buf, flags, s, e, cjk)


@helper
def _phrases(buf, s, e, patterns, offsets, first_chars):  # type: ignore[no-untyped-def]
    """Bit w set when `buf[s:e]`, lower-cased (ASCII), contains pattern w; `first_chars[c]` has
    the bits of the patterns starting with ASCII character c."""
    found = 0
    for i in range(s, e):
        c = buf[i]
        if 65 <= c <= 90:
            c += 32
        if c >= 128 or not first_chars[c]:
            continue
        for which in range(len(offsets) - 1):
            if first_chars[c] & (1 << which) and not found & (1 << which):
                p0, p1 = offsets[which], offsets[which + 1]
                if i + p1 - p0 <= e:
                    k = 1
                    while k < p1 - p0:
                        d = buf[i + k]
                        if 65 <= d <= 90:
                            d += 32
                        if d != patterns[p0 + k]:
                            break
                        k += 1
                    if k == p1 - p0:
                        found |= 1 << which
    return found


@helper
def c4_outcome(  # type: ignore[no-untyped-def]  # (a numba helper: numba types its arguments)
    cps,
    length,
    flags,
    tables,
    mode,
    min_words,
    max_word,
    cjk,
    patterns,
    offsets,
    first_chars,
    buf,
    tokens,
    line_tokens,
    stack,
    seg,
):
    """C4QualityFilter's document-level outcome over `text.splitlines()`: (0, sentences of the
    kept lines), or (1, 0) for lorem ipsum, (2, 0) for a curly bracket in a line that reached
    those tests. `tokens` are the document's words: a line without citations reuses its own;
    `mode` the tokenizer's word style bits (`dataclean.quality.tokenizer`)."""
    sentences = 0
    zero = np.int64(0)  # not 0: numba would compile the helpers again for the literal
    start = i = zero
    k = 0  # first document token at or after the line
    while start < length:
        while i < length and not flags[cps[i]] & F.LINE_BREAK:
            i += 1
        a, b, copied, words, longest = _c4_line(cps, start, i, flags, buf)
        line_start = start
        if i < length and cps[i] == 13 and i + 1 < length and cps[i + 1] == 10:
            i += 1
        i += 1
        start = i
        text = buf if copied else cps
        if (
            (max_word >= 0 and longest > max_word)
            or not _c4_ends(text, a, b, flags, cjk)
            or words < min_words
        ):
            continue
        found = _phrases(text, a, b, patterns, offsets, first_chars)
        if found & 1:
            return 1, 0
        if found & 2:
            continue
        for m in range(a, b):
            if text[m] == 123:
                return 2, 0
        if found:
            continue
        if copied:
            count = tokenize(buf, zero, b, flags, tables, mode, line_tokens, stack, seg)
            sentences += _sentences(buf, line_tokens, zero, count, flags)
        else:
            while k < len(tokens) and tokens[k, 0] < line_start:
                k += 1
            last = k
            while last < len(tokens) and tokens[last, 0] < b:
                last += 1
            sentences += _sentences(cps, tokens, k, last, flags)
    return 0, sentences
