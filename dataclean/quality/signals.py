"""Every quality statistic of every document of a batch, in one compiled pass over its UTF-8 bytes.

Each statistic is the number datatrove's filter compares with its threshold, computed the way its
Python does (`datatrove.pipeline.filters`, 0.10): Gopher repetition on paragraphs
(`re.split(r"\\n{2,}", text.strip())`), lines (`re.split("\\n+", text)`) and words (the
n-grams of `" ".join` for the top n-gram, of `"".join` with datatrove's skip-ahead for the
duplicated ones; among n-grams of equal count the first seen is the top one, as
`Counter.most_common(1)` picks); Gopher quality on words and `text.splitlines()`; C4 in filter
mode (the document-level outcome of its line loop: `lorem_ipsum` or `curly_bracket` in the
first line that reaches that test, else the sentences of the lines it keeps, counted as spaCy's
sentencizer does); FineWeb on `text.split("\\n")`. Words are `dataclean.quality.tokenizer`'s.
Distinct paragraphs, lines and n-grams are told apart by 64-bit hashes of their code points and
length (a collision, about one in 10^19 pairs, would count two different ones as a duplicate).

Per table (language) the kernel takes: whether Han/kana characters are one word each, the C4
words-per-line minimum and longest word, FineWeb's short-line length, whether a closing quote
after terminal punctuation ends a line (the Chinese rules), and the stop words. A row's table is
given, or chosen by its script (Han/kana letters over half its letters: the Han table); Han
text given a table without Han words gets the Han table too.
"""

# numba kernels compute on numpy scalars, which mypy sees as Any here.
# mypy: disable-error-code="no-any-return"

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from dataclean.jit import helper
from dataclean.quality import chars as F
from dataclean.quality.tokenizer import _fnv, tokenize, tokenizer_tables
from dataclean.text.utf8 import decode_code_point, utf8_buffers

# The statistics, one column each of the kernel's output (`SIGNALS` names them).
SIGNALS = (
    "chars",
    "dup_para_frac",
    "dup_para_char_frac",
    "dup_line_frac",
    "dup_line_char_frac",
    "top_2_gram",
    "top_3_gram",
    "top_4_gram",
    "duplicated_5_n_grams",
    "duplicated_6_n_grams",
    "duplicated_7_n_grams",
    "duplicated_8_n_grams",
    "duplicated_9_n_grams",
    "duplicated_10_n_grams",
    "words",  # words with a character outside datatrove's PUNCTUATION_SET
    "mean_word_length",
    "hash_word_ratio",
    "ellipsis_word_ratio",
    "bullet_lines_ratio",
    "end_ellipsis_lines_ratio",
    "alpha_words_ratio",
    "stop_words",
    "c4_document_drop",  # 0 none, 1 lorem ipsum, 2 curly bracket
    "c4_sentences",
    "nonempty_lines",
    "line_punct_ratio",
    "short_line_ratio",
    "char_dup_ratio",
    "list_ratio",
    "tokens",
    "table",
    "long_run_fraction",  # characters in long n-gram runs over all characters
)
INDEX = {name: i for i, name in enumerate(SIGNALS)}
_B = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xFF51AFD7ED558CCD)


@helper
def _lookup(keys, stamps, epoch, key, mask):  # type: ignore[no-untyped-def]
    """Slot of `key` in an open-addressing table whose live slots carry `epoch` (or the empty
    slot where it goes)."""
    i = np.int64((key ^ (key >> np.uint64(31))) * _MIX >> np.uint64(20)) & mask
    while stamps[i] == epoch and keys[i] != key:
        i = (i + 1) & mask
    return i


@helper
def _seen(keys, stamps, epoch, key, mask):  # type: ignore[no-untyped-def]
    """Whether `key` was added since `epoch` began; adds it if not."""
    i = _lookup(keys, stamps, epoch, key, mask)
    if stamps[i] == epoch:
        return True
    stamps[i] = epoch
    keys[i] = key
    return False


@helper
def _key(cps, s, e):  # type: ignore[no-untyped-def]
    return _fnv(cps, s, e) ^ (np.uint64(e - s) * _B)


@helper
def _is_space(flags, c):  # type: ignore[no-untyped-def]
    return flags[c] & F.SPACE


@helper
def _line_ends(cps, flags, s, e, quotes):  # type: ignore[no-untyped-def]
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
def _duplicates(cps, s, e, paragraphs, keys, stamps, epoch, mask):  # type: ignore[no-untyped-def]
    """Gopher's paragraphs (`paragraphs`: split at 2+ newlines) or lines (split at 1+) of
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
        if i < e and paragraphs and j - i < 2:
            i = j
            continue
        count += 1
        if _seen(keys, stamps, epoch, _key(cps, start, i), mask):
            dup += 1
            chars += i - start
        if i >= e:
            break
        start = i = j
    return count, dup, chars


@helper
def _word_hashes(cps, tokens, count, wh, wp, wl):  # type: ignore[no-untyped-def]
    """Per word: its polynomial hash, base**length and length, so that n-gram hashes compose."""
    for k in range(count):
        h = np.uint64(0)
        power = np.uint64(1)
        for i in range(tokens[k, 0], tokens[k, 1]):
            h = h * _B + np.uint64(cps[i])
            power = power * _B
        wh[k] = h
        wp[k] = power
        wl[k] = tokens[k, 1] - tokens[k, 0]


@helper
def _top_ngram(wh, wp, wl, count, n, keys, stamps, counts, firsts, epoch, mask, joined):  # type: ignore[no-untyped-def]
    """Characters of the most frequent `" ".join` n-gram times its count (the first seen wins
    ties); without `joined` (Han words, written without spaces) the separators are not counted."""
    best_count = 0
    best_first = count
    best_length = 0
    for i in range(count - n + 1):
        h = wh[i]
        length = wl[i]
        for k in range(1, n):
            h = (h * _B + np.uint64(32)) * wp[i + k] + wh[i + k]
            length += 1 + wl[i + k]
        key = h ^ (np.uint64(length) * _MIX)
        slot = _lookup(keys, stamps, epoch, key, mask)
        if stamps[slot] != epoch:
            stamps[slot] = epoch
            keys[slot] = key
            counts[slot] = 1
            firsts[slot] = i
        else:
            counts[slot] += 1
        seen = counts[slot]
        if seen > best_count or (seen == best_count and firsts[slot] < best_first):
            best_count, best_first, best_length = seen, firsts[slot], length
    if not joined:
        best_length -= n - 1
    return best_length * best_count


@helper
def _duplicated_ngrams(wh, wp, wl, count, n, keys, stamps, epoch, mask):  # type: ignore[no-untyped-def]
    """datatrove's `find_all_duplicate`: characters of `"".join` n-grams seen before, skipping
    the n words of each."""
    idx = 0
    repeated = 0
    while idx < count - n + 1:
        h = wh[idx]
        length = wl[idx]
        for k in range(1, n):
            h = h * wp[idx + k] + wh[idx + k]
            length += wl[idx + k]
        if _seen(keys, stamps, epoch, h ^ (np.uint64(length) * _MIX), mask):
            repeated += length
            idx += n
        else:
            idx += 1
    return repeated


@helper
def _contains(buf, e, patterns, offsets, which):  # type: ignore[no-untyped-def]
    """Whether `buf[:e]`, lower-cased (ASCII), contains pattern `which`."""
    p0, p1 = offsets[which], offsets[which + 1]
    size = p1 - p0
    for i in range(e - size + 1):
        k = 0
        while k < size:
            c = buf[i + k]
            if 65 <= c <= 90:
                c += 32
            if c != patterns[p0 + k]:
                break
            k += 1
        if k == size:
            return True
    return False


@helper
def _sentences(buf, e, flags, tables, han, tokens, stack):  # type: ignore[no-untyped-def]
    """Sentences spaCy's sentencizer finds in `buf[:e]`: one, plus one per token that is neither
    punctuation nor sentence-final after a sentence-final one. Whitespace that spaCy keeps as a
    token (a run longer than one space, or not starting with a space) counts as a token."""
    sentences = 1
    seen_end = False
    i = 0
    while i < e:
        if flags[buf[i]] & F.SPACE:
            j = i
            while j < e and flags[buf[j]] & F.SPACE:
                j += 1
            if (j - i > 1 or buf[i] != 32) and seen_end:
                sentences += 1
                seen_end = False
            i = j
            continue
        j = i + 1
        if not (han and flags[buf[i]] & F.HAN):
            while j < e and not (flags[buf[j]] & F.SPACE) and not (han and flags[buf[j]] & F.HAN):
                j += 1
        count = tokenize(buf, i, j, flags, tables, han, tokens, stack)
        for k in range(count):
            s, t = tokens[k, 0], tokens[k, 1]
            final = t - s == 1 and (flags[buf[s]] & F.SENTENCE_END) != 0
            punct = True
            for m in range(s, t):
                if not flags[buf[m]] & F.P_CATEGORY:
                    punct = False
                    break
            if seen_end and not punct and not final:
                sentences += 1
                seen_end = False
            elif final:
                seen_end = True
        i = j
    return sentences


@helper
def _c4_line(cps, s, e, flags, buf):  # type: ignore[no-untyped-def]
    """C4's view of one line: strip it, count its whitespace-separated words and the longest,
    and copy it with Wikipedia citations (`[12]`, `[edit]`, `[citation needed]`) removed into
    `buf`. Returns (length in `buf`, words, longest word)."""
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
    n = 0
    i = s
    while i < e:
        if cps[i] == 91:  # "["
            j = i + 1
            while j < e and 48 <= cps[j] <= 57:
                j += 1
            end = j + 1 if j < e and cps[j] == 93 else -1
            if end < 0:
                end = _literal(cps, i, e, "[edit]")
            if end < 0:
                end = _literal(cps, i, e, "[citation needed]")
            if end > 0:
                i = end
                continue
        buf[n] = cps[i]
        n += 1
        i += 1
    return n, words, longest


@helper
def _literal(cps, i, e, text):  # type: ignore[no-untyped-def]
    """End of `text` if `cps[i:]` starts with it, else -1."""
    if e - i < len(text):
        return -1
    for k in range(len(text)):
        if cps[i + k] != ord(text[k]):
            return -1
    return i + len(text)


@helper
def _c4_ends(buf, n, flags, cjk):  # type: ignore[no-untyped-def]
    """C4's terminal punctuation test (`. ? ! " '`, not `...`); `cjk` adds every terminal mark
    and a closing quote after one."""
    if n == 0:
        return False
    last = buf[n - 1]
    if n >= 3 and last == 46 and buf[n - 2] == 46 and buf[n - 3] == 46:
        return False
    if last == 46 or last == 63 or last == 33 or last == 34 or last == 39:
        return True
    return cjk and _line_ends(buf, flags, 0, n, True)


@helper
def _c4(cps, length, flags, tables, han, min_words, max_word, cjk, patterns, offsets, buf, tokens, stack):  # type: ignore[no-untyped-def]
    """C4QualityFilter's document-level outcome over `text.splitlines()`: (0, sentences of the
    kept lines), or (1, 0) for lorem ipsum, (2, 0) for a curly bracket in a line that reached
    those tests."""
    sentences = 0
    start = i = 0
    while start < length:
        while i < length and not flags[cps[i]] & F.LINE_BREAK:
            i += 1
        n, words, longest = _c4_line(cps, start, i, flags, buf)
        if i < length and cps[i] == 13 and i + 1 < length and cps[i + 1] == 10:
            i += 1
        i += 1
        start = i
        if (max_word >= 0 and longest > max_word) or not _c4_ends(buf, n, flags, cjk) or words < min_words:
            continue
        if _contains(buf, n, patterns, offsets, 0):
            return 1, 0
        if _contains(buf, n, patterns, offsets, 1):
            continue
        for k in range(n):
            if buf[k] == 123:
                return 2, 0
        policy = False
        for which in range(2, len(offsets) - 1):
            if _contains(buf, n, patterns, offsets, which):
                policy = True
                break
        if not policy:
            sentences += _sentences(buf, n, flags, tables, han, tokens, stack)
    return 0, sentences


@helper
def _gopher_lines(cps, length, flags):  # type: ignore[no-untyped-def]
    """Over `text.splitlines()`: (lines, lines starting with `•`/`-`, lines ending in `...`/`…`)."""
    lines = bullets = ellipses = 0
    start = i = 0
    while start < length:
        while i < length and not flags[cps[i]] & F.LINE_BREAK:
            i += 1
        lines += 1
        a, b = start, i
        while a < b and flags[cps[a]] & F.SPACE:
            a += 1
        while b > a and flags[cps[b - 1]] & F.SPACE:
            b -= 1
        if b > a and (cps[a] == 0x2022 or cps[a] == 45):
            bullets += 1
        if b > a and (cps[b - 1] == 0x2026 or (b - a >= 3 and cps[b - 1] == 46 and cps[b - 2] == 46 and cps[b - 3] == 46)):
            ellipses += 1
        if i < length and cps[i] == 13 and i + 1 < length and cps[i + 1] == 10:
            i += 1
        i += 1
        start = i
    return lines, bullets, ellipses


@helper
def _fineweb(cps, length, flags, short, quotes, keys, stamps, epoch, mask):  # type: ignore[no-untyped-def]
    """Over the non-blank lines of `text.split("\\n")`: (lines, ending in terminal punctuation,
    at most `short` characters, characters of lines repeating an earlier one, newlines)."""
    lines = punctuated = shorts = dup_chars = newlines = 0
    start = 0
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
            end = i
            while quotes and end > start and flags[cps[end - 1]] & F.SPACE:
                end -= 1  # the Chinese rules: trailing spaces do not hide the end of a sentence
            if _line_ends(cps, flags, start, end, quotes) or (quotes and _holds_sentence(cps, start, end)):
                punctuated += 1
            if i - start <= short:
                shorts += 1
            if _seen(keys, stamps, epoch, _key(cps, start, i), mask):
                dup_chars += i - start
        start = i + 1
    return lines, punctuated, shorts, dup_chars, newlines


@numba.njit(cache=True)
def _signals_kernel(  # type: ignore[no-untyped-def]
    data, offsets, flags, tables, row_table, han_table, other_table, params, stops, patterns,
    pattern_offsets, c4_on, out, cps, tokens, stack, buf, line_tokens, wh, wp, wl, keys, stamps,
    counts, firsts,
):
    """Every statistic of `SIGNALS` per document into `out` (rows). `params` per table: Han
    words, C4 words per line, C4 longest word, FineWeb short line, CJK punctuation, number of
    stop words; `stops[table]` their FNV hashes. The rest is scratch the caller sizes."""
    epoch = 0
    for doc in range(len(offsets) - 1):
        length = han = alpha = breaks = 0
        i, stop = offsets[doc], offsets[doc + 1]
        while i < stop:
            c, size = decode_code_point(data, i)
            i += size
            cps[length] = c
            length += 1
            if c == 10:
                breaks += 1
            if flags[c] & F.IS_ALPHA:
                alpha += 1
                if flags[c] & F.HAN:
                    han += 1
        table = row_table[doc]
        # Han text always gets Han rules: a label (lid.176 calls some repetitive Han text `en`)
        # never hands it to a table that cannot cut it into words.
        is_han = han_table >= 0 and 2 * han > alpha
        if table < 0 or (is_han and params[table, 0] == 0):
            table = han_table if is_han else other_table
        row = out[doc]
        row[30] = table
        row[0] = length
        if length == 0:
            continue
        han_words, min_words, max_word, short, cjk, n_stops = params[table]
        words = tokenize(cps, 0, length, flags, tables, han_words != 0, tokens, stack)
        # A table twice the size of what goes in, small for small documents (it stays in cache).
        mask = 15
        while mask < 2 * max(words, breaks + 1):
            mask = 2 * mask + 1
        mask = min(mask, len(keys) - 1)
        # Gopher repetition
        s, e = 0, length
        while s < e and flags[cps[s]] & F.SPACE:
            s += 1
        while e > s and flags[cps[e - 1]] & F.SPACE:
            e -= 1
        epoch += 1
        count, dup, chars = _duplicates(cps, s, e, True, keys, stamps, epoch, mask)
        row[1], row[2] = dup / count, chars / length
        epoch += 1
        count, dup, chars = _duplicates(cps, 0, length, False, keys, stamps, epoch, mask)
        row[3], row[4] = dup / count, chars / length
        row[29] = words
        _word_hashes(cps, tokens, words, wh, wp, wl)
        for n in range(2, 5):
            epoch += 1
            row[3 + n] = _top_ngram(wh, wp, wl, words, n, keys, stamps, counts, firsts, epoch, mask, han_words == 0) / length
        for n in range(5, 11):
            epoch += 1
            row[3 + n] = _duplicated_ngrams(wh, wp, wl, words, n, keys, stamps, epoch, mask) / length
        # Gopher quality
        symbols = letters = alphas = found = 0
        for k in range(words):
            a, b = tokens[k, 0], tokens[k, 1]
            symbol = True
            has_alpha = False
            for m in range(a, b):
                f = flags[cps[m]]
                if not f & F.PUNCTUATION:
                    symbol = False
                if f & F.IS_ALPHA:
                    has_alpha = True
            if not symbol:
                symbols += 1
                letters += b - a
            if has_alpha:
                alphas += 1
            if b - a <= 8 and n_stops:
                h = _fnv(cps, a, b)
                for w in range(n_stops):
                    if stops[table, w] == h:
                        found |= 1 << w
        hashes = ellipses = 0
        run = 0
        for k in range(length):
            c = cps[k]
            if c == 35:
                hashes += 1
            elif c == 0x2026:
                ellipses += 1
            run = run + 1 if c == 46 else 0
            if run == 3:
                ellipses += 1
                run = 0
        row[14] = symbols
        row[15] = letters / symbols if symbols else np.nan
        row[16] = hashes / words if words else 0.0
        row[17] = ellipses / words if words else 0.0
        lines, bullets, end_ellipses = _gopher_lines(cps, length, flags)
        row[18] = bullets / lines if lines else 0.0
        row[19] = end_ellipses / lines if lines else 0.0
        row[20] = alphas / words if words else 0.0
        stop_count = 0
        while found:
            stop_count += found & 1
            found >>= 1
        row[21] = stop_count
        # C4
        if c4_on:
            row[22], row[23] = _c4(
                cps, length, flags, tables, han_words != 0, min_words, max_word, cjk != 0, patterns,
                pattern_offsets, buf, line_tokens, stack,
            )
        # FineWeb
        epoch += 1
        lines, punctuated, shorts, dup_chars, newlines = _fineweb(
            cps, length, flags, short, cjk != 0, keys, stamps, epoch, mask
        )
        row[24] = lines
        if lines:
            row[25] = punctuated / lines
            row[26] = shorts / lines
            row[27] = dup_chars / (length - newlines)
            row[28] = newlines / words


# C4's lower-cased substring tests: lorem ipsum (drops the document), javascript (drops the
# line), then its policy phrases (drop the line).
_PATTERNS = (
    "lorem ipsum",
    "javascript",
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)


def compute_signals(
    texts: pa.Array | pa.ChunkedArray,
    row_table: np.ndarray,
    han_table: int,
    other_table: int,
    params: np.ndarray,
    stops: np.ndarray,
    c4: bool = True,
) -> np.ndarray:
    """The `SIGNALS` of each text (float64, one row per text). `row_table[i]` is text i's table
    (-1: by script, `han_table` or `other_table`; `han_table` -1: every row keeps its table); `params` (int64, one row per table) and
    `stops` (uint64 FNV hashes of each table's stop words) as `_signals_kernel` reads them."""
    out = np.zeros((len(texts), len(SIGNALS)), np.float64)
    if len(texts) == 0:
        return out
    data, offsets = utf8_buffers(texts)
    # Code points never outnumber bytes: size the scratch by the longest text's bytes.
    longest = max(1, int(np.diff(offsets).max()))
    capacity = 1 << int(2 * longest + 2).bit_length()
    codes = np.array([ord(ch) for pattern in _PATTERNS for ch in pattern], np.int64)
    pattern_offsets = np.zeros(len(_PATTERNS) + 1, np.int64)
    pattern_offsets[1:] = np.cumsum([len(pattern) for pattern in _PATTERNS])
    _signals_kernel(
        data, offsets, F.char_classes(), tokenizer_tables(), row_table.astype(np.int64), han_table,
        other_table, params.astype(np.int64), stops.astype(np.uint64), codes, pattern_offsets, c4, out,
        np.empty(longest, np.uint32), np.empty((longest, 2), np.int64), np.empty((longest, 2), np.int64),
        np.empty(longest, np.uint32), np.empty((longest, 2), np.int64), np.empty(longest, np.uint64),
        np.empty(longest, np.uint64), np.empty(longest, np.int64), np.zeros(capacity, np.uint64),
        np.zeros(capacity, np.int32), np.zeros(capacity, np.int32), np.zeros(capacity, np.int32),
    )
    return out

