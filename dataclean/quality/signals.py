"""Every quality statistic of every document of a batch, in one compiled pass over its UTF-8 bytes.

Each statistic is the number datatrove's filter compares with its threshold, computed the way its
Python does (`datatrove.pipeline.filters`, 0.10): Gopher repetition on paragraphs
(`re.split(r"\\n{2,}", text.strip())`), lines (`re.split("\\n+", text)`) and words (the
n-grams of `" ".join` for the top n-gram, of `"".join` with datatrove's skip-ahead for the
duplicated ones; among n-grams of equal count the first seen is the top one, as
`Counter.most_common(1)` picks); Gopher quality on words and `text.splitlines()`; C4 in filter
mode (the document-level outcome of its line loop: `lorem_ipsum` or `curly_bracket` in the
first line that reaches that test, else the sentences of the lines it keeps, counted as spaCy's
sentencizer does); FineWeb on `text.split("\\n")`. Words are `dataclean.quality.tokenizer`'s,
or, for a table with the `SUDACHI` style (Japanese), SudachiPy's, cut in Python for those rows
only (`dataclean.quality.japanese`) and given to the kernel as spans.
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
import pyarrow.compute as pc

from dataclean.jit import helper
from dataclean.quality import chars as F
from dataclean.quality.c4 import PATTERNS, c4_outcome, first_chars_table
from dataclean.quality.japanese import sudachi_available, word_bounds
from dataclean.quality.lines import (
    BASE,
    MIX,
    code_mask,
    duplicates,
    fineweb_lines,
    gopher_lines,
    lookup,
    seen,
)
from dataclean.quality.runs import MIN_REPEATS, char_runs, word_runs
from dataclean.quality.segmenter import segmentable
from dataclean.quality.tokenizer import SEGMENT, SUDACHI, _fnv, segmenter_scratch, tokenize, tokenizer_tables
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
# Longest stop word a table may hold (FineWeb-2's longest: 23 characters); longer words are never
# hashed for the stop-word test.
STOP_WORD_MAX_LENGTH = 24
# The column of `params` (one row per table) holding the table's word style bits.
STYLE_PARAM = 5


@helper
def _word_hashes(cps, tokens, count, wh, wp, wl):  # type: ignore[no-untyped-def]
    """Per word: its polynomial hash, base**length and length, so that n-gram hashes compose."""
    for k in range(count):
        h = np.uint64(0)
        power = np.uint64(1)
        for i in range(tokens[k, 0], tokens[k, 1]):
            h = h * BASE + np.uint64(cps[i])
            power = power * BASE
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
            h = (h * BASE + np.uint64(32)) * wp[i + k] + wh[i + k]
            length += 1 + wl[i + k]
        key = h ^ (np.uint64(length) * MIX)
        slot = lookup(keys, stamps, epoch, key, mask)
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
        if seen(keys, stamps, epoch, h ^ (np.uint64(length) * MIX), mask):
            repeated += length
            idx += n
        else:
            idx += 1
    return repeated


@helper
def _inside_run(cuts, first, last, s, e):  # type: ignore[no-untyped-def]
    """Whether `[s, e)` lies within a word run found for this document (`cuts[first:last]`)."""
    for m in range(first, last):  # noqa: SIM110 - numba compiles no generator in any()
        if cuts[m, 3] <= s and e <= cuts[m, 4]:
            return True
    return False


@helper
def _url_hashes(cps, a, b):  # type: ignore[no-untyped-def]
    """The `#` of word `cps[a:b]` if it is a link (holds `://`), else 0 (called for words with a
    `#` only: the scan for `://` is not for every word)."""
    link = False
    for m in range(a, b - 2):
        if cps[m] == 58 and cps[m + 1] == 47 and cps[m + 2] == 47:
            link = True
            break
    if not link:
        return 0
    found = 0
    for m in range(a, b):
        if cps[m] == 35:
            found += 1
    return found


@numba.njit(cache=True, nogil=True)
def _signals_kernel(  # type: ignore[no-untyped-def]
    data,
    offsets,
    flags,
    tables,
    row_table,
    han_table,
    other_table,
    params,
    stops,
    patterns,
    pattern_offsets,
    first_chars,
    c4_on,
    runs_on,
    out,
    cuts,
    cps,
    tokens,
    stack,
    buf,
    line_tokens,
    wh,
    wp,
    wl,
    keys,
    stamps,
    counts,
    firsts,
    seg,
    code,
    given_bounds,
    given_spans,
):
    """Every statistic of `SIGNALS` per document into `out` (rows). `params` per table: Han
    words, C4 words per line, C4 longest word, FineWeb short line, CJK punctuation, number of
    stop words; `stops[table]` their FNV hashes. Long n-gram runs (`runs_on`) are cut at the
    spans written to `cuts` (rows of document, cut start, cut end, run start, run end); returns
    how many. `seg`: the Chinese segmenter's tables and scratch
    (`dataclean.quality.tokenizer.segmenter_scratch`).
    `code`: scratch for which characters are code (`code_aware` tables). `given_bounds[doc]`:
    the rows of `given_spans` that are the document's words, cut outside (SudachiPy's, `SUDACHI`
    tables), or (-1, -1) to cut them here. The rest is scratch the caller sizes."""
    # np.int64(0), not 0: numba compiles a helper again for every literal it is called with
    zero = np.int64(0)
    epoch = 0
    n_cuts = zero
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
        han_majority = 2 * han > alpha
        is_han = han_table >= 0 and han_majority
        if table < 0 or (is_han and params[table, 0] == 0):
            table = han_table if is_han else other_table
        row = out[doc]
        row[30] = table
        row[0] = length
        if length == 0:
            continue
        # One element at a time: unpacking the row would compile numba's shape-mismatch error
        # message (its string formatting: about 3 s of a first run's compile CPU).
        han_words, min_words, max_word = params[table, 0], params[table, 1], params[table, 2]
        short, cjk, style, code_aware = params[table, 3], params[table, 4], params[table, 5], params[table, 6]
        alpha_words, n_stops = params[table, 7], params[table, 8]
        mode = style | (1 if han_words else 0)  # the tokenizer's word style bits
        if han_majority and han_words == 0 and mode & SEGMENT:
            # English's jieba words for Han runs are for English quoting Chinese: a Chinese page
            # held to English's table (`quality.language=en`) keeps datatrove's English words
            mode -= SEGMENT
        given = given_bounds[doc, 0] >= 0
        if given:
            words = given_bounds[doc, 1] - given_bounds[doc, 0]
            for k in range(words):  # a loop, not a slice copy (its shape check: the same error message)
                tokens[k, 0] = given_spans[given_bounds[doc, 0] + k, 0]
                tokens[k, 1] = given_spans[given_bounds[doc, 0] + k, 1]
        else:
            words = tokenize(cps, zero, length, flags, tables, mode, tokens, stack, seg)
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
        count, dup, chars = duplicates(cps, s, e, np.int64(2), keys, stamps, epoch, mask)
        row[1], row[2] = dup / count, chars / length
        epoch += 1
        count, dup, chars = duplicates(cps, zero, length, np.int64(1), keys, stamps, epoch, mask)
        row[3], row[4] = dup / count, chars / length
        row[29] = words
        _word_hashes(cps, tokens, words, wh, wp, wl)
        # datatrove's `" ".join` n-grams: Han characters as words are counted without the spaces
        # (written without them), SudachiPy's words with them, as datatrove counts its words
        joined = han_words == 0 or given
        for n in range(2, 5):
            epoch += 1
            row[3 + n] = (
                _top_ngram(wh, wp, wl, words, n, keys, stamps, counts, firsts, epoch, mask, joined) / length
            )
        for n in range(5, 11):
            epoch += 1
            row[3 + n] = _duplicated_ngrams(wh, wp, wl, words, n, keys, stamps, epoch, mask) / length
        # Gopher quality
        if code_aware:
            code_mask(cps, length, code, code_aware == 1)
        # English's table with jieba's words (`SEGMENT` without Han words): a Chinese word quoted
        # in English is a word, but its length is no English word's (English's 3-10 characters
        # would call an English page quoting a paragraph of 红楼梦 one of too short words)
        quoting = han_words == 0 and (mode & SEGMENT) != 0
        symbols = letters = alphas = found = code_symbols = url_hashes = quoted = 0
        for k in range(words):
            a, b = tokens[k, 0], tokens[k, 1]
            if code_aware and code[a]:
                code_symbols += 1  # a code token is content (no short doc), not prose to judge
                continue
            symbol = True
            has_alpha = has_hash = False
            for m in range(a, b):
                f = flags[cps[m]]
                if not f & F.PUNCTUATION:
                    symbol = False
                if f & F.IS_ALPHA:
                    has_alpha = True
                if cps[m] == 35:
                    has_hash = True
            if code_aware and has_hash:
                url_hashes += _url_hashes(cps, a, b)  # a link's `#fragment` is no symbol-heavy prose
            if not symbol:
                symbols += 1
                if quoting and segmentable(cps[a]):
                    quoted += 1
                else:
                    letters += b - a
            if has_alpha:
                alphas += 1
            if b - a <= STOP_WORD_MAX_LENGTH and n_stops:
                h = _fnv(cps, a, b)
                for w in range(n_stops):
                    if stops[table, w] == h:
                        found |= 1 << w
        hashes = ellipses = 0
        run = 0
        for k in range(length):
            c = cps[k]
            if code_aware and code[k]:
                run = 0
                continue  # a comment's `#` or a `...` in code is no symbol-heavy prose
            if c == 35:
                hashes += 1
            elif c == 0x2026:
                ellipses += 1
            run = run + 1 if c == 46 else 0
            if run == 3:
                ellipses += 1
                run = 0
        row[14] = symbols + code_symbols
        row[15] = letters / (symbols - quoted) if symbols > quoted else np.nan
        row[16] = (hashes - url_hashes) / words if words else 0.0
        row[17] = ellipses / words if words else 0.0
        lines, bullets, end_ellipses = gopher_lines(cps, length, flags, code, code_aware)
        # a single line is never a bullet list (`-{T|Gtk#}-Gtk#...` once began a one-line article)
        # nor a list of cut lines: Gopher's rules judge lists, not a paragraph ending in "……"
        row[18] = bullets / lines if lines > 1 else 0.0
        row[19] = end_ellipses / lines if lines > 1 else 0.0
        # datatrove counts punctuation tokens as words; `alpha_words` tables count words (Gopher's)
        if alpha_words:
            row[20] = alphas / symbols if symbols else 0.0
        else:
            # datatrove's share over every token, code tokens left out of both sides (not only
            # of the letters: a code block would make prose "symbol-heavy")
            prose_tokens = words - code_symbols
            row[20] = alphas / prose_tokens if prose_tokens else 0.0
        stop_count = 0
        while found:
            stop_count += found & 1
            found >>= 1
        row[21] = stop_count
        # C4
        if c4_on:
            row[22], row[23] = c4_outcome(
                cps,
                length,
                flags,
                tables,
                mode,
                min_words,
                max_word,
                cjk != 0,
                patterns,
                pattern_offsets,
                first_chars,
                buf,
                tokens[:words],
                line_tokens,
                stack,
                seg,
            )
        # Long n-gram runs: over the words, then characters inside long words outside those runs
        if runs_on:
            first_cut = n_cuts
            covered, n_cuts = word_runs(cps, tokens, words, wh, flags, doc, cuts, n_cuts)
            last_word_cut = n_cuts
            for m in range(words):
                a, b = tokens[m, 0], tokens[m, 1]
                if b - a >= MIN_REPEATS and not _inside_run(cuts, first_cut, last_word_cut, a, b):
                    inside, n_cuts = char_runs(cps, a, b, flags, doc, cuts, n_cuts)
                    covered += inside
            row[31] = covered / length
        # FineWeb
        epoch += 1
        lines, punctuated, shorts, dup_chars, newlines, prose = fineweb_lines(
            cps, length, flags, short, cjk != 0, keys, stamps, epoch, mask, code, code_aware
        )
        row[24] = lines
        if lines:
            # shares of the prose lines (all lines but code in `code_aware` tables); none: no verdict
            row[25] = punctuated / prose if prose else np.nan
            row[26] = shorts / prose if prose else np.nan
            row[27] = dup_chars / (length - newlines)
            row[28] = newlines / words
    return n_cuts


def sudachi_rows(row_table: np.ndarray, params: np.ndarray) -> np.ndarray:
    """The rows whose table counts SudachiPy's words (`SUDACHI`: the Japanese table): a row given
    a table keeps it in the kernel unless that table has no Han words, and these have them."""
    given = row_table >= 0
    styles = params[np.where(given, row_table, 0), STYLE_PARAM]
    return np.flatnonzero(given & ((styles & SUDACHI) != 0))


def _given_words(
    texts: pa.Array | pa.ChunkedArray, row_table: np.ndarray, params: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """SudachiPy's words of the rows whose table counts them (`dataclean.quality.japanese`), as
    `_signals_kernel` takes them; none without SudachiPy (those rows' words: one per character)."""
    rows = sudachi_rows(row_table, params)
    if len(rows) == 0 or not sudachi_available():
        return np.full((len(texts), 2), -1, np.int64), np.zeros((0, 2), np.int64)
    return word_bounds(texts.take(pa.array(rows)).to_pylist(), rows, len(texts))


def _has_han(texts: pa.Array | pa.ChunkedArray) -> bool:
    """Whether any text holds a character the Chinese segmenter cuts (its tables load only then)."""
    found = pc.match_substring_regex(texts, "[\u4e00-\u9fd5]")
    return bool(pc.any(found).as_py())


def compute_signals(
    texts: pa.Array | pa.ChunkedArray,
    row_table: np.ndarray,
    han_table: int,
    other_table: int,
    params: np.ndarray,
    stops: np.ndarray,
    c4: bool = True,
    runs: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """The `SIGNALS` of each text (float64, one row per text), and the long n-gram runs' cuts
    (int64 rows of text, start, end in code points; with `runs`). `row_table[i]` is text i's
    table (-1: by script, `han_table` or `other_table`; `han_table` -1: every row keeps its
    table); `params` (int64, one row per table) and `stops` (uint64 FNV hashes of each table's
    stop words) as `_signals_kernel` reads them."""
    out = np.zeros((len(texts), len(SIGNALS)), np.float64)
    if len(texts) == 0:
        return out, np.zeros((0, 3), np.int64)
    data, offsets = utf8_buffers(texts)
    # Code points never outnumber bytes: size the scratch by the longest text's bytes.
    longest = max(1, int(np.diff(offsets).max()))
    capacity = 1 << int(2 * longest + 2).bit_length()
    codes = np.array([ord(ch) for pattern in PATTERNS for ch in pattern], np.int64)
    pattern_offsets = np.zeros(len(PATTERNS) + 1, np.int64)
    pattern_offsets[1:] = np.cumsum([len(pattern) for pattern in PATTERNS])
    # A run spans 32+ characters: at most one per 32 bytes of the batch.
    cuts = np.zeros((int(offsets[-1] - offsets[0]) // 32 + 1, 5), np.int64)
    row_table = row_table.astype(np.int64)
    params = params.astype(np.int64)
    bounds, spans = _given_words(texts, row_table, params)
    found = _signals_kernel(
        data, offsets, F.char_classes(), tokenizer_tables(), row_table, han_table,
        other_table, params, stops.astype(np.uint64), codes, pattern_offsets,
        first_chars_table(), c4, runs, out, cuts, np.empty(longest, np.uint32),
        np.empty((longest, 2), np.int64), np.empty((longest, 2), np.int64), np.empty(longest, np.uint32),
        np.empty((longest, 2), np.int64), np.empty(longest, np.uint64), np.empty(longest, np.uint64),
        np.empty(longest, np.int64), np.zeros(capacity, np.uint64), np.zeros(capacity, np.int32),
        np.zeros(capacity, np.int32), np.zeros(capacity, np.int32),
        segmenter_scratch(longest, _has_han(texts)), np.zeros(longest, np.uint8), bounds, spans,
    )  # fmt: skip
    return out, cuts[:found, :3]
